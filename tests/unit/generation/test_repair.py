"""Repair rounds' feedback and prompts."""

from __future__ import annotations

import pytest

from conftest import candidate as _c
from nl2sql.core.types import Column, Schema, Table
from nl2sql.generation.repair import feedback, repair_prompt, schema_hints
from nl2sql.model.gate import open_gate


def test_repair_feedback_and_prompt_keep_the_question_last():
    assert feedback(_c("a", "h", 1, rows=0)).endswith("(empty result)")
    assert feedback(_c("a", "h", 1, rows=4)) is None
    err = _c("a", None, 1, "error")
    err.reason = 'column "nme" does not exist'
    assert "nme" in feedback(err)
    noans = _c("a", None, 1, "refused")
    noans.reason = "no answer: timeout"
    assert feedback(noans) is None
    p = repair_prompt(
        "schema...\n\n/* Answer the following: How many? */",
        open_gate().sql("repair", "SELECT nme FROM t"),
        feedback(err),
        ["singer.country: 'France'"],
        2,
        3,
    )
    assert "Repair round 2 of 3" in p and "SELECT nme FROM t;" in p
    assert "singer.country: 'France'" in p
    assert p.rstrip().endswith("How many? */")


HINT_SCHEMA = Schema(
    [
        Table("semesters", "public", "semesters", [Column("semester_id", "integer")]),
        Table("battle", "public", "battle", [Column("id", "integer"), Column("name", "text")]),
        Table(
            "ship",
            "public",
            "ship",
            [Column("id", "integer"), Column("lost_in_battle", "integer"), Column("name", "text")],
        ),
    ]
)


@pytest.mark.parametrize(
    "sql, hints",
    [
        # a misspelt table: the nearest real one, with its columns
        (
            "SELECT count(*) FROM semester",
            ["there is no table semester; the nearest: semesters(semester_id)"],
        ),
        # an invented column: the nearest of the query's tables
        (
            "SELECT battle_id FROM battle",
            ["no table of the query has a column battle_id; the nearest: battle.id, battle.name"],
        ),
        # a column of another table: that table named, to join
        (
            "SELECT lost_in_battle FROM battle",
            [
                "no table of the query has a column lost_in_battle; "
                "lost_in_battle is a column of ship (join it)"
            ],
        ),
        # every name real; output aliases and CTEs are names too
        ("SELECT name AS n, count(*) AS c FROM battle GROUP BY n ORDER BY c", []),
        ("WITH x AS (SELECT id FROM ship) SELECT count(*) FROM x", []),
        # an unknown table that is near nothing: said, with no nearest
        ("SELECT 1 FROM zzqqxx", ["there is no table zzqqxx"]),
        # not SQL: no hint
        ("this is not a query", []),
        (None, []),
    ],
)
def test_schema_hints_name_what_does_not_exist_and_the_nearest_real_names(sql, hints):
    assert schema_hints(sql, HINT_SCHEMA) == hints


def test_the_repair_prompt_carries_the_hints_before_the_question():
    p = repair_prompt(
        "schema...\n\n/* Answer the following: How many? */",
        open_gate().sql("repair", "SELECT count(*) FROM semester"),
        "the query was refused: unknown relation(s): semester",
        [],
        1,
        3,
        schema_hints("SELECT count(*) FROM semester", HINT_SCHEMA),
    )
    assert "/* Names: there is no table semester; the nearest: semesters(semester_id) */" in p
    assert p.rstrip().endswith("How many? */")
