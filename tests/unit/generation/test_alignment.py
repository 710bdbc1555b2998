"""Value alignment: literals snapped to cell values; bounds the question says inclusive made so."""

from __future__ import annotations

import pytest
import sqlglot

from nl2sql.core.sqlcheck import check_candidate
from nl2sql.core.types import Column, Schema, Table
from nl2sql.generation.alignment import align_bounds


class _Index:
    """A stand-in for alignment.ValueIndex: the cell values of superhero.colour.colour."""

    def closest(self, col, literal):
        from nl2sql.generation.alignment import Lookup

        values = {"Stealth": "Stealth", "stealth": "Stealth", "blue": "Blue"}
        v = values.get(literal)
        return Lookup(v, None if v is None else ("exact" if v == literal else "case"), 1.0)


def test_alignment_changes_a_copy_and_leaves_the_shared_parse_alone():
    from nl2sql.core.sqlcheck import parse_shared
    from nl2sql.generation.alignment import align_values

    schema = Schema(
        tables=[
            Table(
                name="colour",
                schema="public",
                table="colour",
                columns=[Column(name="colour", data_type="text")],
            )
        ]
    )
    sql = "SELECT count(*) FROM colour WHERE colour = 'blue' OR colour IN ('stealth', 'x')"
    shared = check_candidate(sql, {"colour"})
    assert shared is parse_shared(sql)  # the check's tree is the process-wide parse
    aligned, done = align_values(shared, schema, _Index())
    assert [(d["from"], d["to"]) for d in done] == [("blue", "Blue"), ("stealth", "Stealth")]
    assert aligned is not shared
    assert "'Blue'" in aligned.sql() and "'Stealth'" in aligned.sql() and "'x'" in aligned.sql()
    assert "'blue'" in parse_shared(sql).sql()  # a later candidate with this text sees it as sent
    same, none = align_values(
        parse_shared("SELECT 1 FROM colour WHERE colour = 'Stealth'"), schema, _Index()
    )
    assert none == [] and same is parse_shared("SELECT 1 FROM colour WHERE colour = 'Stealth'")


def test_alignment_leaves_partial_columns_alone():
    from nl2sql.generation.alignment import ValueIndex

    idx = ValueIndex(None, 100, 200, 0.4, 0.8, partial={("public", "city", "name")})
    idx.column_count = lambda col: 5
    got = idx.closest(("public", "city", "name"), "Citty 1")
    assert got.value is None and "partially indexed" in got.reason


@pytest.mark.parametrize(
    "question, sql, bounded",
    [
        # "N or after" read as an equality, "N or more" as a strict bound: made inclusive
        (
            "Show the stadium with the most concerts in year 2014 or after.",
            "SELECT name FROM concert WHERE year = 2014",
            "SELECT name FROM concert WHERE year >= 2014",
        ),
        (
            "Which grades have 4 or more high schoolers?",
            "SELECT grade FROM h GROUP BY grade HAVING COUNT(*) > 4",
            "SELECT grade FROM h GROUP BY grade HAVING COUNT(*) >= 4",
        ),
        # the number on the left; "at least"; a decimal
        (
            "Makers with at least 3 models",
            "SELECT a FROM t WHERE 3 < n",
            "SELECT a FROM t WHERE n >= 3",
        ),
        (
            "cars of no less than 2.5 litres",
            "SELECT a FROM t WHERE l > 2.5",
            "SELECT a FROM t WHERE l >= 2.5",
        ),
        # upper bounds
        (
            "people aged 30 or younger",
            "SELECT a FROM t WHERE age < 30",
            "SELECT a FROM t WHERE age <= 30",
        ),
        ("at most 2 pets", "SELECT a FROM t WHERE 2 = n", "SELECT a FROM t WHERE n <= 2"),
        # already inclusive, the other way, another number, a number said twice, both bounds
        ("at least 3", "SELECT a FROM t WHERE n >= 3", None),
        ("at least 3", "SELECT a FROM t WHERE n < 3", None),
        ("at least 3", "SELECT a FROM t WHERE n > 4", None),
        ("grade 3 with at least 3 friends", "SELECT a FROM t WHERE n > 3", None),
        ("at least 3 and at most 3", "SELECT a FROM t WHERE n = 3", None),
        # a string, BETWEEN, two numbers, no bound said, no question
        ("at least 3", "SELECT a FROM t WHERE s = '3'", None),
        ("at least 3", "SELECT a FROM t WHERE n BETWEEN 3 AND 5", None),
        ("at least 3", "SELECT a FROM t WHERE 3 = 3", None),
        ("more than 3", "SELECT a FROM t WHERE n > 3", None),
        (None, "SELECT a FROM t WHERE n > 3", None),
    ],
)
def test_a_bound_the_question_says_inclusive_is_made_inclusive(question, sql, bounded):
    tree = sqlglot.parse_one(sql, read="postgres")
    before = tree.sql(dialect="postgres")
    new, done = align_bounds(tree, question)
    assert tree.sql(dialect="postgres") == before  # the shared tree is not changed
    if bounded is None:
        assert new is tree and done == []
    else:
        assert new.sql(dialect="postgres") == bounded
        assert [d["method"] for d in done] == ["question"]
