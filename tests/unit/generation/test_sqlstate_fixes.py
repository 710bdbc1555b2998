"""Repair's round 0 by the error's SQLSTATE (``generation._sqlite.rules.fix_by_sqlstate``): SQL that SQLite runs
and PostgreSQL refuses, rewritten where the error has one reading, and left alone elsewhere."""

from __future__ import annotations

import pytest

from nl2sql.generation._sqlite.rules import fix_by_sqlstate


@pytest.mark.parametrize(
    "sql, sqlstate, fixed",
    [
        # a scalar subquery that returned more than one row: each of its rows
        (
            "SELECT petid FROM has_pet WHERE stuid = (SELECT stuid FROM student WHERE lname = 'S')",
            "21000",
            "SELECT petid FROM has_pet WHERE stuid IN (SELECT stuid FROM student WHERE lname = 'S')",
        ),
        (
            "SELECT a FROM t WHERE (SELECT b FROM u) <> a",
            "21000",
            "SELECT a FROM t WHERE NOT a IN (SELECT b FROM u)",
        ),
        # a comparison by size has no one reading; nor two subqueries compared
        ("SELECT a FROM t WHERE a > (SELECT b FROM u)", "21000", None),
        ("SELECT 1 WHERE (SELECT a FROM t) = (SELECT b FROM u)", "21000", None),
        # ungrouped aggregates beside bare columns: grouped by the bare ones (aliases dropped)
        (
            "SELECT major_record_format FROM orchestra ORDER BY COUNT(*) ASC",
            "42803",
            "SELECT major_record_format FROM orchestra GROUP BY major_record_format "
            "ORDER BY COUNT(*) ASC",
        ),
        (
            "SELECT country AS c, count(*) AS n, avg(x) FROM t",
            "42803",
            "SELECT country AS c, COUNT(*) AS n, AVG(x) FROM t GROUP BY country",
        ),
        # in a subquery only there
        (
            "SELECT a FROM t WHERE b IN (SELECT c, count(*) FROM u)",
            "42803",
            "SELECT a FROM t WHERE b IN (SELECT c, COUNT(*) FROM u GROUP BY c)",
        ),
        # a lone max/min beside bare columns: the row that holds it (SQLite's meaning)
        (
            "SELECT maker, MIN(year) FROM cars_data",
            "42803",
            "SELECT maker, year FROM cars_data ORDER BY year ASC LIMIT 1",
        ),
        # no bare column in the select list (it is in ORDER BY), a window's aggregate: no one
        # reading
        ("SELECT count(*) FROM t ORDER BY name", "42803", None),
        ("SELECT a, count(*) OVER () FROM t", "42803", None),
        # a bare column beside a GROUP BY: added to it (what the error asks)
        (
            "SELECT a, b, count(*) FROM t GROUP BY a",
            "42803",
            "SELECT a, b, COUNT(*) FROM t GROUP BY a, b",
        ),
        # an ORDER BY column neither grouped nor aggregated: its groups' max where descending,
        # min where ascending (each group where its first row stands), with the GROUP BY the
        # select list needs or alone; an output column's name and a grouped one are left
        (
            "SELECT record_company, COUNT(*) FROM orchestra ORDER BY year_of_founded DESC",
            "42803",
            "SELECT record_company, COUNT(*) FROM orchestra GROUP BY record_company "
            "ORDER BY MAX(year_of_founded) DESC",
        ),
        (
            "SELECT nationality, COUNT(*) FROM people GROUP BY nationality ORDER BY p.name",
            "42803",
            "SELECT nationality, COUNT(*) FROM people GROUP BY nationality ORDER BY MIN(p.name)",
        ),
        (
            "SELECT nationality, COUNT(*) AS n FROM people GROUP BY nationality "
            "ORDER BY n DESC, people.nationality",
            "42803",
            None,
        ),
        # another error, no error, or no query
        ("SELECT a FROM t WHERE a = (SELECT b FROM u)", "42P01", None),
        ("SELECT a FROM t WHERE a = (SELECT b FROM u)", None, None),
        ("not a query (", "21000", None),
        (None, "42803", None),
    ],
)
def test_a_failing_query_is_rewritten_by_its_errors_one_reading(sql, sqlstate, fixed):
    got = fix_by_sqlstate(sql, sqlstate)
    assert (got[0] if got else None) == fixed
    if got:
        assert got[1], "each rewrite says what changed"
