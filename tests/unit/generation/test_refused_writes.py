"""A model reply that writes or controls the transaction is refused whole, with a reason naming
the statement kinds, wherever the statement stands among the reply's:
never cut by cleaning to the query it also holds."""

from __future__ import annotations

import pytest

from nl2sql.core.types import Candidate, Schema, Status, Table
from nl2sql.generation import _statement_kinds
from nl2sql.generation.candidates import Evaluator
from nl2sql.generation.cleaning import clean

PREFIX = "the reply writes or controls the transaction: "

# (the kind the reason names, a statement of that kind)
STATEMENTS = [
    ("BEGIN", "BEGIN"),
    ("START", "START TRANSACTION"),
    ("COMMIT", "COMMIT"),
    ("END", "END"),
    ("ROLLBACK", "ROLLBACK"),
    ("ABORT", "ABORT"),
    ("SAVEPOINT", "SAVEPOINT s"),
    ("RELEASE", "RELEASE SAVEPOINT s"),
    ("PREPARE", "PREPARE TRANSACTION 'x'"),
    ("SET", "SET search_path = evil"),
    ("RESET", "RESET ALL"),
    ("DISCARD", "DISCARD ALL"),
    ("LOCK", "LOCK TABLE singer IN ACCESS EXCLUSIVE MODE"),
    ("LISTEN", "LISTEN c"),
    ("NOTIFY", "NOTIFY c, 'x'"),
    ("DO", "DO $$BEGIN DELETE FROM singer; END$$"),
    ("CALL", "CALL p()"),
    ("COPY", "COPY singer TO STDOUT"),
    ("VACUUM", "VACUUM singer"),
    ("DELETE", "DELETE FROM singer"),
    ("DROP", "DROP TABLE singer"),
    ("UPDATE", "UPDATE singer SET age = 0"),
    ("INSERT", "INSERT INTO singer (name) VALUES ('x')"),
    ("TRUNCATE", "TRUNCATE singer"),
]

POSITIONS = {
    "first": "{s}; SELECT name FROM singer",
    "middle": "SELECT 1; {s}; SELECT name FROM singer",
    "last": "SELECT name FROM singer; {s}",
    "last_semicolon": "SELECT name FROM singer;\n{s};",
    "own_line": "SELECT name FROM singer\n\n{s}",
    "line_before": "{s}\nSELECT name FROM singer",
    "fenced_first": "```sql\n{s};\n```\n```sql\nSELECT name FROM singer\n```",
    "after_prose": "Sure! {s}; SELECT name FROM singer",
}


@pytest.mark.parametrize("position", sorted(POSITIONS))
@pytest.mark.parametrize("kind,statement", STATEMENTS, ids=[k for k, _ in STATEMENTS])
def test_a_reply_holding_a_write_or_control_statement_is_refused_naming_it(
    kind, statement, position
):
    out = clean(POSITIONS[position].format(s=statement))
    assert out.sql == "" and out.steps == ["refused"], (out.sql, out.steps)
    assert out.reason == PREFIX + kind


@pytest.mark.parametrize(
    "text,kinds",
    [
        ("COMMIT; DELETE FROM t; SELECT 1", "COMMIT, DELETE"),
        ("END; DROP TABLE t; SELECT 1", "END, DROP"),
        ("ROLLBACK; UPDATE t SET x = 1; SELECT 1", "ROLLBACK, UPDATE"),
        ("SELECT 1; COMMIT", "COMMIT"),
        ("SELECT 1; COMMIT; -- done", "COMMIT"),
        ("BEGIN;\nSELECT 1;\nCOMMIT;", "BEGIN, COMMIT"),
        ("Here: COMMIT; DELETE FROM t; SELECT 1", "COMMIT, DELETE"),
    ],
)
def test_the_attacks_of_issue_24_name_every_kind_in_order(text, kinds):
    out = clean(text)
    assert out.sql == "" and out.reason == PREFIX + kinds


@pytest.mark.parametrize(
    "text,sql",
    [
        ("Sure! Here's the query:\nSELECT a FROM t;\nThis lists a.", "SELECT a FROM t"),
        ("Set the limit to ten:\nSELECT a FROM t", "SELECT a FROM t"),
        ("```sql\nSELECT a FROM t\n```\nIt does not update anything.", "SELECT a FROM t"),
        ("Here is the query you asked for:\nSELECT a FROM t", "SELECT a FROM t"),
        (
            "SELECT a, \"end\" FROM t WHERE x = 'commit; delete';",
            "SELECT a, \"end\" FROM t WHERE x = 'commit; delete'",
        ),
        ("SELECT a FROM t FOR UPDATE;", "SELECT a FROM t FOR UPDATE"),
        ("SELECT a FROM t WHERE b = 1; -- set to 1 above", "SELECT a FROM t WHERE b = 1"),
        # a CASE's END, and a word inside parentheses, at a line start (a recorded BIRD reply)
        (
            "SELECT CASE\n    WHEN SUM(b) > 1 THEN 'x'\n    ELSE 'y'\nEND AS c\nFROM t",
            "SELECT CASE\n    WHEN SUM(b) > 1 THEN 'x'\n    ELSE 'y'\nEND AS c\nFROM t",
        ),
        (
            "SELECT a FROM t WHERE b IN (\nSELECT b FROM u)",
            "SELECT a FROM t WHERE b IN (\nSELECT b FROM u)",
        ),
    ],
)
def test_prose_and_one_query_still_clean_to_the_query(text, sql):
    out = clean(text)
    assert out.reason is None and out.sql == sql


def test_a_reply_that_is_one_write_alone_is_left_to_the_check():
    """Nothing is cut from it: the candidate check refuses it, naming its type (``Drop``)."""
    out = clean("DROP TABLE singer;")
    assert out.reason is None and out.sql == "DROP TABLE singer"


def test_the_candidate_is_refused_with_the_reason_and_never_runs():
    schema = Schema([Table("singer", "public", "singer", [])])
    ev = Evaluator(None, schema, "public", 1000, 10, {})
    c = Candidate("finsql:m", "m", "COMMIT; DELETE FROM singer; SELECT 1")
    out = ev.run(c, c.raw_text)  # plpy None: any check or execution would fail here
    assert out.status == Status.REFUSED
    assert out.reason == PREFIX + "COMMIT, DELETE"
    assert out.sql is None and out.cleaning == ["refused"]
    assert out.to_json()["status"] == "refused"


def test_parsing_is_bounded_and_past_the_bound_the_reply_is_refused(monkeypatch):
    monkeypatch.setattr(_statement_kinds, "MAX_PARSED_CHARS", 20)
    out = clean("Sure:\n" + "DELETE FROM singer WHERE a = 1\n" * 3 + "SELECT 2")
    assert out.sql == "" and out.steps == ["refused"]
    assert out.reason == "answer has too many statement starts to check for a write or " + (
        "transaction control"
    )
