"""Per-model reliability learned from judged answers (nl2sql.calibrate) and the vote it weights;
schema linking from a PreSQL that does not parse, inside the pipeline.

Pure tests of ``nl2sql.reliability`` first, then tests inside a real PostgreSQL with scripted
loopback models (tests/conftest.py): every model answer here is scripted, not a model's.
"""

from __future__ import annotations

import json

import psycopg
import pytest

from conftest import add_models
from nl2sql.core.errors import ConfigError
from nl2sql.core.types import Candidate, Status
from nl2sql.selection import learned_vote as V
from nl2sql.selection import reliability as R
from nl2sql.selection.multiple_choice import select
from nl2sql_indexer.loopback import Rule

RIGHT = "SELECT count(*) FROM singer"
WRONG = "SELECT count(*) FROM concert"
Q = "How many singers do we have?"


def judged(level, **models):
    """A judged question: model=(group, right)."""
    return {
        "level": level,
        "candidates": [{"model": m, "group": g, "right": r} for m, (g, r) in models.items()],
    }


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
    ],
)
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


# --- in the database, with scripted models -------------------------------------------------


@pytest.fixture
def rel_db(db):
    """The demo connection with PreSQL not voting; calibration, feedback examples and the
    reliability setting undone afterwards."""
    db.execute("SELECT nl2sql.set_setting('presql_votes', 'off')")
    yield db
    db.execute("DELETE FROM nl2sql.model_reliability")
    db.execute("DELETE FROM nl2sql.example WHERE source = 'feedback'")
    db.execute("SELECT nl2sql.reset_setting('reliability_vote')")


def explain(conn, q=Q):
    return conn.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]


def test_calibrate_from_feedback_changes_the_chosen_answer_and_explain_shows_the_weights(
    rel_db, llm
):
    add_models(rel_db, llm, ["a", "b", "c"])
    llm.add_rule(Rule(model="a", response=RIGHT))
    llm.set_default(WRONG)  # b and c agree on a wrong answer
    traces = [explain(rel_db) for _ in range(6)]
    assert all("concert" in t["sql"] for t in traces)  # the majority is wrong
    assert traces[0]["reliability"]["used"] is False
    # one judged answer with its correction: every logged answer of that question is judged
    rel_db.execute(
        "SELECT nl2sql.feedback(%s, false, %s, verify => false)", (traces[0]["log_id"], RIGHT)
    )
    out = rel_db.execute("SELECT nl2sql.calibrate()").fetchone()[0]
    assert out["from_log"] >= 6 and out["mode"] in ("weights", "weights+voters")
    rows = dict(
        rel_db.execute(
            "SELECT model, weight FROM nl2sql.model_reliability WHERE level = 'all'"
        ).fetchall()
    )
    assert rows["a"] > rows["b"] and rows["a"] > rows["c"]
    trace = explain(rel_db)
    assert "singer" in trace["sql"]  # a outweighs b and c now
    w = trace["reliability"]
    assert w["used"] is True and w["weights"]["a"] > w["weights"]["b"] + w["weights"]["c"]
    assert trace["vote"]["groups"][0]["score"] == pytest.approx(w["weights"]["a"])
    # the setting turns it off
    rel_db.execute("SELECT nl2sql.set_setting('reliability_vote', 'off')")
    trace = explain(rel_db)
    assert "concert" in trace["sql"] and trace["reliability"]["used"] is False


def test_calibrate_with_judged_questions_from_elsewhere_and_bad_input(rel_db, llm):
    add_models(rel_db, llm, ["a", "b", "c"])
    qs = [judged("easy", a=("x", True), b=("y", False), c=("y", False)) for _ in range(10)]
    out = rel_db.execute("SELECT nl2sql.calibrate(%s::jsonb)", (json.dumps(qs),)).fetchone()[0]
    assert out["from_argument"] == 10 and out["mode"] == "weights"
    llm.add_rule(Rule(model="a", response=RIGHT))
    llm.set_default(WRONG)
    assert "singer" in explain(rel_db)["sql"]
    with pytest.raises(psycopg.Error, match="judged item 0"):
        rel_db.execute('SELECT nl2sql.calibrate(\'[{"level": "easy"}]\'::jsonb)')
    # equally reliable models: calibration keeps the plain majority, and says so
    same = [judged("easy", a=("x", True), b=("x", True), c=("y", False)) for _ in range(10)]
    out = rel_db.execute("SELECT nl2sql.calibrate(%s::jsonb)", (json.dumps(same),)).fetchone()[0]
    assert out["mode"] == "majority"
    assert "concert" in explain(rel_db)["sql"]


def test_ordinary_roles_may_not_calibrate(cluster, rel_db):
    rel_db.execute("DROP ROLE IF EXISTS rel_reader")
    rel_db.execute("CREATE ROLE rel_reader")
    try:
        rel_db.execute("SET ROLE rel_reader")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            rel_db.execute("SELECT nl2sql.calibrate()")
    finally:
        rel_db.execute("RESET ROLE")
        rel_db.execute("DROP ROLE rel_reader")


def test_an_unparsable_presql_still_links_the_tables_its_tokens_name(rel_db, llm):
    add_models(rel_db, llm, ["a"])
    # the PreSQL is cut off inside a string: no tree, but its tokens name singer and concert
    llm.add_rule(
        Rule(
            model="a",
            times=1,
            response="SELECT s.name FROM singer s JOIN concert c "
            "ON c.concert_id = s.singer_id WHERE s.name = 'Jo",
        )
    )
    llm.set_default(RIGHT)
    trace = explain(rel_db, "Which singers sang in a concert?")
    assert set(trace["linked_tables"]) >= {"singer", "concert"}
    assert trace["linking"]["why"]["concert"][0] == "presql tokens"
    # a PreSQL naming no table: FinSQL sees the schema the PreSQL saw
    llm.clear()
    llm.add_rule(Rule(model="a", times=1, response="I am sorry, I cannot write that query."))
    llm.set_default(RIGHT)
    trace = explain(rel_db, "Which singers sang in a concert?")
    assert len(trace["linked_tables"]) == trace["pruning"]["tables_kept"] >= 3
    assert all(
        w[0] == "presql schema (no table read from PreSQL)"
        for w in trace["linking"]["why"].values()
    )


def test_the_chosen_sql_follows_the_row_order_most_candidates_agree_on(rel_db, llm):
    add_models(rel_db, llm, ["a", "b", "c"])
    asc = "SELECT name FROM singer ORDER BY age ASC"
    desc = "SELECT name FROM singer ORDER BY age DESC"
    llm.add_rule(Rule(model="a", response=asc))
    llm.set_default(desc)
    trace = explain(rel_db, "List the singers' names from the oldest to the youngest.")
    by = {c["model"]: c for c in trace["candidates"]}
    assert by["a"]["result_hash"] == by["b"]["result_hash"]  # same rows as a multiset
    assert by["a"]["order_hash"] != by["b"]["order_hash"] == by["c"]["order_hash"]
    assert "DESC" in trace["sql"].upper()  # b and c's order speaks
    llm.set_default("SELECT name FROM singer")
    unordered = explain(rel_db, "List the singers' names.")
    assert all(c["order_hash"] is None for c in unordered["candidates"] if c["model"] != "a")
