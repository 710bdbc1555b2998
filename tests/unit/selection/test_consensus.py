"""Issue 42 §1–§2: equal answers vote together, near answers share weight, degenerate results
weigh less, a weak consensus decided by the result's shape."""

from __future__ import annotations

import pytest

from nl2sql.answers import canonical_value, degenerate_kind, describe, is_column_subset
from nl2sql.core.types import Candidate
from nl2sql.generation.execute import row_from_json
from nl2sql.selection.consensus import (
    VoteRule,
    are_near,
    expects_one_row,
    held_by_majority,
    question_order,
    shape_fit,
    weigh_evidence,
)
from nl2sql.selection.multiple_choice import select


def _rows(*texts):
    return [row_from_json(t) for t in texts]


def _answer(*texts):
    return describe(_rows(*texts), texts[0] if texts else None)


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        # column order does not matter
        (
            ('{"name": "x", "age": 1}', '{"name": "y", "age": 2}'),
            ('{"age": 2, "name": "y"}', '{"age": 1, "name": "x"}'),
            True,
        ),
        # ... but which values share a row does
        (
            ('{"name": "x", "age": 1}', '{"name": "y", "age": 2}'),
            ('{"name": "x", "age": 2}', '{"name": "y", "age": 1}'),
            False,
        ),
        # number spelling: integer, decimal, text holding a number; 6 significant digits
        (('{"n": 3}',), ('{"n": 3.0000001}',), True),
        (('{"n": 3}',), ('{"n": "3"}',), True),
        (('{"n": 3}',), ('{"n": 3.01}',), False),
        # text case and padding
        (('{"c": "France "}',), ('{"c": "france"}',), True),
        (('{"c": "France"}',), ('{"c": "Franc"}',), False),
        # a bag: duplicates count
        (('{"c": "a"}', '{"c": "a"}'), ('{"c": "a"}',), False),
        # two columns with the same values: swapping them is the same answer
        (('{"a": 1, "b": 1}', '{"a": 2, "b": 2}'), ('{"b": 2, "a": 2}', '{"b": 1, "a": 1}'), True),
        # ... but not pairing their values otherwise
        (
            ('{"a": 1, "b": 1, "c": "x"}', '{"a": 2, "b": 2, "c": "y"}'),
            ('{"a": 1, "b": 2, "c": "x"}', '{"a": 2, "b": 1, "c": "y"}'),
            False,
        ),
    ],
)
def test_answer_key_is_equal_for_equal_answers_only(a, b, equal):
    assert (_answer(*a)["key"] == _answer(*b)["key"]) is equal


@pytest.mark.parametrize(
    ("value", "canonical"),
    [(" Paris ", "paris"), ("12", 12.0), ("+12", "+12"), ("nan", "nan"), (None, None), (2.5, 2.5)],
)
def test_canonical_value(value, canonical):
    assert canonical_value(value) == canonical


@pytest.mark.parametrize(
    ("rows", "kind"),
    [
        ((), "empty"),
        (('{"a": null}', '{"a": null}'), "null"),
        (('{"n": 0}',), "zero"),
        (('{"n": 0, "m": null}',), "zero"),
        (('{"n": 0, "m": "x"}',), None),
        (('{"n": 1}',), None),
        (('{"b": false}',), None),
    ],
)
def test_degenerate_kind(rows, kind):
    assert degenerate_kind(_rows(*rows)) == kind


@pytest.mark.parametrize(
    ("small", "big", "subset"),
    [
        (
            ('{"name": "x"}', '{"name": "y"}'),
            ('{"id": 1, "name": "x"}', '{"id": 2, "name": "y"}'),
            True,
        ),
        (
            ('{"name": "x"}', '{"name": "z"}'),
            ('{"id": 1, "name": "x"}', '{"id": 2, "name": "y"}'),
            False,
        ),
        (('{"name": "x"}',), ('{"id": 1, "name": "x"}', '{"id": 2, "name": "x"}'), False),
        (('{"id": 1, "name": "x"}',), ('{"name": "x"}',), False),
    ],
)
def test_column_subset(small, big, subset):
    s, b = _answer(*small), _answer(*big)
    assert is_column_subset(s, b, (len(small), len(big))) is subset


@pytest.mark.parametrize(
    ("a", "b", "near"),
    [
        (('{"avg": 3.14159}',), ('{"round": 3.14}',), True),  # rounding
        (('{"avg": 78.33}',), ('{"round": 78}',), False),  # rounded to a whole number: another
        (('{"n": 101}',), ('{"n": 102}',), False),  # whole numbers are never rounded together
        (('{"avg": 3.14159}',), ('{"avg": 3.14159}',), False),  # equal is not near
        (('{"name": "x"}',), ('{"id": 1, "name": "x"}',), True),  # a column subset
    ],
)
def test_near_answers(a, b, near):
    assert are_near(_answer(*a), _answer(*b), (len(a), len(b))) is near


@pytest.mark.parametrize(
    ("question", "one"),
    [
        ("How many singers do we have?", True),
        ("What is the average age of all singers?", True),
        ("How many singers are from each country?", False),
        ("Show the name of every singer.", False),
        ("Show the name of all singers.", False),
    ],
)
def test_expects_one_row(question, one):
    assert expects_one_row(question) is one


@pytest.mark.parametrize(
    ("question", "names", "rows", "fit"),
    [
        ("How many singers are there?", ["count"], 1, (1, 0)),
        ("How many singers are there?", ["country", "count"], 3, (0, -1)),
        ("What are the names of the singers?", ["name"], 3, (1, 0)),
        ("What are the names of the singers?", ["id", "name"], 3, (1, -1)),
        ("What are the names and ids of the singers?", ["singer_id", "name"], 3, (1, 0)),
    ],
)
def test_shape_fit(question, names, rows, fit):
    assert shape_fit(question, {"names": names}, rows) == fit


def _cand(src, rows, ms=1.0, model=None):
    parsed = _rows(*rows)
    return Candidate(
        source=src,
        model=model or src,
        raw_text="x",
        sql=f"SELECT '{src}'",
        status="ok",
        result_hash=str(hash(tuple(parsed))),  # the exact form: column order kept
        exec_ms=ms,
        row_count=len(parsed),
        answer=describe(parsed, rows[0] if rows else None),
    )


NAME_AGE = ('{"name": "x", "age": 1}',)
AGE_NAME = ('{"age": 1, "name": "x"}',)
OTHER = ('{"name": "z", "age": 9}',)
OFF = VoteRule(0.0, 0.0, 2.0)


def test_column_orders_vote_together_and_the_form_most_agree_on_answers():
    cands = [
        _cand("a", NAME_AGE, 5.0),
        _cand("b", NAME_AGE, 4.0),
        _cand("c", AGE_NAME, 0.1),
        _cand("d", OTHER, 0.2),
        _cand("e", OTHER, 0.3),
    ]
    before = select(cands, threshold=0)
    assert before.sql == "SELECT 'd'"  # split: 2 and 1 against 2, the faster group won
    v = select(cands, threshold=0, rule=OFF)
    assert v.sql == "SELECT 'b'" and v.groups[0]["size"] == 3


def test_degenerate_results_weigh_less_but_still_vote():
    empty = [_cand(s, ()) for s in "abc"]
    rows = [_cand(s, OTHER) for s in "de"]
    assert select(empty + rows, threshold=0).sql == "SELECT 'd'"  # set aside before
    assert select(empty + rows, threshold=0, rule=VoteRule(0.0, 0.0, 2.0)).sql == "SELECT 'd'"
    assert select(empty + rows, threshold=0, rule=VoteRule(0.75, 0.0, 2.0)).sql == "SELECT 'a'"
    assert select(empty + rows, threshold=0, rule=VoteRule(0.5, 0.0, 2.0)).sql == "SELECT 'd'"
    # every result degenerate: they vote as equals
    assert select(empty, threshold=0, rule=VoteRule(0.5, 0.0, 2.0)).groups[0]["size"] == 3


def test_near_answers_share_weight():
    names = ('{"name": "x"}', '{"name": "y"}')
    with_ids = ('{"id": 1, "name": "x"}', '{"id": 2, "name": "y"}')
    wrong = ('{"name": "q"}', '{"name": "r"}')
    cands = [_cand("n1", names, 3.0), _cand("n2", names, 3.0), _cand("i", with_ids, 2.0)]
    cands += [_cand("w1", wrong, 0.1), _cand("w2", wrong, 0.1)]
    assert select(cands, threshold=0, rule=OFF).sql == "SELECT 'w1'"  # 2 against 2: faster
    v = select(cands, threshold=0, rule=VoteRule(0.0, 0.5, 2.0))
    assert v.sql == "SELECT 'n1'" and v.groups[0]["score"] == 2.5 and v.groups[0]["near"]
    assert next(g["score"] for g in v.groups if g["sql"] == "SELECT 'i'") == 2.0


def test_weak_consensus_goes_to_the_shape_the_question_asks():
    one = ('{"count": 4}',)
    many = ('{"country": "a", "count": 1}', '{"country": "b", "count": 3}')
    cands = [_cand("m1", many, 0.1), _cand("m2", many, 0.1), _cand("o", one, 5.0)]
    cands += [_cand("x", many[:1], 0.2), _cand("y", many[1:], 0.3)]
    q = "How many singers are there?"
    assert select(cands, threshold=0, rule=OFF, question=q).sql == "SELECT 'm1'"
    v = select(cands, threshold=0, rule=VoteRule(0.0, 0.0, 0.5), question=q)
    assert v.sql == "SELECT 'o'" and "weak consensus" in v.reason
    # a majority is never overruled
    strong = cands[:3] + [_cand("m3", many, 0.1)]
    assert select(strong, threshold=0, rule=VoteRule(0.0, 0.0, 0.5), question=q).sql == (
        "SELECT 'm1'"
    )


def test_weigh_evidence_without_a_question_keeps_the_order():
    kept = [{"score": 1.0, "answer": None, "row_count": 2}, {"score": 1.0, "answer": None}]
    assert weigh_evidence(kept, 5.0, None, VoteRule()) == "" and kept[0]["row_count"] == 2


@pytest.mark.parametrize(
    ("names", "question", "order"),
    [
        (["max", "pet_type"], "List the maximum weight and type for each type of pet.", 1),
        (["pet_type", "max"], "List the maximum weight and type for each type of pet.", -1),
        (["fullname", "id"], "List full name and the id.", 1),
        (["grade", "count"], "How many high schoolers are in each grade?", 0),  # a count: no place
        (["name"], "Which name?", 0),
    ],
)
def test_question_order(names, question, order):
    words = question.lower().replace("?", "").replace(".", "").split()
    assert question_order(names, words) == order


def test_the_group_answers_in_the_column_order_the_question_names():
    first = ('{"pet_type": "cat", "max": 3}', '{"pet_type": "dog", "max": 9}')
    second = ('{"max": 3, "pet_type": "cat"}', '{"max": 9, "pet_type": "dog"}')
    cands = [_cand("a", first), _cand("b", first), _cand("c", second)]
    q = "List the maximum weight and type for each type of pet."
    assert select(cands, threshold=0, rule=OFF, question=q).sql == "SELECT 'c'"
    assert select(cands, threshold=0, rule=OFF, question="Pet types?").sql == "SELECT 'a'"


def test_a_null_result_that_rows_bear_out_is_not_weighed_down():
    nulls = ('{"details": null}', '{"details": null}')
    whole = ('{"id": 1, "details": null}', '{"id": 2, "details": null}')
    other = ('{"id": 5, "details": "x"}', '{"id": 6, "details": "y"}')
    cands = [_cand(s, nulls, 1.0) for s in "abc"] + [_cand(s, whole, 2.0) for s in "de"]
    cands += [_cand(s, other, 0.1) for s in "fg"]
    v = select(cands, threshold=0, rule=VoteRule(0.1, 0.0, 2.0))
    assert v.sql == "SELECT 'a'" and v.groups[0]["score"] == 3.0
    lone = [_cand(s, nulls, 1.0) for s in "abc"] + [_cand(s, other, 0.1) for s in "fg"]
    assert select(lone, threshold=0, rule=VoteRule(0.1, 0.0, 2.0)).sql == "SELECT 'f'"


def test_the_threshold_reads_the_weighed_share():
    empty = [_cand(s, ()) for s in "abcdefghij"]
    rows = [_cand(s, OTHER) for s in "xy"]
    # 2 of 12 candidates (0.17 < 0.2) but 2 of 3 votes as weighed: the rows are kept and win
    assert select(empty + rows, threshold=0.2, rule=VoteRule(0.1, 0.0, 2.0)).sql == "SELECT 'x'"


def _failed(src, model=None):
    return Candidate(source=src, model=model or src, raw_text="x", sql="SELECT 1", status="error")


_ONE = ('{"n": 1}',)
_TWO = ('{"n": 2}',)
_EMPTY: tuple = ()
_AB = {"a": 0.5, "b": 0.5, "c": 2.0}  # a heavy model's failure outweighs two light ones agreeing
_AB_HEAVY = {"a": 1.0, "b": 1.0, "c": 0.5}


@pytest.mark.parametrize(
    ("cands", "weights", "holder"),
    [
        # self-consistency: two samples agree, the third failed: repairing it cannot outvote them
        ([("ok", _ONE, "m"), ("ok", _ONE, "m"), ("error", None, "m")], None, 0),
        ([("ok", _ONE, "m"), ("ok", NAME_AGE, "m"), ("error", None, "m")], None, None),
        # equal answers whatever their column order hold together
        ([("ok", NAME_AGE, "m"), ("ok", AGE_NAME, "m"), ("error", None, "m")], None, 1),
        # half is not more than half: two of four, two failed
        (
            [("ok", _ONE, "m"), ("ok", _ONE, "m"), ("error", None, "m"), ("error", None, "m")],
            None,
            None,
        ),
        # a lone candidate that answered holds its own majority; one that failed holds nothing
        ([("ok", _ONE, "m")], None, 0),
        ([("error", None, "m")], None, None),
        # an empty result is degenerate: it holds nothing, so the failed one is repaired
        ([("ok", _EMPTY, "m"), ("ok", _EMPTY, "m"), ("error", None, "m")], None, None),
        # learned weights count, not heads
        ([("ok", _ONE, "a"), ("ok", _ONE, "b"), ("error", None, "c")], _AB, None),
        ([("ok", _ONE, "a"), ("ok", _ONE, "b"), ("error", None, "c")], _AB_HEAVY, 0),
        # two answers, neither with a majority
        ([("ok", _ONE, "m"), ("ok", _TWO, "m"), ("error", None, "m")], None, None),
    ],
)
def test_held_by_majority(cands, weights, holder):
    built = [
        _cand(f"s{i}", rows, model=model) if status == "ok" else _failed(f"s{i}", model)
        for i, (status, rows, model) in enumerate(cands)
    ]
    key = held_by_majority(built, weights)
    assert key == (None if holder is None else built[holder].answer["key"])


def test_held_by_majority_counts_only_settled_answers():
    """An answer repair would still touch (``settled`` false) holds no vote."""
    built = [_cand("a", _ONE, model="m"), _cand("b", _ONE, model="m"), _failed("c", "m")]
    assert held_by_majority(built) == built[0].answer["key"]
    assert held_by_majority(built, settled=lambda c: c.source != "a") is None
