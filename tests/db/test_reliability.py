"""Per-model reliability inside a real PostgreSQL: nl2sql.calibrate() from feedback and from
judged questions, its privileges, and the vote it weights in explain; schema linking from a
PreSQL that does not parse, and the row order most candidates agree on, inside the pipeline.
The learning itself is tests/unit/selection/test_reliability.py.

Scripted loopback models (tests/conftest.py): every model answer here is scripted, not a model's.
"""

from __future__ import annotations

import json

import psycopg
import pytest

from conftest import add_models, judged
from nl2sql_indexer.dev.loopback import Rule

RIGHT = "SELECT count(*) FROM singer"
WRONG = "SELECT count(*) FROM concert"
Q = "How many singers do we have?"


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


PROSE_PRESQLS = [
    "The answer is in the singer table.",
    "**Explanation**: count the rows of `singer`; `concert` is not needed.",
    "I am sorry, I cannot write that query; singer has no such column.",
]


@pytest.mark.parametrize("prose", PROSE_PRESQLS)
def test_a_prose_presql_naming_a_table_does_not_narrow_what_finsql_sees(rel_db, llm, prose):
    add_models(rel_db, llm, ["a", "b"])
    llm.add_rule(Rule(model="a", times=1, response=prose))
    # b answers from stadium, a table the prose does not name
    llm.add_rule(Rule(model="b", response="SELECT count(*) FROM stadium"))
    llm.set_default(RIGHT)
    trace = explain(rel_db, "How many stadiums and singers are there?")
    assert len(trace["linked_tables"]) == trace["pruning"]["tables_kept"] >= 3
    assert "stadium" in trace["linked_tables"]
    assert "presql tokens" not in json.dumps(trace["linking"]["why"])
    b = next(c for c in trace["candidates"] if c["source"].startswith("finsql:b"))
    assert b["status"] == "ok", b


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
