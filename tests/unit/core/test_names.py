"""names: the relations a query reads and what its column references belong to, resolved once
with sqlglot's scopes; and the stages that use it (schema linking, value alignment, the
candidate check's relation list)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from nl2sql.core.names import resolve
from nl2sql.core.sqlcheck import parse_one, referenced_tables
from nl2sql.core.types import Column, Schema, Table
from nl2sql.generation.alignment import literal_comparisons
from nl2sql.linking.presql_reading import presql_links


def _keys(sql: str) -> list[str]:
    return resolve(parse_one(sql)).keys()


def _owner(sql: str, column_sql: str) -> list[str]:
    """Keys of the relations the first column reference spelled ``column_sql`` may belong to."""
    tree = parse_one(sql)
    names = resolve(tree)
    col = next(c for c in tree.find_all(exp.Column) if c.sql() == column_sql)
    return [r.key for r in names.column_relations(col)]


@pytest.mark.parametrize(
    "sql, keys",
    [
        ("SELECT s.name FROM singer AS s JOIN concert c ON c.id = s.id", ["singer", "concert"]),
        ("SELECT * FROM public.singer s, music.singer t", ["public.singer", "music.singer"]),
        ('SELECT "Name" FROM "Singer"', ["singer"]),
        # a derived table and a LATERAL subquery are not relations; what they read is
        (
            "SELECT x.n FROM (SELECT count(*) AS n FROM concert) AS x, "
            "LATERAL (SELECT 1 FROM stadium) AS l",
            ["concert", "stadium"],
        ),
        ("SELECT name FROM singer UNION SELECT name FROM artist", ["singer", "artist"]),
        (
            "SELECT name FROM singer WHERE id IN (SELECT singer_id FROM singer_in_concert)",
            ["singer", "singer_in_concert"],
        ),
    ],
)
def test_relations_of_a_query(sql, keys):
    assert _keys(sql) == keys == referenced_tables(parse_one(sql))


def test_nested_set_operations_read_every_branch():
    sql = "SELECT name FROM singer UNION SELECT name FROM artist EXCEPT SELECT name FROM banned"
    assert sorted(_keys(sql)) == ["artist", "banned", "singer"]


def test_a_cte_is_not_a_relation_but_what_it_reads_is():
    assert _keys(
        "WITH big AS (SELECT * FROM stadium WHERE capacity > 1000) SELECT count(*) FROM big"
    ) == ["stadium"]


def test_recursive_cte_reads_only_its_base_relation():
    sql = (
        "WITH RECURSIVE r(n) AS (SELECT 1 FROM singer UNION ALL SELECT n + 1 FROM r "
        "WHERE n < 5) SELECT n FROM r"
    )
    assert _keys(sql) == ["singer"]


def test_a_cte_shadowing_a_table_hides_the_table_only_where_it_is_visible():
    # inside the CTE's own body, "singer" is still the real table
    sql = "WITH singer AS (SELECT * FROM singer WHERE age > 30) SELECT name FROM singer"
    assert _keys(sql) == ["singer"]
    names = resolve(parse_one(sql))
    assert len(names.relations) == 1 and names.ctes == {"singer"}
    # a schema-qualified name is never the CTE
    assert _keys("WITH singer AS (SELECT 1 AS x) SELECT * FROM singer, public.singer") == [
        "public.singer"
    ]


def test_qualified_columns_resolve_through_their_own_scope_aliases():
    sql = "SELECT s.name FROM singer s WHERE s.id IN (SELECT s.singer_id FROM singer_in_concert s)"
    tree = parse_one(sql)
    names = resolve(tree)
    cols = [c for c in tree.find_all(exp.Column) if c.table == "s"]
    owners = {c.sql(): [r.key for r in names.column_relations(c)] for c in cols}
    assert owners["s.name"] == ["singer"]
    assert owners["s.singer_id"] == ["singer_in_concert"]  # the inner "s" shadows the outer


def test_correlated_column_belongs_to_the_outer_query():
    sql = (
        "SELECT name FROM singer s WHERE age > (SELECT avg(age) FROM singer t "
        "WHERE t.country = s.country)"
    )
    assert _owner(sql, "s.country") == ["singer"]
    assert _owner(sql, "t.country") == ["singer"]


def test_unqualified_column_may_belong_to_any_relation_of_its_scope_only():
    sql = (
        "SELECT name FROM singer JOIN concert ON concert.id = singer.id "
        "WHERE stadium_id IN (SELECT stadium_id FROM stadium)"
    )
    tree = parse_one(sql)
    names = resolve(tree)
    inner = [c for c in tree.find_all(exp.Column) if c.name == "stadium_id"]
    owners = sorted(tuple(r.key for r in names.column_relations(c)) for c in inner)
    assert owners == [("singer", "concert"), ("stadium",)]


def test_a_column_of_a_derived_table_belongs_to_no_relation():
    assert _owner("SELECT x.n FROM (SELECT count(*) AS n FROM concert) AS x", "x.n") == []


def test_a_statement_that_is_not_a_query_falls_back_to_a_walk_of_its_tables():
    names = resolve(sqlglot.parse_one("DROP TABLE singer, t", read="postgres"))
    assert not names.scoped and names.keys() == ["singer", "t"]


def test_a_table_no_scope_reads_from_is_still_listed():
    # the check refuses such statements by shape; the relation list still names the target
    tree = sqlglot.parse_one("DELETE FROM t WHERE id IN (SELECT id FROM singer)", read="postgres")
    assert set(resolve(tree).keys()) == {"t", "singer"}


def test_resolution_is_done_once_per_tree():
    tree = parse_one("SELECT 1 FROM singer")
    assert resolve(tree) is resolve(tree)
    assert resolve(parse_one("SELECT 1 FROM singer")) is not resolve(tree)


SCHEMA = Schema(
    tables=[
        Table(
            schema="public",
            table="singer",
            name="singer",
            columns=[Column("id", "integer"), Column("name", "text"), Column("country", "text")],
        ),
        Table(
            schema="public",
            table="concert",
            name="concert",
            columns=[Column("id", "integer"), Column("name", "text"), Column("theme", "text")],
        ),
        Table(
            schema="sales",
            table="singer",
            name="sales.singer",
            columns=[Column("id", "integer"), Column("region", "text")],
        ),
    ],
    foreign_keys=[],
)


def test_value_alignment_finds_the_column_a_literal_is_compared_with():
    sql = (
        "WITH fr AS (SELECT * FROM singer WHERE country = 'france') "
        "SELECT c.theme FROM concert c WHERE c.theme IN ('rock', 'pop') AND name = 'x'"
    )
    found = {lit.this: where for lit, where in literal_comparisons(parse_one(sql), SCHEMA)}
    assert found["france"] == ("public", "singer", "country")
    assert found["rock"] == found["pop"] == ("public", "concert", "theme")
    # unqualified "name" in the outer query: only concert is in that scope (the CTE's singer is
    # not), so it resolves to concert.name
    assert found["x"] == ("public", "concert", "name")


def test_value_alignment_leaves_an_ambiguous_column_alone():
    sql = "SELECT 1 FROM singer JOIN concert USING (id) WHERE name = 'x'"
    assert literal_comparisons(parse_one(sql), SCHEMA) == []


def test_schema_linking_reads_relations_and_columns_through_the_resolver():
    sql = (
        "WITH s AS (SELECT id FROM sales.singer WHERE region = 'north') "
        "SELECT p.name FROM singer p JOIN s ON s.id = p.id"
    )
    tables, cols = presql_links(sql, SCHEMA)
    assert sorted(tables) == ["sales.singer", "singer"]
    assert ("sales.singer", "region") in cols and ("singer", "name") in cols
    # the CTE's "id" column reference (s.id) names no relation; p.id is singer's
    assert ("singer", "id") in cols and ("sales.singer", "id") in cols
