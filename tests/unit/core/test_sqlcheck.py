"""sqlcheck: parsing one statement, the shape check, referenced tables, transpiling."""

from __future__ import annotations

import pytest

from nl2sql.core.errors import CandidateRefused
from nl2sql.core.sqlcheck import (
    check_candidate,
    has_top_level_order,
    parse_one,
    referenced_tables,
    statement_in_expression,
    to_sql,
    top_level_order,
    transpile,
)


@pytest.mark.parametrize(
    "sql,needle",
    [
        ("DROP TABLE singer", "not a query"),
        ("DELETE FROM singer", "not a query"),
        ("SELECT * INTO copy FROM singer", "Into"),
        ("WITH d AS (DELETE FROM singer RETURNING *) SELECT * FROM d", "Delete"),
        ("SELECT * FROM singer FOR UPDATE", "locking"),
        ("SELECT 1; SELECT 2", "exactly one"),
        ("SELECT pg_sleep(100)", "pg_sleep"),
        ("SELECT pg_read_file('/etc/passwd')", "pg_read_file"),
        ("SELECT nextval('s')", "nextval"),
        ("SELECT * FROM pg_authid", "unknown relation"),
        ("", "empty"),
        ("SELEC oops", "not a query"),
        ("SELECT * FROM (", "parse"),
    ],
)
def test_check_refuses_with_a_reason(sql, needle):
    with pytest.raises(CandidateRefused) as e:
        check_candidate(sql, {"singer", "concert"})
    assert needle.lower() in str(e.value).lower()


def test_check_accepts_queries_with_ctes_and_set_operations():
    ok = {
        "WITH a AS (SELECT name FROM singer) SELECT * FROM a": ["singer"],
        "SELECT name FROM singer UNION SELECT concert_name FROM concert": ["concert", "singer"],
        "SELECT count(*) FROM public.singer": ["public.singer"],
    }
    for sql, tables in ok.items():
        tree = check_candidate(sql, {"singer", "concert", "public.singer"})
        assert sorted(referenced_tables(tree)) == tables  # the CTE name is not a relation
        assert parse_one(tree.sql(dialect="postgres")) == tree  # what runs is what was checked


def test_referenced_tables_excludes_ctes_and_keeps_order():
    tree = parse_one(
        "WITH x AS (SELECT * FROM concert) SELECT * FROM singer s JOIN x ON true "
        "JOIN stadium ON true"
    )
    assert sorted(referenced_tables(tree)) == ["concert", "singer", "stadium"]


def test_top_level_order_detection():
    assert has_top_level_order("SELECT a FROM t ORDER BY a")
    assert not has_top_level_order("SELECT a FROM (SELECT a FROM t ORDER BY a) s")


ORDER_CASES = [
    ("SELECT name FROM singer ORDER BY age", True),
    ("SELECT name FROM (SELECT name, age FROM singer ORDER BY age) s", False),
    ("WITH x AS (SELECT name FROM singer ORDER BY age) SELECT name FROM x", False),
    ("WITH x AS (SELECT name, age FROM singer) SELECT name FROM x ORDER BY age DESC", True),
    ("SELECT name FROM singer UNION SELECT name FROM stadium ORDER BY name", True),
    ("(SELECT name FROM singer ORDER BY age LIMIT 1) UNION SELECT name FROM stadium", False),
    ("SELECT name FROM singer WHERE age IN (SELECT age FROM singer ORDER BY age)", False),
    ("SELECT count(*) FROM singer", False),
]


@pytest.mark.parametrize("sql,ordered", ORDER_CASES, ids=[c[0][:40] for c in ORDER_CASES])
def test_the_checked_tree_tells_the_top_level_order_as_its_sql_text_does(sql, ordered):
    # the Evaluator reads the flag from the check's tree (Candidate.ordered) instead of parsing
    # the candidate's SQL again before its result signature: both must agree
    tree = check_candidate(sql, {"singer", "stadium"})
    assert top_level_order(tree) is ordered
    assert has_top_level_order(to_sql(tree)) is ordered


def test_transpile_sqlite_to_postgres():
    out = transpile('SELECT name FROM dogs WHERE breed = "Poodle" LIMIT 5', "sqlite")
    assert "'Poodle'" in out and "LIMIT 5" in out
    with pytest.raises(CandidateRefused):
        transpile("SELECT FROM WHERE", "sqlite")


# "close the expression, then a statement" and its kin: what a text that should be one
# expression (a semantic model's expr) holds; None where PostgreSQL would lex no statement
STATEMENT_SHAPES = [
    ("amount); DROP TABLE sm_orders; --", "after ';': DROP TABLE sm_orders"),
    ("amount)); DELETE FROM sm_orders; --", "after ';': DELETE FROM sm_orders"),
    ("status = 'x'); UPDATE sm_orders SET amount = 0; --", "after ';': UPDATE sm_orders"),
    ("SUM(amount)) FROM sm_orders; DROP TABLE sm_orders; --", "after ';': DROP TABLE"),
    ("amount /* ) */); DROP TABLE x; --", "after ';': DROP TABLE x"),
    ("amount); COMMIT; --", "after ';': COMMIT"),
    ("amount);SELECT pg_sleep(10);--", "after ';': SELECT pg_sleep"),
    ("amount)\n;\nDROP TABLE x", "after ';': DROP TABLE x"),
    ("amount); DO $$ BEGIN PERFORM 1; END $$; --", "after ';': DO"),
    ("amount); CHECKPOINT; --", "after ';': CHECKPOINT"),
    ("U&'x'); drop table t; --", "after ';': drop table t"),
    ("amount > 1; DROP TABLE sm_orders", "after ';': DROP TABLE sm_orders"),
    ("DROP TABLE sm_orders; amount", "after ';': amount"),
    ("amount) DROP TABLE sm_orders --", "after the expression: DROP TABLE sm_orders"),
    ("amount)) DELETE FROM sm_orders", "after the expression: DELETE FROM sm_orders"),
    ("CASE WHEN a THEN 1 END) UPDATE t SET a = 0", "after the expression: UPDATE t"),
    ("amount) UNION SELECT secret_note FROM sm_secret --", "after the expression: SELECT"),
    ("amount) END", "after the expression: END"),
    # no statement: inside a literal, a comment or a quoted name, or no statement word at all
    ("E'x\\'); DROP TABLE t; --'", None),
    ("x'); DROP TABLE t; --", None),  # the quote never closes: all of it is one literal
    ("amount -- ); DROP TABLE x", None),
    ("amount /* /* */ ); DROP TABLE x; */", None),  # nested comments, as PostgreSQL nests them
    ("$tag$); DROP TABLE x; --$tag$", None),
    ('"a); DROP TABLE x; --"', None),
    ("SUM(amount);", None),
    ("SUM(amount)", None),
    ("CASE WHEN amount > 100 THEN 'big' ELSE 'small' END", None),
    ("amount IN (SELECT amount FROM t)", None),
    ("amount +* (", None),
    ("amount) + 1", None),
    ("DELETE FROM sm_orders", None),  # a statement instead of an expression: its parse says so
]


@pytest.mark.parametrize("text, found", STATEMENT_SHAPES)
def test_a_statement_in_an_expression_is_found_however_the_expression_ends(text, found):
    got = statement_in_expression(text)
    if found is None:
        assert got is None
    else:
        assert got is not None and found in got
