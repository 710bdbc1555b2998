"""Result signatures and selection among candidates (vote, MCS-SQL filtering and multiple choice)."""

from __future__ import annotations

import pytest

from conftest import candidate as _c
from nl2sql.core.types import Candidate
from nl2sql.generation.execute import result_signature, row_from_json
from nl2sql.model.gate import open_gate
from nl2sql.selection.multiple_choice import (
    apply_choice,
    multiple_choice_prompt,
    parse_choice,
    select,
)


def _cand(src, h, ms, status="ok"):
    return Candidate(
        source=src,
        model=src,
        raw_text="x",
        sql=f"SELECT '{src}'",
        status=status,
        result_hash=h,
        exec_ms=ms,
        row_count=1,
    )


def test_vote_majority_wins_and_fastest_member_is_returned():
    v = select([_cand("a", "h1", 5.0), _cand("b", "h1", 1.0), _cand("c", "h2", 0.1)], threshold=0)
    assert v.winner_hash == "h1" and v.sql == "SELECT 'b'" and abs(v.confidence - 2 / 3) < 1e-9


def test_vote_tie_goes_to_fastest_group():
    v = select([_cand("slow", "h1", 50.0), _cand("fast", "h2", 2.0)], threshold=0)
    assert v.sql == "SELECT 'fast'" and "tie" in v.reason


def test_vote_ignores_failed_candidates():
    v = select(
        [_cand("e1", None, 1.0, "error"), _cand("e2", None, 1.0, "refused"), _cand("ok", "h", 3.0)],
        threshold=0,
    )
    assert v.sql == "SELECT 'ok'" and v.confidence == 1.0
    assert select([_cand("e", None, 1.0, "error")], threshold=0).sql is None


def test_result_signature_is_a_multiset_and_normalizes_numbers():
    r1 = [row_from_json('{"a": 1, "b": "x"}'), row_from_json('{"a": 2, "b": "y"}')]
    r2 = [row_from_json('{"n": 2.0, "m": "y"}'), row_from_json('{"n": 1.000000, "m": "x"}')]
    assert result_signature(r1) == result_signature(r2)
    assert result_signature(r1, ordered=True) != result_signature(r2, ordered=True)
    assert result_signature(r1) != result_signature(r1[:1])
    # duplicate column names are kept
    assert row_from_json('{"name": "a", "name": "b"}') == ("a", "b")


def test_errors_are_dropped_and_confidence_is_share_of_executed():
    v = select(
        [
            _c("a", "h1", 3),
            _c("b", "h1", 1),
            _c("c", "h2", 2),
            _c("d", None, 1, "error"),
            _c("e", None, 1, "timeout"),
        ]
    )
    assert v.sql == "SELECT 'b'"  # fastest member of the majority group
    assert v.confidence == pytest.approx(2 / 3)
    assert "2 candidate(s) refused, failed or timed out" in v.reason


def test_low_confidence_group_is_dropped():
    cands = [_c(f"m{i}", "big", 5 + i) for i in range(5)] + [_c("odd", "small", 0.1)]
    v = select(cands, threshold=0.2)
    assert [g["result_hash"] for g in v.groups] == ["big"]
    assert [g["result_hash"] for g in v.dropped] == ["small"]
    assert v.dropped[0]["confidence"] == pytest.approx(1 / 6)
    # with the threshold at 0 nothing is dropped
    assert len(select(cands, threshold=0.0).groups) == 2


def test_when_every_group_is_below_the_threshold_none_is_dropped():
    v = select([_c("a", "h1", 2), _c("b", "h2", 1), _c("c", "h3", 3)], threshold=0.5)
    assert len(v.groups) == 3 and not v.dropped and "none dropped" in v.reason
    assert v.sql == "SELECT 'b'"


def test_tie_goes_to_fastest_or_to_priority():
    cands = [_c("slow", "h1", 9.0, model="first"), _c("fast", "h2", 0.5, model="second")]
    v = select(cands)
    assert v.sql == "SELECT 'fast'" and "tie between 2 groups" in v.reason
    v = select(cands, tie_break="priority", priority=["first", "second"])
    assert v.sql == "SELECT 'slow'" and "highest-priority" in v.reason
    with pytest.raises(ValueError, match="tie_break"):
        select(cands, tie_break="random")
    with pytest.raises(ValueError, match="threshold"):
        select(cands, threshold=1.5)


def test_a_tie_within_timing_noise_goes_to_priority_so_the_answer_is_reproducible():
    # two groups of one; 0.03 ms apart is noise (it flipped between runs): priority decides,
    # whichever of the two happened to be measured faster
    for first_ms, second_ms in [(0.91, 0.88), (0.88, 0.91)]:
        cands = [
            _c("second", "h2", second_ms, model="second"),
            _c("first", "h1", first_ms, model="first"),
        ]
        v = select(cands, priority=["first", "second"])
        assert v.sql == "SELECT 'first'" and "equally fast" in v.reason
    # a real difference still goes to the faster group
    v = select(
        [_c("first", "h1", 9.0, model="first"), _c("second", "h2", 1.0, model="second")],
        priority=["first", "second"],
    )
    assert v.sql == "SELECT 'second'" and "fastest execution wins" in v.reason


def test_multiple_choice_prompt_lists_groups_in_confidence_order_and_choice_applies():
    cands = [
        _c("a", "h1", 1),
        _c("b", "h1", 1),
        _c("c", "h1", 1),
        _c("d", "h2", 1),
        _c("e", "h2", 1),
        _c("f", "h3", 1),
    ]
    v = select(cands, threshold=0.1)
    assert [g["size"] for g in v.groups] == [3, 2, 1]
    shown = [{**g, "sql": open_gate().sql("multiple_choice", g["sql"])} for g in v.groups]
    p = multiple_choice_prompt("Which?", shown, "CREATE TABLE t (a int);", {"h2": ['{"a": 42}']})
    assert (
        p.index("Option A (confidence 0.50")
        < p.index("Option B (confidence 0.33")
        < p.index("Option C (confidence 0.17")
    )
    assert '--   row: {"a": 42}' in p and p.rstrip().endswith("Which? */")
    assert parse_choice("B", 3) == 1 and parse_choice("Option C.", 3) == 2
    assert parse_choice("The answer is: (a)", 3) == 0
    assert parse_choice("D", 3) is None and parse_choice("SELECT 1", 3) is None
    v = apply_choice(v, 1, "judge", "B")
    assert v.winner_hash == "h2" and v.confidence == pytest.approx(2 / 6)
    assert v.method == "multiple_choice" and v.groups[0]["result_hash"] == "h2"
    v2 = apply_choice(select(cands, threshold=0.1), None, "judge", "no idea")
    assert v2.winner_hash == "h1" and "majority kept" in v2.reason


def test_the_group_speaks_with_the_row_order_most_members_agree_on():
    from nl2sql.core.types import Candidate, Status
    from nl2sql.selection.multiple_choice import representative

    def c(model, order, ms):
        return Candidate(
            source=f"finsql:{model}",
            model=model,
            raw_text="x",
            sql=f"-- {model}",
            status=Status.OK,
            result_hash="same rows",
            order_hash=order,
            exec_ms=ms,
        )

    desc1, desc2, asc, unordered = (
        c("a", "desc", 5.0),
        c("b", "desc", 4.0),
        c("c", "asc", 1.0),
        c("d", None, 0.5),
    )
    assert representative([desc1, desc2, asc, unordered]) is desc2  # not the fastest (asc, d)
    assert representative([desc1, asc], {"a": 0.5, "c": 2.0}) is asc  # by weight
    assert representative([unordered, c("e", None, 0.1)]).model == "e"  # no order: fastest
    v = select([desc1, desc2, asc])
    assert v.sql == "-- b" and v.groups[0]["size"] == 3


def test_empty_results_vote_only_when_no_candidate_returned_rows():
    # three candidates agree on no rows, two on the same rows: the rows win, and the reason
    # says the empty ones were set aside; the confidence is the share of every executed
    # candidate (2 of 6), the vote share that of those with rows (2 of 3)
    cands = [
        _c("e1", "h0", 1, rows=0),
        _c("e2", "h0", 1, rows=0),
        _c("e3", "h0", 1, rows=0),
        _c("r1", "h1", 5, rows=2),
        _c("r2", "h1", 3, rows=2),
        _c("x", "h2", 2, rows=1),
    ]
    v = select(cands, threshold=0.2)
    assert v.winner_hash == "h1" and v.sql == "SELECT 'r2'"
    assert v.confidence == pytest.approx(2 / 6) and v.groups[0]["vote_share"] == pytest.approx(
        2 / 3
    )
    assert "3 candidate(s) with an empty result set aside" in v.reason
    assert "2 of 3 candidates with rows agree (2 of 6 executed: confidence 0.33)" in v.reason
    assert all(g["result_hash"] != "h0" for g in v.groups + v.dropped)
    assert [(g["result_hash"], g["size"], g["vote_share"]) for g in v.set_aside] == [
        ("h0", 3, None)
    ]
    assert v.set_aside[0]["confidence"] == pytest.approx(3 / 6)
    assert [g["result_hash"] for g in v.dropped] == ["h2"]  # 1 of 6 < 0.2
    # the selection before the rule: the empty group is the majority
    assert select(cands, threshold=0.2, empty_results_vote=True).winner_hash == "h0"
    # when every candidate returned nothing, the empty result is the answer
    only_empty = [_c("e1", "h0", 1, rows=0), _c("e2", "h0", 2, rows=0), _c("f", None, 1, "error")]
    v = select(only_empty, threshold=0.2)
    assert v.winner_hash == "h0" and v.confidence == 1.0 and "set aside" not in v.reason


def _shape(right_empty: int, wrong: int, failed: int = 0) -> list[Candidate]:
    """``right_empty`` candidates agreeing on the right, empty result; ``wrong`` candidates each
    returning the same wrong rows; ``failed`` candidates that failed."""
    return (
        [_c(f"e{i}", "empty", 1 + i, rows=0) for i in range(right_empty)]
        + [_c(f"w{i}", "wrong", 2 + i, rows=3) for i in range(wrong)]
        + [_c(f"f{i}", None, 1, "error") for i in range(failed)]
    )


@pytest.mark.parametrize(
    "right_empty, wrong, failed, confidence",
    [
        (10, 1, 0, 1 / 11),  # the shape: shown with confidence 1.00 before
        (10, 1, 5, 1 / 11),  # failed candidates did not execute: they count for nothing
        (3, 2, 0, 2 / 5),
        (1, 4, 0, 4 / 5),
        (0, 3, 1, 1.0),
    ],
)
def test_confidence_is_the_share_of_every_executed_candidate(
    right_empty, wrong, failed, confidence
):
    v = select(_shape(right_empty, wrong, failed), threshold=0.2)
    assert v.winner_hash == "wrong"  # the rows still win the vote: empty results do not vote
    assert v.confidence == pytest.approx(confidence)
    assert v.groups[0]["vote_share"] == 1.0  # every voter agreed: the trace carries both
    if right_empty:
        assert v.set_aside[0]["size"] == right_empty
        assert v.set_aside[0]["confidence"] == pytest.approx(right_empty / (right_empty + wrong))


def test_with_no_rows_anywhere_the_empty_result_votes_and_the_confidence_counts_it():
    v = select([_c("e1", "h0", 1, rows=0), _c("e2", "h0", 2, rows=0), _c("e3", "h1", 1, rows=0)])
    assert v.winner_hash == "h0" and v.confidence == pytest.approx(2 / 3) and v.set_aside == []
