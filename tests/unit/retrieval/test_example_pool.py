"""Checks of the built-in example pool and the demo concert database (no server needed).

Every SQL text is parsed with sqlglot (PostgreSQL dialect) and every table and
column it references is looked up in the schema it claims to be about: the
JSON schema of its ``db_id`` for the pool, and the tables that ``demo_sql()``
itself creates for ``DEMO_QUESTIONS``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

import nl2sql
from adversarial_corpus import LITERAL_FORMS
from nl2sql.core.errors import CandidateRefused, ConfigError
from nl2sql.core.sqlcheck import constant_values, parse_one
from nl2sql.retrieval.example_pool import (
    MAX_JSON_BYTES,
    make_entry,
    parse_benchmark_json,
    read_json,
    sql_skeleton,
)
from nl2sql_indexer.dev import demo_data

POOL_PATH = Path(nl2sql.__file__).resolve().parent / "data" / "example_pool.json"

QUERY_TYPES = tuple(
    t
    for t in (
        exp.Select,
        getattr(exp, "Union", None),
        getattr(exp, "Intersect", None),
        getattr(exp, "Except", None),
        getattr(exp, "SetOperation", None),
    )
    if t is not None
)

COUNT_QUESTION = re.compile(
    r"^\s*(how many\b|what is the number of\b|what's the number of\b|count the\b"
    r"|give the number of\b|find the number of\b)",
    re.IGNORECASE,
)

FORBIDDEN = ("singer", "concert", "stadium")


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #


def parse_one_query(sql: str) -> exp.Expression:
    """Parse ``sql`` as PostgreSQL; fail unless it is exactly one query statement."""
    statements = [s for s in sqlglot.parse(sql, read="postgres") if s is not None]
    assert len(statements) == 1, f"expected one statement, got {len(statements)}: {sql}"
    tree = statements[0]
    assert isinstance(tree, QUERY_TYPES), f"not a SELECT / set operation: {sql}"
    return tree


def unknown_references(sql: str, schema: dict[str, list[str]]) -> list[str]:
    """Tables / columns that ``sql`` references but ``schema`` does not have.

    Table aliases are resolved to their tables; CTE names, derived-table
    aliases and column aliases defined in the query are not schema objects
    and are ignored. An unqualified column must belong to one of the tables
    the query reads.
    """
    tree = parse_one_query(sql)
    tables = {t.lower(): {c.lower() for c in cols} for t, cols in schema.items()}
    problems: list[str] = []

    cte_names = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    derived = {s.alias.lower() for s in tree.find_all(exp.Subquery) if s.alias} | cte_names
    column_aliases = {a.alias.lower() for a in tree.find_all(exp.Alias) if a.alias}

    alias_to_tables: dict[str, set[str]] = {}
    used_tables: set[str] = set()
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if name in cte_names:
            continue
        if name not in tables:
            problems.append(f"table {name}")
            continue
        used_tables.add(name)
        alias_to_tables.setdefault(table.alias_or_name.lower(), set()).add(name)

    for column in tree.find_all(exp.Column):
        qualifier = column.table.lower()
        if isinstance(column.this, exp.Star):
            if qualifier and qualifier not in alias_to_tables and qualifier not in derived:
                problems.append(f"qualifier {qualifier}.*")
            continue
        name = column.name.lower()
        if qualifier:
            if qualifier in derived:
                continue
            if qualifier not in alias_to_tables:
                problems.append(f"qualifier {qualifier} of {name}")
            elif not any(name in tables[t] for t in alias_to_tables[qualifier]):
                problems.append(f"column {qualifier}.{name}")
        elif name in column_aliases:
            continue
        elif not any(name in tables[t] for t in used_tables):
            problems.append(f"column {name}")
    return problems


def string_literals(sql: str) -> list[str]:
    """The string literals of ``sql`` (LIKE wildcards stripped)."""
    tree = parse_one_query(sql)
    return [
        lit.this.strip("%_")
        for lit in tree.find_all(exp.Literal)
        if lit.is_string and lit.this.strip("%_")
    ]


@pytest.fixture(scope="module")
def pool() -> dict:
    """The example pool, loaded from the package data file."""
    with POOL_PATH.open(encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def demo_statements() -> list[exp.Expression]:
    """demo_sql() parsed into sqlglot statements."""
    return [s for s in sqlglot.parse(demo_data.demo_sql(), read="postgres") if s is not None]


@pytest.fixture(scope="module")
def demo_schema(demo_statements) -> dict[str, list[str]]:
    """table -> columns, read from the CREATE TABLE statements of demo_sql()."""
    schema: dict[str, list[str]] = {}
    for stmt in demo_statements:
        if isinstance(stmt, exp.Create) and str(stmt.args.get("kind", "")).upper() == "TABLE":
            target = stmt.this  # exp.Schema wrapping the table
            table = target.this if isinstance(target, exp.Schema) else target
            cols = [c.name for c in target.expressions if isinstance(c, exp.ColumnDef)]
            schema[table.name] = cols
    return schema


# --------------------------------------------------------------------------- #
# the example pool
# --------------------------------------------------------------------------- #


def test_pool_shape(pool):
    assert set(pool) >= {"schemas", "examples"}
    assert len(pool["examples"]) >= 40
    assert len(pool["schemas"]) >= 6
    for ex in pool["examples"]:
        assert set(ex) >= {"db_id", "question", "sql"}, ex
        assert ex["db_id"] in pool["schemas"], ex["db_id"]
        assert ex["question"].strip() and ex["sql"].strip()
    # every schema is actually used by several examples
    per_db = dict.fromkeys(pool["schemas"], 0)
    for ex in pool["examples"]:
        per_db[ex["db_id"]] += 1
    assert min(per_db.values()) >= 4, per_db


def test_pool_questions_unique(pool):
    questions = [ex["question"].strip().lower() for ex in pool["examples"]]
    assert len(questions) == len(set(questions))


def test_pool_has_counting_questions(pool):
    counting = [
        ex
        for ex in pool["examples"]
        if COUNT_QUESTION.search(ex["question"]) and "count(" in ex["sql"].lower()
    ]
    assert len(counting) >= 8, [ex["question"] for ex in counting]
    # phrased in more than one way
    openers = {COUNT_QUESTION.search(ex["question"]).group(1).lower() for ex in counting}
    assert len(openers) >= 3, openers


def test_pool_schemas_are_not_about_the_demo(pool):
    for db_id, tables in pool["schemas"].items():
        names = [db_id, *tables, *(c for cols in tables.values() for c in cols)]
        for name in names:
            assert not any(word in name.lower() for word in FORBIDDEN), (db_id, name)
    for ex in pool["examples"]:
        text = (ex["question"] + " " + ex["sql"]).lower()
        assert not any(word in text for word in FORBIDDEN), ex


def test_pool_sql_parses_and_matches_schema(pool):
    failures = []
    for ex in pool["examples"]:
        try:
            problems = unknown_references(ex["sql"], pool["schemas"][ex["db_id"]])
        except (sqlglot.errors.ParseError, AssertionError) as e:
            problems = [f"parse: {e}"]
        if problems:
            failures.append((ex["db_id"], ex["sql"], problems))
    assert not failures, failures


def test_pool_covers_spider_constructs(pool):
    trees = [parse_one_query(ex["sql"]) for ex in pool["examples"]]

    def n(pred) -> int:
        return sum(1 for t in trees if pred(t))

    def joins(t) -> int:
        return len(list(t.find_all(exp.Join)))

    assert n(lambda t: t.find(exp.Count)) >= 8
    assert n(lambda t: t.find(exp.Order) and t.find(exp.Limit)) >= 4
    assert n(lambda t: t.find(exp.Group)) >= 6
    assert n(lambda t: t.find(exp.Having)) >= 4
    assert n(lambda t: joins(t) == 1) >= 6
    assert n(lambda t: joins(t) >= 2) >= 4

    def subquery_in(node: exp.In) -> bool:
        return bool(node.args.get("query")) or any(
            isinstance(e, (exp.Select, exp.Subquery)) for e in node.expressions
        )

    assert n(lambda t: any(subquery_in(i) for i in t.find_all(exp.In))) >= 3
    assert (
        n(
            lambda t: any(
                isinstance(i.parent, exp.Not) and subquery_in(i) for i in t.find_all(exp.In)
            )
        )
        >= 3
    )
    for op in ("Union", "Intersect", "Except"):
        assert n(lambda t, op=op: isinstance(t, getattr(exp, op))) >= 1, op
    for agg in (exp.Avg, exp.Max, exp.Min, exp.Sum):
        assert n(lambda t, agg=agg: t.find(agg)) >= 1, agg.__name__
    assert n(lambda t: t.find(exp.Distinct)) >= 3
    assert n(lambda t: t.find(exp.Like)) >= 2


def test_pool_questions_name_their_literals(pool):
    """A string value the SQL filters on is spelled out in the question."""
    missing = []
    for ex in pool["examples"]:
        for value in string_literals(ex["sql"]):
            if value.lower() not in ex["question"].lower():
                missing.append((ex["question"], value))
    assert not missing, missing


# --------------------------------------------------------------------------- #
# the demo database
# --------------------------------------------------------------------------- #


def test_demo_sql_is_deterministic():
    assert demo_data.demo_sql() == demo_data.demo_sql()
    assert demo_data.demo_sql("demo") == demo_data.demo_sql("demo")


def test_demo_sql_respects_schema_argument():
    text = demo_data.demo_sql("concert_demo")
    assert "CREATE SCHEMA IF NOT EXISTS concert_demo" in text
    assert re.search(r"SET search_path = concert_demo\b", text)


def test_demo_sql_defines_tables_with_keys(demo_statements, demo_schema):
    assert demo_statements
    assert set(demo_schema) == {"stadium", "singer", "concert", "singer_in_concert"}
    expected = {
        "stadium": {"stadium_id", "name", "location", "capacity", "highest", "lowest", "average"},
        "singer": {
            "singer_id",
            "name",
            "country",
            "song_name",
            "song_release_year",
            "age",
            "is_male",
        },
        "concert": {"concert_id", "concert_name", "theme", "stadium_id", "year"},
        "singer_in_concert": {"concert_id", "singer_id"},
    }
    for table, cols in expected.items():
        assert cols <= set(demo_schema[table]), (table, demo_schema[table])

    # foreign keys: (table, referenced table) pairs from REFERENCES clauses
    fks = set()
    pks = set()
    for stmt in demo_statements:
        if not (isinstance(stmt, exp.Create) and isinstance(stmt.this, exp.Schema)):
            continue
        table = stmt.this.this.name
        for ref in stmt.find_all(exp.Reference):
            target = ref.this
            target = target.this if isinstance(target, exp.Schema) else target
            fks.add((table, target.name))
        if stmt.find(exp.PrimaryKey) or stmt.find(exp.PrimaryKeyColumnConstraint):
            pks.add(table)
    assert {
        ("concert", "stadium"),
        ("singer_in_concert", "concert"),
        ("singer_in_concert", "singer"),
    } <= fks, fks
    assert pks == set(demo_schema), pks


def test_demo_sql_comments(demo_statements):
    text = demo_data.demo_sql()
    for table in ("stadium", "singer", "concert", "singer_in_concert"):
        assert re.search(rf"COMMENT ON TABLE {table} IS '", text), table
    assert len(re.findall(r"COMMENT ON COLUMN ", text)) >= 15


def _inserted_rows(statements) -> dict[str, list[tuple]]:
    """table -> rows (as tuples of Python values) from the INSERT statements."""
    rows: dict[str, list[tuple]] = {}
    for stmt in statements:
        if not isinstance(stmt, exp.Insert):
            continue
        target = stmt.this
        columns = [c.name for c in target.expressions] if isinstance(target, exp.Schema) else []
        table = target.this.name if isinstance(target, exp.Schema) else target.name
        values = stmt.expression
        for tup in values.expressions:
            vals = []
            for v in tup.expressions:
                if isinstance(v, exp.Literal):
                    vals.append(v.this if v.is_string else float(v.this))
                elif isinstance(v, exp.Boolean):
                    vals.append(v.this)
                else:
                    vals.append(None)
            rows.setdefault(table, []).append(dict(zip(columns, vals)))
    return rows


def test_demo_data_is_sized_and_consistent(demo_statements):
    rows = _inserted_rows(demo_statements)
    assert 10 <= len(rows["stadium"]) <= 30
    assert 40 <= len(rows["singer"]) <= 100
    assert 80 <= len(rows["concert"]) <= 200
    assert 200 <= len(rows["singer_in_concert"]) <= 500

    for table, key in (
        ("stadium", "stadium_id"),
        ("singer", "singer_id"),
        ("concert", "concert_id"),
    ):
        ids = [r[key] for r in rows[table]]
        assert len(ids) == len(set(ids)), table
    stadium_ids = {r["stadium_id"] for r in rows["stadium"]}
    singer_ids = {r["singer_id"] for r in rows["singer"]}
    concert_ids = {r["concert_id"] for r in rows["concert"]}
    assert all(r["stadium_id"] in stadium_ids for r in rows["concert"])
    links = [(r["concert_id"], r["singer_id"]) for r in rows["singer_in_concert"]]
    assert len(links) == len(set(links))
    assert all(c in concert_ids and s in singer_ids for c, s in links)

    # string columns repeat, so they are useful cell values
    for table, col in (("singer", "country"), ("stadium", "location"), ("concert", "theme")):
        values = [r[col] for r in rows[table]]
        assert len(set(values)) < len(values) / 1.5, (table, col)
        assert all(isinstance(v, str) and v for v in values)


def test_demo_questions(demo_schema):
    qs = demo_data.DEMO_QUESTIONS
    assert 8 <= len(qs) <= 10
    assert qs[0] == ("How many singers do we have?", "SELECT count(*) FROM singer")
    failures = []
    for question, sql in qs:
        assert question.strip()
        problems = unknown_references(sql, demo_schema)
        if problems:
            failures.append((sql, problems))
        for value in string_literals(sql):
            assert value.lower() in question.lower(), (question, value)
    assert not failures, failures
    trees = [parse_one_query(sql) for _, sql in qs]
    assert any(t.find(exp.Join) for t in trees)
    assert any(t.find(exp.Group) for t in trees)
    assert any(t.find(exp.Limit) and t.find(exp.Order) for t in trees)
    assert sum(1 for t in trees if t.find(exp.Count)) >= 2


def test_demo_question_literals_occur_in_data(demo_statements):
    """String literals of the gold SQL are real cell values of the demo data."""
    cells = {
        v
        for table_rows in _inserted_rows(demo_statements).values()
        for row in table_rows
        for v in row.values()
        if isinstance(v, str)
    }
    for _, sql in demo_data.DEMO_QUESTIONS:
        for value in string_literals(sql):
            assert value in cells, value


def test_unknown_references_catches_mistakes():
    """The checker itself rejects wrong tables, columns and aliases."""
    schema = {"t": ["a", "b"], "u": ["a", "c"]}
    assert unknown_references("SELECT a FROM t", schema) == []
    assert unknown_references("SELECT x.c FROM t AS y JOIN u AS x ON y.a = x.a", schema) == []
    assert unknown_references("SELECT b AS z FROM t ORDER BY z", schema) == []
    assert unknown_references("WITH w AS (SELECT a FROM t) SELECT w.a FROM w", schema) == []
    assert unknown_references("SELECT c FROM t", schema)  # c is in u only
    assert unknown_references("SELECT y.c FROM t AS y", schema)  # alias resolves to t
    assert unknown_references("SELECT a FROM nope", schema)
    assert unknown_references("SELECT q.a FROM t", schema)  # unknown qualifier
    with pytest.raises((AssertionError, sqlglot.errors.ParseError)):
        parse_one_query("SELECT 1; SELECT 2")
    with pytest.raises((AssertionError, sqlglot.errors.ParseError)):
        parse_one_query("DELETE FROM t")


def test_sql_skeleton_drops_identifiers_and_literals():
    a = sql_skeleton("SELECT count(*) FROM singer WHERE age > 30")
    b = sql_skeleton("SELECT count(*) FROM book WHERE pages > 300")
    c = sql_skeleton("SELECT name FROM singer ORDER BY age DESC LIMIT 1")
    assert a == b and a != c and "singer" not in a and "30" not in a


def test_make_entry_masks_with_the_examples_own_schema():
    e = make_entry(
        "library",
        "How many books did 'Penguin' publish?",
        "SELECT count(*) FROM book WHERE publisher = 'Penguin'",
        {"book": ["book_id", "title", "publisher"]},
    )
    assert "Penguin" not in e.masked_question and "books" not in e.masked_question


def test_benchmark_loader_reports_failures():
    data = "\n".join(
        json.dumps(x)
        for x in [
            {"db_id": "a", "question": "How many?", "query": "SELECT count(*) FROM t"},
            {"db_id": "a", "question": "bad", "query": "SELECT FROM WHERE ("},
            {"db_id": "a", "question": "", "SQL": "SELECT 1"},
        ]
    )
    entries, failures = parse_benchmark_json(data)
    assert len(entries) == 1 and [f["index"] for f in failures] == [1, 2]


@pytest.mark.parametrize("cid, where, mark, node", LITERAL_FORMS, ids=[f[0] for f in LITERAL_FORMS])
def test_an_examples_masked_question_and_skeleton_hold_no_constant_of_any_form(
    cid, where, mark, node
):
    """Issue 31 §4: the masked question (shown in place of the question when the example's SQL
    reads a withheld column) masks the SQL's constants whatever their form; the skeleton holds
    none of its string constants."""
    sql = f"SELECT venue_name FROM venue WHERE {where}"
    if node is None:
        with pytest.raises(CandidateRefused):
            make_entry("local", "Which venue?", sql)
        return
    said = constant_values(parse_one(sql))[0]
    entry = make_entry("local", f"Which venue has the code {said}?", sql)
    assert mark.lower() not in entry.masked_question.lower(), entry.masked_question
    assert said.lower() not in entry.masked_question.lower() or said.isdigit()
    if node not in ("JSONPathKey", "Interval"):  # kept as structure (no model sees a skeleton)
        assert mark.lower() not in entry.sql_skeleton.lower(), entry.sql_skeleton


# nl2sql.load_examples' JSON, hostile: each refused with a message naming what is wrong, or
# the item reported as a failure; never an internal error
HOSTILE_DATA = [
    ("[" * 100_000 + "]" * 100_000, "data nests deeper than 64 levels"),
    ('[{"question": "q", "x": ' + "[" * 70 + "]" * 70 + "}]", "data nests deeper than 64"),
    ("{" + '"a":{' * 5000 + "}" * 5001, "data nests deeper than 64 levels"),
    ('{"question": "q"}\n' + "[" * 5000 + "]" * 5000, "data nests deeper than 64"),
    ("[1, 2", "data is not JSON: Expecting"),
    ('{"question": "q"}\n{"question": ', "data is not JSON: Expecting value: line 1"),
    ("x" * (MAX_JSON_BYTES + 1), "more than nl2sql.load_examples reads at once"),
]


@pytest.mark.parametrize("text, says", HOSTILE_DATA)
def test_hostile_example_json_is_refused_naming_why(text, says):
    with pytest.raises(ConfigError, match=says):
        parse_benchmark_json(text)


@pytest.mark.parametrize(
    "item, says",
    [
        ([1, 2], "not a JSON object but a JSON list"),
        ("SELECT 1", "not a JSON object but a JSON str"),
        (None, "not a JSON object but a JSON NoneType"),
        ({"question": ["q"], "query": "SELECT 1"}, "question is not a text but a JSON list"),
        ({"question": "q", "query": {"a": 1}}, "query is not a text but a JSON dict"),
        ({"question": "q", "query": "SELECT 1", "db_id": 7}, "db_id is not a text"),
    ],
)
def test_an_item_that_is_no_pair_is_a_failure_not_an_error(item, says):
    good = {"db_id": "a", "question": "How many?", "query": "SELECT count(*) FROM t"}
    entries, failures = parse_benchmark_json(json.dumps([good, item, good]))
    assert len(entries) == 2 and [f["index"] for f in failures] == [1]
    assert says in failures[0]["error"]


@pytest.mark.parametrize(
    "tables",
    [[1], [{"db_id": "a", "table_names": ["t"], "column_names": [[5, "c"]]}], [{"x": 1}]],
)
def test_tables_not_in_spiders_form_are_refused(tables):
    with pytest.raises(ConfigError, match="tables must be a JSON array, not a JSON dict"):
        read_json('{"db_id": "a"}', "tables")
    with pytest.raises(ConfigError, match=r"tables\[0\] is not a Spider tables.json entry"):
        parse_benchmark_json("[]", tables=tables)


def test_the_cancel_check_runs_between_pairs():
    pair = {"db_id": "a", "question": "How many?", "query": "SELECT count(*) FROM t"}
    calls = []

    class Cancelled(Exception):
        pass

    def tick():
        calls.append(1)
        raise Cancelled  # what a cancel raises (QueryCanceled) stops the loop

    with pytest.raises(Cancelled):
        parse_benchmark_json(json.dumps([pair] * 5000), tick=tick)
    assert calls == [1]
