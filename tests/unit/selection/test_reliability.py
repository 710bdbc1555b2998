"""Per-model reliability learned from judged answers (nl2sql.calibrate) and the vote it weights,
without a database (``nl2sql.selection.reliability``). tests/db/test_reliability.py calibrates
inside PostgreSQL.
"""

from __future__ import annotations

import pytest

from conftest import judged
from nl2sql.core.errors import ConfigError
from nl2sql.core.types import Candidate, Status
from nl2sql.selection import learned_vote as V
from nl2sql.selection import reliability as R
from nl2sql.selection.multiple_choice import select

# --- learning (pure) ---------------------------------------------------------------------


def test_weights_follow_judged_accuracy_and_change_the_winner():
    qs = [judged("easy", a=("x", True), b=("y", False), c=("y", False)) for _ in range(8)]
    rel = V.learn(qs)
    assert rel.weight("a", "easy") > 1.0 > rel.weight("b", "easy") >= V.MIN_WEIGHT
    assert rel.weight("a", None) == rel.weights[("a", "all")]
    assert rel.weight("never-judged", "easy") == 1.0
    q = judged("easy", a=("x", True), b=("y", False), c=("y", False))
    assert V.weighted_choice(q, rel) and not V.weighted_choice(q, V.Reliability())
    rows = {(r["model"], r["level"]): r for r in rel.rows()}
    assert rows[("a", "all")]["judged"] == 8 and rows[("a", "all")]["right"] == 8
    assert V.from_rows(rel.rows()).weights == pytest.approx(rel.weights, abs=1e-6)


def test_calibration_keeps_the_majority_unless_learning_wins_on_held_out_questions():
    # the models are equally reliable: nothing to learn, the plain majority stays
    same = [
        judged("easy", a=("x", i % 2 == 0), b=("x", i % 2 == 0), c=("y", i % 2 == 1))
        for i in range(10)
    ]
    _rel, mode, cv = V.calibrate_questions(same)
    assert mode == "majority" and cv["majority"]["right"] >= cv["weights"]["right"]
    # one model is right where two others agree on a wrong answer: weights win held out
    lone = [judged("easy", a=("x", True), b=("y", False), c=("y", False)) for _ in range(10)]
    _rel, mode, cv = V.calibrate_questions(lone)
    assert mode == "weights" and cv["weights"]["right"] == 10 and cv["majority"]["right"] == 0
    assert cv["weights"]["won"] == 10 and cv["weights"]["lost"] == 0
    # a small edge on held-out questions is not enough: chance, not reliability
    assert not V.significant(6, 3) and V.significant(12, 2)


def test_voter_sets_per_hardness_level_are_learned_from_enough_questions():
    # at 'hard', a and b are right and c, d, e agree on a wrong answer; at 'easy' all are right
    hard = [
        judged("hard", a=("x", True), b=("x", True), c=("y", False), d=("y", False), e=("y", False))
        for _ in range(V.MIN_LEVEL_QUESTIONS)
    ]
    easy = [
        judged("easy", a=("x", True), b=("x", True), c=("x", True), d=("x", True), e=("x", True))
        for _ in range(V.MIN_LEVEL_QUESTIONS)
    ]
    rel = V.learn(hard + easy)
    assert set(rel.voters["hard"][:2]) == {"a", "b"}  # the most reliable at 'hard' first
    assert "medium" not in rel.voters  # no judged question there
    assert {r["model"]: r["voter"] for r in rel.rows() if r["level"] == "hard"}["a"] is True
    assert all(V.weighted_choice(q, rel) for q in hard)
    # a voter set that leaves the wrong models out wins where weights alone would not
    few = V.Reliability(voters={"hard": ["a"]})
    assert V.weighted_choice(hard[0], few) and not V.weighted_choice(hard[0], V.Reliability())


@pytest.mark.parametrize(
    "bad, needle",
    [
        ("not json", "not JSON"),
        ('{"level": "easy"}', "JSON array"),
        ('[{"level": "huge", "candidates": []}]', "item 0"),
        ('[{"level": "easy", "candidates": [{"model": "a", "group": 1}]}]', "item 0"),
        # hostile: nesting, a group that cannot be a vote's key, a level that is a structure
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('[{"level": "easy", "candidates": [{"model": "a", "right": true, "group": [1]}]}]',
         "item 0 .*group.: text or number"),
        ('[{"level": "easy", "candidates": [{"model": "a", "right": true, "group": {}}]}]',
         "item 0"),
        ('[{"level": ["easy"], "candidates": []}]', "item 0"),
        ('[{"candidates": [' + "[" * 900 + "]" * 900 + "]}]",
         "item 0 .*: (a JSON dict nested too deeply to show|\\{)|nested too deeply"),
    ],
)  # fmt: skip
def test_judged_argument_is_validated(bad, needle):
    with pytest.raises(ConfigError, match=needle):
        R.parse_judged(bad)


def test_select_weights_votes_by_model():
    def c(model, h, ms):
        return Candidate(
            source=f"finsql:{model}",
            model=model,
            raw_text="x",
            sql=f"-- {h}",
            status=Status.OK,
            result_hash=h,
            exec_ms=ms,
        )

    cands = [c("a", "h1", 1.0), c("b", "h2", 1.0), c("c", "h2", 1.0)]
    assert select(cands).winner_hash == "h2"
    v = select(cands, weights={"a": 3.0, "b": 0.5, "c": 0.5})
    assert v.winner_hash == "h1" and v.groups[0]["score"] == 3.0
    assert "weighted by learned reliability" in v.reason
