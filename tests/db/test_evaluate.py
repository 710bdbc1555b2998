"""Evaluation on the user's own questions: nl2sql.evaluate() measures the models on the
verified questions (fast path bypassed, leave-one-out), classifies each miss, keeps every run
(evaluation_trend) and feeds calibrate(). The pure classification is
tests/unit/curated/test_evaluate.py.

Database tests use the demo database (tests/conftest.py) and the scripted loopback server
(its answers are scripted, not a model's; it records every request).
"""

from __future__ import annotations

import psycopg
import pytest

from conftest import add_models, login_role
from nl2sql_indexer.dev.loopback import Rule, extract_question

ROLE = "nl2sql_i15c_evaluator"

# (question, verified SQL, what both models answer) — each answer's miss is the comment's
Q_RIGHT = (
    "How many singers are from France?",
    "SELECT count(*) FROM singer WHERE country = 'France'",
)
Q_MISSING = (
    "List the names of the singers from France.",
    "SELECT name FROM singer WHERE country = 'France'",
    "SELECT name FROM singer WHERE country = 'France' ORDER BY name LIMIT 2",
)
Q_EMPTY = (
    "Which singers are older than 30?",
    "SELECT name FROM singer WHERE age > 30",
    "SELECT name FROM singer WHERE age > 1000",
)
Q_COLUMNS = (
    "What are the names of all stadiums?",
    "SELECT name FROM stadium",
    "SELECT name, capacity FROM stadium",
)
Q_ERROR = (
    "How many concerts are there?",
    "SELECT count(*) FROM concert",
    "SELECT count(*) / 0 FROM concert",
)


@pytest.fixture
def edb(db):
    """The demo database with no verified queries or evaluation runs before and after."""

    def wipe():
        db.execute("DELETE FROM nl2sql.verified_query")
        db.execute("DELETE FROM nl2sql.evaluation_run")
        db.execute("DELETE FROM nl2sql.model_reliability")

    wipe()
    yield db
    wipe()
    db.execute("SELECT nl2sql.reset_setting('k_examples')")


def script(llm, m2_first_wrong: bool = True) -> None:
    """Both models answer each question as its tuple says; on Q_RIGHT m1 is right and m2 wrong."""
    llm.add_rule(Rule(model="m1", question=Q_RIGHT[0], response=Q_RIGHT[1]))
    llm.add_rule(
        Rule(
            model="m2",
            question=Q_RIGHT[0],
            response="SELECT count(*) FROM singer" if m2_first_wrong else Q_RIGHT[1],
        )
    )
    for q, _, answer in (Q_MISSING, Q_EMPTY, Q_COLUMNS, Q_ERROR):
        llm.add_rule(Rule(question=q, response=answer))


def add_all(conn) -> dict[str, int]:
    return {
        q[0]: conn.execute("SELECT nl2sql.add_verified_query(%s, %s)", (q[0], q[1])).fetchone()[0]
        for q in (Q_RIGHT, Q_MISSING, Q_EMPTY, Q_COLUMNS, Q_ERROR)
    }


def test_evaluate_measures_the_models_and_classifies_each_miss(edb, llm):
    add_models(edb, llm, ["m1", "m2"])
    script(llm)
    ids = add_all(edb)
    out = edb.execute("SELECT nl2sql.evaluate(note => 'first')").fetchone()[0]
    assert (out["questions"], out["judged"], out["right"], out["ex"]) == (5, 5, 1, 0.2)
    misses = {m["question"]: m["category"] for m in out["misses"]}
    assert misses == {
        Q_MISSING[0]: "RESULT_MISSING_ROWS",
        Q_EMPTY[0]: "EMPTY_RESULT",
        Q_COLUMNS[0]: "COLUMNS_MISMATCH",
        Q_ERROR[0]: "ERROR",
    }
    assert out["categories"] == {
        "COLUMNS_MISMATCH": 1,
        "EMPTY_RESULT": 1,
        "ERROR": 1,
        "RESULT_MISSING_ROWS": 1,
    }
    # per model: m1 right on Q_RIGHT, m2 wrong there; both wrong elsewhere
    assert out["per_model"] == {
        "m1": {"questions": 5, "right": 1, "ex": 0.2},
        "m2": {"questions": 5, "right": 0, "ex": 0.0},
    }
    # the models were asked every question: the fast path did not answer from the verified
    # query, and no question was its own example (it appears once: as the question asked)
    asked: dict[str, list[str]] = {}
    for r in llm.requests:
        prompt = r["messages"][-1]["content"]
        asked.setdefault(extract_question(prompt), []).append(prompt)
    assert set(ids) <= set(asked)
    for q, prompts in asked.items():
        assert all(p.count(q) == 1 for p in prompts), q
    # the other verified questions are still examples (so the count above could fail)
    assert any(Q_RIGHT[0] in p for p in asked[Q_MISSING[0]])
    # kept: the run and one row per question, the log rows marked with the run
    run = out["run_id"]
    rows = edb.execute(
        'SELECT verified_query_id, "right", category, per_model, log_id '
        "FROM nl2sql.evaluation_result WHERE run_id = %s ORDER BY 1",
        (run,),
    ).fetchall()
    assert [r[0] for r in rows] == sorted(ids.values())
    assert rows[0][1:4] == (True, None, {"m1": True, "m2": False})
    marked = edb.execute(
        "SELECT count(*) FROM nl2sql.query_log WHERE (trace->>'evaluation_run')"
        "::bigint = %s AND id = ANY(%s)",
        (run, [r[4] for r in rows]),
    ).fetchone()[0]
    assert marked == 5
    # calibrate() learns from the run's judged candidates
    cal = edb.execute("SELECT nl2sql.calibrate()").fetchone()[0]
    assert cal["from_evaluation"] == 5 and cal["evaluation_run"] == run
    # (its executed FinSQL candidates: 4 of m1's 5, the division by zero never executed)
    m1 = {(r["model"], r["level"]): r for r in cal["models"]}[("m1", "all")]
    assert m1["judged"] >= 4 and m1["right"] >= 1


def test_runs_are_kept_and_the_trend_shows_the_change(edb, llm):
    add_models(edb, llm, ["m1", "m2"])
    script(llm)
    edb.execute("SELECT nl2sql.add_verified_query(%s, %s)", Q_RIGHT)
    edb.execute("SELECT nl2sql.add_verified_query(%s, %s)", Q_MISSING[:2])
    first = edb.execute("SELECT nl2sql.evaluate()").fetchone()[0]
    # the models change their answers (scripted) and a setting changes
    llm.clear()
    llm.add_rule(Rule(question=Q_MISSING[0], response=Q_MISSING[1]))
    script(llm, m2_first_wrong=False)
    edb.execute("SELECT nl2sql.set_setting('k_examples', '5')")
    second = edb.execute("SELECT nl2sql.evaluate(note => 'k_examples 5')").fetchone()[0]
    assert (first["ex"], second["ex"]) == (0.5, 1.0)
    trend = edb.execute(
        "SELECT run_id, ex, ex_change, note, settings_changed, models_changed "
        "FROM nl2sql.evaluation_trend ORDER BY run_id"
    ).fetchall()
    assert [t[0] for t in trend] == [first["run_id"], second["run_id"]]
    assert trend[0][2] is None and trend[1][2] == pytest.approx(0.5)
    assert trend[1][3] == "k_examples 5"
    assert trend[1][4] == {"k_examples": 5} and trend[1][5] is False


def test_no_verified_query_is_a_clear_error(edb, llm):
    add_models(edb, llm, ["m1"])
    with pytest.raises(psycopg.Error, match="no verified query to evaluate") as e:
        edb.execute("SELECT nl2sql.evaluate()")
    assert "nl2sql.add_verified_query" in (e.value.diag.message_hint or "")
    with pytest.raises(psycopg.Error, match="max_questions must be at least 1"):
        edb.execute("SELECT nl2sql.evaluate(0)")


@pytest.fixture
def evaluator(cluster, edb):
    """An ordinary role that may read singer (not stadium or concert)."""
    login_role(edb, ROLE, "singer")
    conn = cluster.connect("nl2sql_test", user=ROLE)
    yield conn
    conn.close()
    edb.execute(f"REVOKE ALL ON nl2sql.evaluation_run, nl2sql.evaluation_result FROM {ROLE}")
    edb.execute(f"REVOKE ALL ON SEQUENCE nl2sql.evaluation_run_id_seq FROM {ROLE}")
    edb.execute(
        f"REVOKE EXECUTE ON FUNCTION nl2sql.evaluate(int, text, text), "
        f"nl2sql._evaluate(int, text, text) FROM {ROLE}"
    )


def test_an_ordinary_role_evaluates_only_verified_queries_over_tables_it_may_read(
    edb, evaluator, llm
):
    add_models(edb, llm, ["m1"])
    script(llm)
    add_all(edb)
    # administrative: an ordinary role may neither run it nor read the results
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        evaluator.execute("SELECT nl2sql.evaluate()")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        evaluator.execute("SELECT * FROM nl2sql.evaluation_trend")
    # granted (README "Evaluation on your own questions"): it asks only what it may read
    edb.execute(
        f"GRANT EXECUTE ON FUNCTION nl2sql.evaluate(int, text, text), "
        f"nl2sql._evaluate(int, text, text) TO {ROLE}"
    )
    edb.execute(
        f"GRANT SELECT, INSERT, UPDATE ON nl2sql.evaluation_run, nl2sql.evaluation_result TO {ROLE}"
    )
    edb.execute(f"GRANT USAGE ON SEQUENCE nl2sql.evaluation_run_id_seq TO {ROLE}")
    llm.clear()
    script(llm)
    out = evaluator.execute("SELECT nl2sql.evaluate()").fetchone()[0]
    mine = {Q_RIGHT[0], Q_MISSING[0], Q_EMPTY[0]}
    assert out["questions"] == 3
    kept = {
        r[0]
        for r in edb.execute(
            "SELECT question FROM nl2sql.evaluation_result WHERE run_id = %s", (out["run_id"],)
        )
    }
    assert kept == mine
    seen = {extract_question(r["messages"][-1]["content"]) for r in llm.requests}
    assert seen == mine
    prompts = " ".join(r["messages"][-1]["content"] for r in llm.requests)
    for hidden in (Q_COLUMNS[0], Q_ERROR[0], Q_COLUMNS[1], Q_ERROR[1]):
        assert hidden not in prompts
    role = edb.execute(
        "SELECT role_name FROM nl2sql.evaluation_run WHERE id = %s", (out["run_id"],)
    ).fetchone()[0]
    assert role == ROLE


def test_a_run_stops_before_a_question_that_would_pass_statement_timeout(edb, llm):
    add_models(edb, llm, ["m1"])
    # every model answer takes 0.4 s: a question (PreSQL + FinSQL) takes at least 0.8 s
    llm.add_rule(Rule(question=Q_RIGHT[0], response=Q_RIGHT[1], delay_s=0.4))
    llm.add_rule(Rule(question=Q_MISSING[0], response=Q_MISSING[1], delay_s=0.4))
    edb.execute("SELECT nl2sql.add_verified_query(%s, %s)", Q_RIGHT)
    edb.execute("SELECT nl2sql.add_verified_query(%s, %s)", Q_MISSING[:2])
    edb.execute("SET statement_timeout = '1600ms'")
    try:
        out = edb.execute("SELECT nl2sql.evaluate()").fetchone()[0]
    finally:
        edb.execute("RESET statement_timeout")
    assert out["questions"] == 1 and out["right"] == 1
    assert "1 of 2 questions evaluated" in out["stopped"]
    assert "statement_timeout" in out["stopped"]
    kept = edb.execute(
        "SELECT questions, stopped FROM nl2sql.evaluation_trend WHERE run_id = %s", (out["run_id"],)
    ).fetchone()
    assert kept == (1, out["stopped"])
