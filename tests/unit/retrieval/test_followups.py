"""Follow-ups and abstention without a database: an earlier turn naming a table the role cannot
read now is left out of the conversation, and the readings of an abstention pass the gate.
tests/db/test_followups.py runs conversations, abstention and narrate inside PostgreSQL."""

from __future__ import annotations

from nl2sql.core.types import Column, Schema, Table, Turn
from nl2sql.model.gate import Gate
from nl2sql.retrieval.conversation import visible_turns


def _schema() -> Schema:
    person = Table(
        name="person",
        schema="public",
        table="person",
        columns=[
            Column(name="id", data_type="integer"),
            Column(name="name", data_type="text"),
            Column(name="ssn", data_type="text", values_allowed=False),
        ],
    )
    return Schema(tables=[person], foreign_keys=[])


def test_abstain_readings_pass_the_gate():
    from nl2sql.core.types import Candidate, Status, Vote
    from nl2sql.selection.abstain import readings

    c1 = Candidate(
        "finsql:a",
        "a",
        None,
        sql="SELECT name, ssn FROM person",
        status=Status.OK,
        result_hash="h1",
        sample_rows=['{"name": "Ann", "ssn": "123-45"}'],
    )
    c2 = Candidate(
        "finsql:b",
        "b",
        None,
        sql="SELECT name FROM person",
        status=Status.OK,
        result_hash="h2",
        sample_rows=['{"name": "Bo"}'],
    )
    vote = Vote(
        sql=c1.sql,
        winner_hash="h1",
        confidence=0.5,
        reason="tie",
        groups=[
            {"sql": c1.sql, "size": 1, "confidence": 0.5, "result_hash": "h1"},
            {"sql": c2.sql, "size": 1, "confidence": 0.5, "result_hash": "h2"},
        ],
    )
    found = readings(vote, [c1, c2], Gate(_schema(), True), 3)
    assert found[0]["rows"] == [{"name": "Ann"}] and "ssn" in found[0]["rows_withheld"]
    assert found[1]["rows"] == [{"name": "Bo"}] and found[1]["rows_withheld"] is None
    off = readings(vote, [c1, c2], Gate(_schema(), False), 3)
    assert off[0]["rows"] == [] and off[1]["rows"] == []


def test_turns_naming_a_table_the_role_cannot_read_now_are_left_out():
    turns = [
        Turn(1, "q1", "SELECT name FROM person"),
        Turn(2, "q2", "SELECT * FROM payroll"),
        Turn(3, "q3", "WITH p AS (SELECT id FROM person) SELECT count(*) FROM p"),
    ]
    assert [t.log_id for t in visible_turns(turns, _schema())] == [1, 3]


def test_an_abstention_lists_the_empty_results_set_aside_at_their_confidence():
    from conftest import candidate
    from nl2sql.model.gate import open_gate
    from nl2sql.selection.abstain import message, readings, should_abstain
    from nl2sql.selection.multiple_choice import select

    cands = [candidate(f"e{i}", "empty", 1, rows=0) for i in range(10)]
    cands.append(candidate("w", "wrong", 2, rows=3))
    vote = select(cands, threshold=0.2)
    assert vote.winner_hash == "wrong" and vote.confidence == 1 / 11
    assert should_abstain(vote, 0.5) and not should_abstain(vote, 0.09)
    found = readings(vote, cands, open_gate(), 3)
    assert [(r["candidates"], r["confidence"], r["row_count"]) for r in found] == [
        (1, 0.091, 3),
        (10, 0.909, 0),
    ]
    text = message(vote.confidence, 0.5, found)
    assert "2 competing readings" in text and "confidence 0.09 < abstain_below 0.5" in text
    assert "reading 2 (10 candidate(s), confidence 0.91)" in text and "no rows" in text
