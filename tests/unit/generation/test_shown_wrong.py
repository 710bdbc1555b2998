"""A query that runs and is wrong in a way its own text shows (``generation._shown_wrong``): a
WHERE that holds one column to values no row has at once, split into an INTERSECT; a select list
that names one expression twice, sent to repair."""

from __future__ import annotations

import pytest

from nl2sql.core.types import Candidate, Status
from nl2sql.generation._shown_wrong import repeated_output, split_contradiction
from nl2sql.generation.repair import feedback


@pytest.mark.parametrize(
    "sql, split",
    [
        # a lower bound above an upper one: each bound's rows, intersected
        (
            "SELECT country FROM singer WHERE age > 40 AND age < 30",
            "SELECT country FROM singer WHERE age > 40 "
            "INTERSECT SELECT country FROM singer WHERE age < 30",
        ),
        # two values of one column (its qualifier's case folded), the joins kept in each
        (
            "SELECT s.name FROM concert AS T1 JOIN stadium AS s ON T1.sid = s.sid "
            "WHERE T1.year = 2014 AND t1.year = 2015",
            "SELECT s.name FROM concert AS T1 JOIN stadium AS s ON T1.sid = s.sid "
            "WHERE T1.year = 2014 INTERSECT SELECT s.name FROM concert AS T1 "
            "JOIN stadium AS s ON T1.sid = s.sid WHERE t1.year = 2015",
        ),
        # the other conditions in every branch, through parentheses; strings too
        (
            "SELECT a FROM t WHERE (x = 'a' AND y = 1) AND x = 'b'",
            "SELECT a FROM t WHERE y = 1 AND x = 'a' INTERSECT SELECT a FROM t WHERE y = 1 AND x = 'b'",
        ),
        # three values: three branches; the literal on the left; a negative number
        (
            "SELECT a FROM t WHERE x = 1 AND 2 = x AND x = 3",
            "SELECT a FROM t WHERE x = 1 INTERSECT SELECT a FROM t WHERE 2 = x "
            "INTERSECT SELECT a FROM t WHERE x = 3",
        ),
        (
            "SELECT a FROM t WHERE x = -1 AND x > 0",
            "SELECT a FROM t WHERE x = -1 INTERSECT SELECT a FROM t WHERE x > 0",
        ),
        (
            "SELECT a FROM t WHERE x > 3 AND x <= 3",
            "SELECT a FROM t WHERE x > 3 INTERSECT SELECT a FROM t WHERE x <= 3",
        ),
        # a value both conditions allow, one value said twice, two columns: nothing to split
        ("SELECT a FROM t WHERE x >= 3 AND x <= 3", None),
        ("SELECT a FROM t WHERE x BETWEEN 2003 AND 2003", None),
        ("SELECT a FROM t WHERE x = 1 AND x = 1.0", None),
        ("SELECT a FROM t WHERE x = 1 AND y = 2", None),
        ("SELECT a FROM t WHERE t.x = 1 AND u.x = 2", None),
        ("SELECT a FROM t WHERE x = 1 OR x = 2", None),
        ("SELECT a FROM t WHERE x > 'b' AND x < 'a'", None),  # text order is the collation's
        # where an INTERSECT would mean something else
        ("SELECT count(*) FROM t WHERE x = 1 AND x = 2", None),
        ("SELECT a FROM t WHERE x = 1 AND x = 2 GROUP BY a", None),
        ("SELECT a FROM t WHERE x = 1 AND x = 2 ORDER BY a LIMIT 1", None),
        ("SELECT a FROM t WHERE x = 1 AND x = 2 UNION SELECT b FROM u", None),
        ("SELECT FROM WHERE", None),
        (None, None),
    ],
)
def test_a_where_no_row_satisfies_is_split_into_an_intersect(sql, split):
    got = split_contradiction(sql)
    assert (got and got[0]) == split
    if got:
        assert got[1][0].endswith("-> INTERSECT")


@pytest.mark.parametrize(
    "sql, twice",
    [
        ("SELECT conductor.name, conductor.name FROM conductor", "conductor.name"),
        ("SELECT Name AS a, name AS b FROM t", "name"),  # unquoted: the same column
        ("SELECT count(*), count(*) FROM t", "COUNT(*)"),
        ("SELECT name, singer.name FROM singer", "singer.name"),  # one table: one column
        ("SELECT a.name, name FROM a JOIN b ON a.id = b.id", None),  # which table's name?
        ("SELECT T1.name, T2.name FROM a AS T1, b AS T2", None),
        ('SELECT "Name", name FROM t', None),  # quoted: two columns
        ("SELECT *, * FROM t", None),
        ("SELECT 'France', 'France' FROM t", None),  # a literal may be a cell value: not quoted
        ("SELECT upper(c) = 'X', upper(c) = 'X' FROM t", None),
        ("SELECT a FROM t UNION SELECT a FROM u", None),
        (None, None),
    ],
)
def test_an_output_named_twice_is_found(sql, twice):
    assert repeated_output(sql) == twice


def test_an_output_named_twice_that_ran_is_sent_to_repair():
    c = Candidate(source="finsql:m", model="m", raw_text="x")
    c.status, c.row_count = Status.OK, 12
    c.sql = "SELECT conductor.name, conductor.name FROM conductor JOIN orchestra USING (cid)"
    assert "names conductor.name twice" in feedback(c)
    c.sql = "SELECT conductor.name, orchestra.orchestra FROM conductor JOIN orchestra USING (cid)"
    assert feedback(c) is None
