"""Value alignment: literals snapped to cell values."""

from __future__ import annotations

from nl2sql.core.sqlcheck import check_candidate
from nl2sql.core.types import Column, Schema, Table


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
