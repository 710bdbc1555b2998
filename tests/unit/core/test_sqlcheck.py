"""sqlcheck: parsing one statement, the shape check, referenced tables, transpiling."""

from __future__ import annotations

import pytest

from nl2sql.core.errors import CandidateRefused
from nl2sql.core.sqlcheck import (
    check_candidate,
    has_top_level_order,
    parse_one,
    referenced_tables,
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


def test_transpile_sqlite_to_postgres():
    out = transpile('SELECT name FROM dogs WHERE breed = "Poodle" LIMIT 5', "sqlite")
    assert "'Poodle'" in out and "LIMIT 5" in out
    with pytest.raises(CandidateRefused):
        transpile("SELECT FROM WHERE", "sqlite")
