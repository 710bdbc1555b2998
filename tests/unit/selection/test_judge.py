"""The judge's pure parts (``selection.judge``): when it is asked, how its replies are read, how
the verdicts of both orders are scored. No model here: the verdicts are given."""

from __future__ import annotations

import pytest

from nl2sql.core.types import Vote
from nl2sql.model.gate import open_gate
from nl2sql.model.prompts import QUESTION_MARKER
from nl2sql.selection.judge import (
    SKIP_SHARE,
    Judgement,
    apply_judgement,
    decide,
    judge_prompt,
    parse_verdict,
    skip_reason,
    top_share,
)


def _vote(*scores: float, dropped: tuple[float, ...] = ()) -> Vote:
    groups = [
        {"result_hash": f"h{i}", "sql": f"SELECT {i}", "confidence": s / 10, "score": s}
        for i, s in enumerate(scores)
    ]
    low = [{"result_hash": f"d{i}", "score": s} for i, s in enumerate(dropped)]
    first = groups[0] if groups else {}
    return Vote(first.get("sql"), first.get("result_hash"), 0.5, groups, "majority", dropped=low)


@pytest.mark.parametrize(
    "text, verdict",
    [
        ("<result>B</result>", "B"),
        ("Reasoning... <result> a </result>", "A"),
        ("<result>A</result> on second thought <result>TIE</result>", "TIE"),
        ("tie", "TIE"),
        ("B.", "B"),
        ("I cannot help with that.", None),
        ("", None),
        (None, None),
        ("<result>C</result>", None),
        ("Both A and B look fine", None),
    ],
)
def test_parse_verdict_reads_the_tag_or_a_bare_answer(text, verdict):
    assert parse_verdict(text) == verdict


@pytest.mark.parametrize(
    "scores, dropped, asked",
    [
        ((3.0,), (), False),  # one group: nothing to compare
        ((3.0, 2.0), (), False),  # exactly 0.6: the vote is sure enough
        ((2.0, 1.0), (), False),  # 0.67
        ((2.0, 1.0, 1.0), (), True),  # 0.5
        ((2.0, 1.0), (1.0,), True),  # dropped groups count in the weight: 0.5
        ((1.0, 1.0), (), True),  # 0.5
    ],
)
def test_the_judge_is_skipped_at_sixty_percent_or_one_group(scores, dropped, asked):
    v = _vote(*scores, dropped=dropped)
    assert (skip_reason(v) is None) == asked
    if len(scores) > 1:
        assert (top_share(v)[0] < SKIP_SHARE) == asked


def _decided(ab: list, ba: list, shares=(0.4, 0.3)) -> Judgement:
    j = Judgement("judge", verdicts={"AB": ab, "BA": ba})
    return decide(j, shares)


@pytest.mark.parametrize(
    "ab, ba, winner, wins",
    [
        (["B", "B"], ["A", "A"], "second", [0.0, 1.0]),  # prefers the second group both ways
        (["A", "A"], ["B", "B"], "vote", [1.0, 0.0]),  # prefers the top group both ways
        (["A", "A"], ["A", "A"], "vote", [0.5, 0.5]),  # always the first shown: a tie
        (["TIE", "TIE"], ["TIE", "TIE"], "vote", [0.5, 0.5]),
        (["B", None], ["A", "garbage-read-as-None"], "second", [0.0, 1.0]),
        ([None, None], ["A", "A"], "vote", []),  # no usable verdict in one order
        ([], [], "vote", []),  # a timeout: no reply at all
    ],
)
def test_decide_scores_both_orders_by_group_share(ab, ba, winner, wins):
    ba = [None if x == "garbage-read-as-None" else x for x in ba]
    j = _decided(ab, ba)
    assert j.winner == winner
    assert j.wins == wins
    if wins:
        assert j.scores == [round(wins[0] * 0.4, 4), round(wins[1] * 0.3, 4)]
    else:
        assert "no usable verdict" in j.why


def test_a_second_group_that_wins_its_pairs_can_still_lose_on_share():
    # the second group wins 3 of 4 but holds a fifth of the top group's share
    j = _decided(["B", "B"], ["A", "B"], shares=(0.5, 0.1))
    assert j.wins == [0.25, 0.75] and j.winner == "vote"


def test_apply_judgement_makes_the_second_group_the_answer_or_keeps_the_vote():
    v = _vote(2.0, 2.0, 1.0)
    j = _decided(["B", "B"], ["A", "A"])
    apply_judgement(v, j)
    assert (v.sql, v.winner_hash, v.method) == ("SELECT 1", "h1", "judge")
    assert [g["result_hash"] for g in v.groups] == ["h1", "h0", "h2"]
    assert v.confidence == 0.2 and "judge judge" in v.reason
    kept = _vote(2.0, 2.0)
    apply_judgement(kept, _decided(["TIE"], ["TIE"]))
    assert kept.sql == "SELECT 0" and kept.method == "majority (judge kept the vote)"
    skipped = _vote(5.0, 1.0)
    apply_judgement(skipped, Judgement("judge", skipped="sure"))
    assert skipped.method == "majority" and skipped.reason == "majority"


def test_the_prompt_shows_both_candidates_in_the_order_given_and_ends_with_the_question():
    gate = open_gate()
    shown = [
        {
            "sql": gate.sql("judge", "SELECT 1"),
            "rows": ['{"a": 1}'] * 9,
            "note": None,
            "row_count": 9,
        },
        {"sql": gate.sql("judge", "SELECT 2"), "rows": [], "note": "rows withheld", "row_count": 0},
    ]
    p = judge_prompt("How many?", "CREATE TABLE t (a int);", "a hint", shown)
    a, b = p.index("-- Candidate A"), p.index("-- Candidate B")
    assert a < b and "SELECT 1;" in p[a:b] and "SELECT 2;" in p[b:]
    assert p[a:b].count("--   row:") == 5  # MAX_ROWS
    assert "(rows withheld)" in p[b:] and "/* Hint: a hint */" in p
    assert p.endswith(f"{QUESTION_MARKER}How many? */")
