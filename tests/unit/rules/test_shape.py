"""The shape rules (``rules.shape``), each SQL in → its rewrite or sentence out, and the cases
each must leave alone: a WHERE that holds one column to values no row has at once, split into an
INTERSECT; a select list that names one expression twice; a join condition comparing a column
with itself; counts over groups of one row (the schema's keys); one row where the question asks
for each; either value where it asks for both; a failed query's error read for its one reading."""

from __future__ import annotations

import pytest

from nl2sql.core.types import Column, ForeignKey, Schema, Table
from nl2sql.rules import shown_wrong

from ._apply import apply


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
    got = apply("split_contradiction", sql, state="empty")
    assert (got and got.sql) == split
    if got:
        assert got.changes[0].endswith("-> INTERSECT") and not got.final


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
    got = apply("repeated_output", sql)
    assert (got and got.sentence) == (
        twice
        and f"the select list names {twice} twice; select each column the question asks for, once"
    )


SCHEMA = Schema(
    tables=[
        Table("continents", "public", "continents",
              [Column("contid", "integer", True), Column("continent", "text")]),
        Table("friend", "public", "friend",
              [Column("student_id", "integer", True), Column("friend_id", "integer", True)]),
        Table("sales.orders", "sales", "orders",
              [Column("id", "integer", True), Column("region", "text")]),
        Table("notes", "public", "notes", [Column("body", "text")]),
    ]
)  # fmt: skip


@pytest.mark.parametrize(
    "sql, found",
    [
        # the whole key grouped, one table, a count: every count is 1
        (
            "SELECT contid, continent, COUNT(*) FROM continents GROUP BY continent, contid",
            ("continents", "continent, contid"),
        ),
        ("SELECT Contid, count(x) AS n FROM Continents GROUP BY Contid", ("continents", "Contid")),
        ("SELECT id, count(*) FROM sales.orders GROUP BY id", ("sales.orders", "id")),
        # a grouped expression holding a literal (it may be a cell value) is not quoted
        (
            "SELECT contid, count(*) FROM continents GROUP BY contid, continent = 'Asia'",
            ("continents", "contid"),
        ),
        (
            "SELECT student_id, friend_id, count(*) FROM friend GROUP BY student_id, friend_id",
            ("friend", "student_id, friend_id"),
        ),
        # part of a key, not the key, no count at the top, a join, no key, unknown: nothing
        ("SELECT student_id, COUNT(*) FROM friend GROUP BY student_id", None),
        ("SELECT continent, COUNT(*) FROM continents GROUP BY continent", None),
        ("SELECT contid, max(continent) FROM continents GROUP BY contid", None),
        (
            "SELECT contid, (SELECT count(*) FROM friend) FROM continents GROUP BY contid",
            None,
        ),
        (
            "SELECT c.contid, count(*) FROM continents AS c JOIN friend AS f "
            "ON c.contid = f.student_id GROUP BY c.contid",
            None,
        ),
        ("SELECT body, count(*) FROM notes GROUP BY body", None),
        ("SELECT x, count(*) FROM elsewhere GROUP BY x", None),
        ("SELECT FROM GROUP", None),
    ],
)
def test_counts_over_groups_of_the_primary_key_are_found(sql, found):
    got = apply("grouped_by_key", sql, SCHEMA)
    assert (got is not None) == (found is not None)
    if found:
        assert got.sentence.startswith(f"GROUP BY {found[1]} groups {found[0]} by its primary key")


@pytest.mark.parametrize(
    "sql, question, found",
    [
        ("SELECT AVG(weight) FROM cars_data", "What is the average weight of cars each year?", 1),
        ("SELECT count(*), max(age) FROM t", "How many students are in EACH grade?", 1),
        # grouped; not "each"; "each other"; the aggregate a subquery's or a window's
        ("SELECT year, AVG(weight) FROM cars_data GROUP BY year", "each year?", 0),
        ("SELECT AVG(weight) FROM cars_data", "What is the average weight of the cars?", 0),
        ("SELECT count(*) FROM likes", "How many students like each other?", 0),
        ("SELECT a FROM t WHERE x > (SELECT avg(x) FROM t)", "Which is above each mean?", 0),
        ("SELECT a, sum(x) OVER () FROM t", "each running total", 0),
        ("SELECT max(mpg) FROM cars_data", "the maximum miles per gallon", 0),
        (None, "each", 0),
    ],
)
def test_one_row_where_the_question_asks_for_each_is_found(sql, question, found):
    got = apply("ungrouped_each", sql, question=question)
    assert (got is not None) is bool(found)
    if found:
        assert "without GROUP BY" in got.sentence


J = "SELECT s.name FROM stadium AS s JOIN concert AS c ON s.id = c.sid"
BOTH = "Which stadiums had concerts in both 2014 and 2015?"


@pytest.mark.parametrize(
    "sql, question, split",
    [
        # a joined table's column in an IN list, both values the question's words
        (
            f"{J} WHERE c.year IN (2014, 2015)",
            BOTH,
            f"{J} WHERE c.year = 2014 INTERSECT {J} WHERE c.year = 2015",
        ),
        # an OR of the two, under an AND; the other conditions kept in each
        (
            f"{J} WHERE s.capacity > 10 AND (c.year = 2014 OR c.year = 2015)",
            BOTH,
            f"{J} WHERE s.capacity > 10 AND (c.year = 2014) INTERSECT "
            f"{J} WHERE s.capacity > 10 AND (c.year = 2015)",
        ),
        # in a subquery: the whole query once per value; a word starting with each value
        (
            "SELECT fname FROM student WHERE stuid IN "
            "(SELECT stuid FROM has_pet WHERE pettype IN ('cat', 'dog'))",
            "Who has both cats and dogs as pets?",
            "SELECT fname FROM student WHERE stuid IN (SELECT stuid FROM has_pet WHERE "
            "pettype = 'cat') INTERSECT SELECT fname FROM student WHERE stuid IN "
            "(SELECT stuid FROM has_pet WHERE pettype = 'dog')",
        ),
        # no "both"; a value the question does not say; the output's own row; NOT; OR;
        # a grouping that already means both; ORDER BY; three values
        (f"{J} WHERE c.year IN (2014, 2015)", "Which stadiums had concerts in 2014 or 2015?", None),
        (f"{J} WHERE c.year IN (2014, 2016)", BOTH, None),
        ("SELECT name FROM singer WHERE country IN ('France', 'Spain')",
         "Singers from both France and Spain", None),
        (f"{J} WHERE NOT c.year IN (2014, 2015)", BOTH, None),
        (f"{J} WHERE c.year IN (2014, 2015) OR s.capacity > 10", BOTH, None),
        (
            "SELECT fname FROM student WHERE stuid IN (SELECT stuid FROM has_pet WHERE pettype "
            "IN ('cat', 'dog') GROUP BY stuid HAVING count(DISTINCT pettype) = 2)",
            "Who has both cats and dogs as pets?",
            None,
        ),
        (f"{J} WHERE c.year IN (2014, 2015) ORDER BY s.name", BOTH, None),
        (f"{J} WHERE c.year IN (2014, 2015, 2016)", "both 2014, 2015 and 2016", None),
        (None, BOTH, None),
    ],
)  # fmt: skip
def test_either_value_where_the_question_asks_for_both_is_split(sql, question, split):
    got = apply("split_both", sql, question=question)
    assert (got and got.sql) == split
    if got:
        assert got.changes[0].endswith("(both) -> INTERSECT") and got.final
        assert got.sentence is None  # said by its second entry, last among the findings
    both = apply("split_both_said", sql, question=question)
    assert (both is not None) == (split is not None)
    if both:
        assert "both of two values" in both.sentence and both.sql is None


# one table refers to continents: the counts made counts of its rows (the join added)
ONE_REF = Schema(
    tables=SCHEMA.tables,
    foreign_keys=[ForeignKey("countries", ["continent"], "continents", ["contid"])],
)
TWO_REFS = Schema(
    tables=SCHEMA.tables,
    foreign_keys=ONE_REF.foreign_keys + [ForeignKey("notes", ["body"], "continents", ["contid"])],
)


@pytest.mark.parametrize(
    "sql, schema, joined",
    [
        (
            "SELECT contid, continent, COUNT(*) FROM continents GROUP BY continent, contid",
            ONE_REF,
            "SELECT continents.contid, continents.continent, COUNT(*) FROM continents "
            "JOIN countries ON countries.continent = continents.contid "
            "GROUP BY continents.continent, continents.contid",
        ),
        (
            "SELECT c.contid, count(c.contid) FROM continents AS c GROUP BY c.contid",
            ONE_REF,
            "SELECT c.contid, COUNT(c.contid) FROM continents AS c "
            "JOIN countries ON countries.continent = c.contid GROUP BY c.contid",
        ),
        # a subquery's columns and aggregates are its own
        (
            "SELECT contid, count(*) FROM continents "
            "WHERE contid IN (SELECT contid FROM continents WHERE max_x > 1) GROUP BY contid",
            ONE_REF,
            "SELECT continents.contid, COUNT(*) FROM continents JOIN countries ON "
            "countries.continent = continents.contid WHERE continents.contid IN "
            "(SELECT contid FROM continents WHERE max_x > 1) GROUP BY continents.contid",
        ),
        # which table's rows to count is not one: said, not rewritten; nor COUNT(DISTINCT …)
        ("SELECT contid, COUNT(*) FROM continents GROUP BY contid", TWO_REFS, None),
        ("SELECT contid, COUNT(DISTINCT continent) FROM continents GROUP BY contid", ONE_REF, None),
        ("SELECT contid, COUNT(*), SUM(contid) FROM continents GROUP BY contid", ONE_REF, None),
        ("SELECT contid, COUNT(*) FROM continents GROUP BY contid", SCHEMA, None),
    ],
)
def test_counts_over_key_groups_count_the_one_referring_table(sql, schema, joined):
    got = apply("grouped_by_key", sql, schema)
    assert got is not None and "primary key" in got.sentence
    assert got.sql == joined
    assert got.changes == (("countries joined on countries.continent",) if joined else ())


def test_the_schema_and_question_rules_say_their_problem_and_quote_no_literal():
    keyed = shown_wrong("SELECT contid, count(*) FROM continents GROUP BY contid", SCHEMA)
    assert "primary key" in keyed and keyed.endswith("join the table that refers to it")
    # the tables whose foreign keys refer to it, named
    fk = ForeignKey("countries", ["continent"], "continents", ["contid"])
    linked = Schema(tables=SCHEMA.tables, foreign_keys=[fk])
    keyed = shown_wrong("SELECT contid, count(*) FROM continents GROUP BY contid", linked)
    assert keyed.endswith("(countries.continent refers to continents.contid)")
    assert shown_wrong("SELECT contid, count(*) FROM continents GROUP BY contid") is None
    each = shown_wrong("SELECT avg(w) FROM cars", None, "the average weight each year")
    assert "GROUP BY" in each
    both = shown_wrong(f"{J} WHERE c.year IN (2014, 2015)", None, BOTH)
    assert "both" in both and "2014" not in both


# a failed query: its SQLSTATE read for its one reading (SQL that SQLite runs)
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
    got = apply("fix_by_sqlstate", sql, sqlstate=sqlstate, state="failed")
    assert (got.sql if got else None) == fixed
    if got:
        assert got.changes, "each rewrite says what changed"


@pytest.mark.parametrize(
    "sql, found",
    [
        # the aliases mixed up: the condition compares a column with itself (case folded)
        (
            "SELECT DISTINCT T2.state FROM owners AS T1 JOIN professionals AS T2 "
            "ON T1.owner_id = t1.owner_id",
            "T1.owner_id = t1.owner_id",
        ),
        ("SELECT * FROM a JOIN b ON b.x = b.x AND a.y = b.y", "b.x = b.x"),
        # two tables' columns, or the same name in two tables: a real join
        ("SELECT * FROM a AS t1 JOIN b AS t2 ON t1.id = t2.id", None),
        ("SELECT * FROM a JOIN b ON a.id = b.id", None),
        # quoted names keep their case: "T1" and t1 are two aliases
        ('SELECT * FROM a AS "T1" JOIN a AS t1 ON "T1".id = t1.id', None),
        # a filter in WHERE is not a join condition; unparsable text finds nothing
        ("SELECT * FROM a WHERE a.x = a.x", None),
        ("SELECT FROM WHERE", None),
        (None, None),
    ],
)
def test_a_join_on_a_column_compared_with_itself_is_found(sql, found):
    got = apply("self_compared_join", sql)
    assert (got is not None) == (found is not None)
    if found:
        assert got.sentence.startswith(f"the join condition {found} compares a column with itself")
