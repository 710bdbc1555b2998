"""Query-log mining (README "Mining the query log"): statements of pg_stat_statements become
pending question/SQL pairs that only an approval puts into the example pool. Without a
database: selecting and normalising statements, templates and their parameters, the prompt
through the gate. tests/db/test_mining.py mines pg_stat_statements inside PostgreSQL.
"""

from __future__ import annotations

import pytest

from nl2sql.core.errors import CandidateRefused
from nl2sql.core.sqlcheck import parse_single, to_sql
from nl2sql.core.types import Column, Schema, Table
from nl2sql.curated._log_statements import (
    LoggedStatement,
    MinedCandidate,
    as_template,
    classify,
    without_comments,
)
from nl2sql.curated._mined_questions import check_question, clean_question, question_prompt
from nl2sql.model.gate import Gate

OWN = frozenset({"nl2sql", "explain", "ask", "reindex"})


def _schema(country_allowed: bool = True) -> Schema:
    cols = [
        Column("singer_id", "integer", True),
        Column("name", "text"),
        Column(
            "country", "text", sample_values=["France", "Japan"], values_allowed=country_allowed
        ),
        Column("age", "integer"),
        Column("is_male", "boolean"),
    ]
    return Schema(tables=[Table(name="singer", schema="public", table="singer", columns=cols)])


# --------------------------------------------------------------------------------------------
# pure: selecting and normalising
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql, reason",
    [
        ("SELECT count(*) FROM singer", None),
        ("SELECT name FROM singer WHERE country = $1 UNION SELECT name FROM stadium", None),
        ("INSERT INTO singer (name) VALUES ($1)", "dml"),
        ("UPDATE singer SET age = $1", "dml"),
        ("WITH d AS (DELETE FROM singer RETURNING 1) SELECT count(*) FROM d", "dml"),
        ("CREATE TABLE x (a int)", "ddl"),
        ("ALTER TABLE singer ADD COLUMN b int", "ddl"),
        ("SET search_path = public", "utility"),
        ("BEGIN", "utility"),
        ("VACUUM singer", "utility"),
        ("SELECT * INTO t2 FROM singer", "utility"),
        ("SELECT nl2sql.explain($1)", "nl2sql"),
        ("SELECT nl2sql($1)", "nl2sql"),
        ("SELECT * FROM nl2sql.example", "nl2sql"),
        ("SELECT relname FROM pg_class", "catalog"),
        ("SELECT * FROM information_schema.tables", "catalog"),
        ("SELECT $1", "no_table"),
        ("<insufficient privilege>", "hidden"),
        ("SELECT FROM WHERE (", "unparsable"),
    ],
)
def test_classify_keeps_only_queries_over_user_relations(sql, reason):
    assert classify(sql, OWN)[1] == reason


def test_a_normalised_statement_becomes_a_typed_template():
    tree = parse_single(
        "SELECT name FROM singer WHERE country = $1 AND age > $2 ORDER BY age LIMIT $3"
    )
    kind, sql, slots = as_template(tree, _schema())
    assert kind == "template"
    assert sql == (
        "SELECT name FROM singer WHERE country = :country AND age > :age ORDER BY age LIMIT :limit"
    )
    assert sorted((s.name, s.kind, s.column or []) for s in slots) == [
        ("age", "number", ["public", "singer", "age"]),
        ("country", "value", ["public", "singer", "country"]),
        ("limit", "number", []),
    ]
    # without parameters: a plain query, unchanged
    assert as_template(parse_single("SELECT count(*) FROM singer"), _schema())[:2] == (
        "query",
        "SELECT COUNT(*) FROM singer",
    )
    # two comparisons with one column get two names
    _, sql, _ = as_template(
        parse_single("SELECT name FROM singer WHERE age BETWEEN $1 AND $2"), _schema()
    )
    assert ":age AND :age_2" in sql


@pytest.mark.parametrize(
    "sql", ["SELECT $1 FROM singer", "SELECT name FROM singer WHERE is_male = $1"]
)
def test_a_parameter_no_question_can_bind_is_refused(sql):
    with pytest.raises(CandidateRefused):
        as_template(parse_single(sql), _schema())


def test_the_question_of_a_template_must_show_each_parameter():
    cand = MinedCandidate(
        LoggedStatement(1, "", 3),
        "template",
        "SELECT name FROM singer WHERE country = :country",
        [{"name": "country"}],
        ["singer"],
    )
    assert check_question("Which singers are from :country?", cand) is None
    assert "missing :country" in check_question("Which singers are from France?", cand)
    assert "no question" in check_question("", cand)
    assert (
        clean_question('Question: "How many singers are there?"\nextra')
        == "How many singers are there?"
    )


def test_the_prompt_passes_the_gate():
    """A mined SQL's literals of a withheld column, and its sample values, never reach the
    prompt; with the column allowed they are shown."""
    cand = MinedCandidate(
        LoggedStatement(1, "", 3),
        "query",
        "SELECT name FROM singer WHERE country = 'France' AND age > 30",
        [],
        ["singer"],
    )
    schema = _schema(country_allowed=False)
    gate = Gate(schema, True)
    p = question_prompt(gate, cand, schema)
    assert "France" not in p and "Japan" not in p and "30" not in p
    assert "country = 'value'" in p
    assert gate.report()["held"]["mining"] == {"literals of SQL": 1}
    schema = _schema()
    p = question_prompt(Gate(schema, True), cand, schema)
    assert "country = 'France'" in p and "'Japan'" in p


def test_a_gated_template_keeps_its_named_parameters():
    cand = MinedCandidate(
        LoggedStatement(1, "", 3),
        "template",
        "SELECT name FROM singer WHERE country = :country AND name <> 'x'",
        [{"name": "country"}],
        ["singer"],
    )
    schema = _schema(country_allowed=False)
    p = question_prompt(Gate(schema, True), cand, schema)
    assert "country = :country AND name <> 'value'" in p


COMMENTED = (
    "/* secret 'Alice' */ SELECT name -- the name of 'Bob'\n"
    "FROM singer /* owner: Carol */ WHERE country = $1 -- trailing 'Dave'\n"
    "AND age > $2 /* last: Erin */"
)
COMMENT_TEXT = ("secret", "Alice", "Bob", "Carol", "Dave", "Erin")  # the prompt has /* */


@pytest.mark.parametrize("statement", [COMMENTED, "SELECT count(*) FROM singer -- 'Alice'"])
def test_a_mined_statements_comments_reach_neither_the_prompt_nor_the_stored_pair(statement):
    """pg_stat_statements keeps comments, which may quote another role's values: the parsed
    statement loses them, so the stored text and SQL and the model's prompt carry none."""
    tree, reason = classify(statement, OWN)
    assert reason is None
    stored_query = to_sql(tree)  # what mining stores as the statement's text
    kind, sql, slots = as_template(tree, _schema())
    cand = MinedCandidate(
        LoggedStatement(1, stored_query, 3), kind, sql, [{"name": s.name} for s in slots]
    )
    schema = _schema()
    prompt = question_prompt(Gate(schema, True), cand, schema)
    for text in (stored_query, sql, prompt):
        assert not [w for w in COMMENT_TEXT if w in text], text
    assert not [m for m in ("/*", "--") for t in (stored_query, sql) if m in t]
    if statement == COMMENTED:
        assert sql == "SELECT name FROM singer WHERE country = :country AND age > :age"
        assert stored_query == "SELECT name FROM singer WHERE country = $1 AND age > $2"


def test_without_comments_removes_every_nodes_comments():
    tree = without_comments(parse_single("SELECT /* a */ x -- b\nFROM t /* c */"))
    assert all(not n.comments for n in tree.walk()) and to_sql(tree) == "SELECT x FROM t"
