"""Evaluation's pure classification: how a candidate's rows differ from the verified SQL's,
how an answer that is no answer is named, and each model's rightness and the run's totals.
tests/db/test_evaluate.py runs nl2sql.evaluate() inside PostgreSQL."""

from __future__ import annotations

from nl2sql.curated.scoring import (
    Judged,
    chosen_hash,
    classify_outcome,
    classify_rows,
    model_rightness,
    summarize,
)


def test_classify_rows_names_each_kind_of_difference():
    gold = [("a",), ("b",), ("c",)]
    assert classify_rows(gold, [("c",), ("a",), ("b",)])[0] is None  # a multiset: order free
    assert classify_rows(gold, [])[0] == "EMPTY_RESULT"
    assert classify_rows(gold, [("a",), ("b",)]) == (
        "RESULT_MISSING_ROWS",
        "2 of the verified SQL's 3 rows (1 missing)",
    )
    assert classify_rows(gold, gold + [("d",)])[0] == "RESULT_EXTRA_ROWS"
    assert classify_rows([], [("d",)])[0] == "RESULT_EXTRA_ROWS"
    assert classify_rows(gold, [("a", 1), ("b", 2), ("c", 3)])[0] == "COLUMNS_MISMATCH"
    assert classify_rows([(7,)], [(8,)]) == (
        "SINGLE_CELL_DIFFERENCE",
        "8 where the verified SQL has 7",
    )
    assert classify_rows(gold, [("a",), ("x",)])[0] == "RESULT_MISMATCH"
    # a duplicate row counts: a multiset, not a set
    assert classify_rows([("a",), ("a",)], [("a",)])[0] == "RESULT_MISSING_ROWS"


def test_classify_outcome_tells_abstained_no_sql_and_error_apart():
    assert classify_outcome(None, "nl2sql: boom")[0] == "ERROR"
    assert classify_outcome({"sql": "SELECT 1"}) is None
    assert classify_outcome({"sql": None, "abstained": {"threshold": 0.9}, "error": "below"}) == (
        "ABSTAINED",
        "below",
    )
    assert (
        classify_outcome(
            {"sql": None, "error": "every model failed", "candidates": [{"sql": None}]}
        )[0]
        == "NO_SQL"
    )
    assert (
        classify_outcome(
            {"sql": None, "error": "no candidate executed", "candidates": [{"sql": "SELECT 1/0"}]}
        )[0]
        == "ERROR"
    )


def test_per_model_rightness_and_totals():
    trace = {
        "sql": "S1",
        "candidates": [
            {"source": "finsql:m1", "model": "m1", "status": "ok", "result_hash": "G", "sql": "S1"},
            {"source": "finsql:m1#p2s1", "model": "m1", "status": "ok", "result_hash": "X"},
            {"source": "finsql:m2", "model": "m2", "status": "ok", "result_hash": "X", "sql": "S2"},
            {"source": "presql:m1", "model": "m1", "status": "ok", "result_hash": "G"},
        ],
    }
    assert model_rightness(trace, "G") == {"m1": True, "m2": False}  # first FinSQL candidate
    assert chosen_hash(trace) == "G"
    rs = [
        Judged(1, "q1", "s", right=True, per_model={"m1": True, "m2": False}),
        Judged(
            2, "q2", "s", right=False, category="EMPTY_RESULT", per_model={"m1": False, "m2": False}
        ),
        Judged(3, "q3", "s", right=None),
    ]  # the verified SQL failed: not judged
    t = summarize(rs)
    assert (t["questions"], t["judged"], t["right"], t["ex"]) == (3, 2, 1, 0.5)
    assert t["per_model"] == {
        "m1": {"questions": 2, "right": 1, "ex": 0.5},
        "m2": {"questions": 2, "right": 0, "ex": 0.0},
    }
    assert t["categories"] == {"EMPTY_RESULT": 1}
