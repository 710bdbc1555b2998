"""Follow-up questions (conversations), clarify-or-abstain and answers in words (narrate).

Inside a real PostgreSQL on the demo database; every model answer comes from the scripted
loopback server (tests/conftest.py), never a model's. The rules checked without a database
(turns a role may not see, readings through the gate) are tests/unit/retrieval/test_followups.py.
"""

from __future__ import annotations

import psycopg
import pytest

from conftest import DEMO_DB, add_models, login_role
from nl2sql.model.prompts import TURN_MARKER
from nl2sql_indexer.dev.loopback import Rule

Q1 = "Which singers do we have?"
Q2 = "and only those from France?"
SQL1 = "SELECT name FROM singer"
SQL2 = "SELECT name FROM singer WHERE country = 'France'"
OTHER = "nl2sql_conv_other"


def _user_texts(llm, question: str) -> list[str]:
    """The user messages of every request whose asked question is ``question``."""
    out = []
    for r in llm.requests:
        text = r["messages"][-1]["content"]
        if text.rstrip().endswith(f"{question} */"):
            out.append(text)
    return out


@pytest.fixture
def other_role(db, cluster):
    """A second ordinary role that may read the demo tables."""
    login_role(db, OTHER, "singer, stadium, concert, singer_in_concert")
    conn = cluster.connect(DEMO_DB, user=OTHER)
    yield conn
    conn.close()


def test_two_turn_conversation_shows_earlier_turn_and_only_to_its_role(db, llm, other_role):
    add_models(db, llm, ["m1"])
    llm.add_rule(Rule(model="m1", question=Q1, response=SQL1))
    llm.add_rule(Rule(model="m1", question=Q2, response=SQL2))
    key = "conv-two-turns"
    db.execute("SELECT nl2sql.forget_conversation(%s)", (key,))
    assert db.execute("SELECT nl2sql(%s, conversation => %s)", (Q1, key)).fetchone()[0] == SQL1
    # the first turn's prompts had no earlier turn
    assert all(TURN_MARKER not in t for t in _user_texts(llm, Q1))
    sql2 = db.execute("SELECT nl2sql(%s, conversation => %s)", (Q2, key)).fetchone()[0]
    assert sql2 == SQL2
    second = _user_texts(llm, Q2)
    assert len(second) == 2  # PreSQL and FinSQL
    for text in second:
        assert f"{TURN_MARKER}{Q1} */\n{SQL1};" in text
    turns = db.execute("SELECT turn, question, sql FROM nl2sql.conversation(%s)", (key,)).fetchall()
    assert turns == [(1, Q1, SQL1), (2, Q2, SQL2)]
    trace = db.execute("SELECT nl2sql.explain(%s, conversation => %s)", (Q2, key)).fetchone()[0]
    assert [t["question"] for t in trace["turns"]] == [Q1, Q2]

    # another role, same key: none of the first role's turns, in its prompt or its listing
    llm.clear()
    llm.add_rule(Rule(model="m1", question=Q2, response=SQL2))
    assert (
        other_role.execute("SELECT count(*) FROM nl2sql.conversation(%s)", (key,)).fetchone()[0]
        == 0
    )
    other_role.execute("SELECT nl2sql(%s, conversation => %s)", (Q2, key))
    texts = _user_texts(llm, Q2)
    assert texts and all(TURN_MARKER not in t and Q1 not in t for t in texts)
    assert (
        other_role.execute("SELECT count(*) FROM nl2sql.conversation(%s)", (key,)).fetchone()[0]
        == 1
    )
    assert other_role.execute("SELECT nl2sql.forget_conversation(%s)", (key,)).fetchone()[0] == 1
    # the first role's turns are untouched by the other's forgetting; then forgotten
    assert db.execute("SELECT count(*) FROM nl2sql.conversation(%s)", (key,)).fetchone()[0] == 3
    assert db.execute("SELECT nl2sql.forget_conversation(%s)", (key,)).fetchone()[0] == 3
    assert db.execute("SELECT count(*) FROM nl2sql.conversation(%s)", (key,)).fetchone()[0] == 0
    llm.clear()
    llm.add_rule(Rule(model="m1", question=Q2, response=SQL2))
    db.execute("SELECT nl2sql(%s, conversation => %s)", (Q2, key))
    assert all(TURN_MARKER not in t for t in _user_texts(llm, Q2))


def test_bad_conversation_key_is_refused(db, llm):
    add_models(db, llm, ["m1"])
    with pytest.raises(psycopg.Error, match="conversation key"):
        db.execute("SELECT nl2sql(%s, conversation => '  ')", (Q1,))
    assert llm.requests == []


def test_abstention_lists_two_readings_and_explain_keeps_them(db, llm):
    q = "Which singers come from that country?"
    fr = "SELECT name FROM singer WHERE country = 'France' ORDER BY name"
    nl = "SELECT name FROM singer WHERE country = 'Netherlands' ORDER BY name"
    add_models(db, llm, ["m1", "m2"])
    llm.add_rule(Rule(model="m1", question=q, response=fr))
    llm.add_rule(Rule(model="m2", question=q, response=nl))
    db.execute("SELECT nl2sql.set_setting('presql_votes', 'off')")
    try:
        db.execute("SELECT nl2sql.set_setting('abstain_below', '0.6')")
        with pytest.raises(psycopg.Error) as err:
            db.execute("SELECT nl2sql(%s)", (q,))
        msg = str(err.value)
        assert "2 competing readings" in msg and "abstain_below 0.6" in msg
        first_fr = db.execute(fr).fetchone()[0]
        first_nl = db.execute(nl).fetchone()[0]
        assert fr in msg and nl in msg and first_fr in msg and first_nl in msg
        trace = db.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]
        assert trace["sql"] is None and trace["vote"]["sql"] in (fr, nl)
        readings = trace["abstained"]["readings"]
        assert sorted(r["sql"] for r in readings) == sorted([fr, nl])
        assert all(r["rows"] and r["confidence"] == 0.5 for r in readings)
        # the readings' rows respect the value policy: an opted-out column's values are left out
        db.execute("SELECT nl2sql.set_value_policy('singer', false, 'name')")
        try:
            with pytest.raises(psycopg.Error) as err:
                db.execute("SELECT nl2sql(%s)", (q,))
            msg = str(err.value)
            assert "withheld by the value policy: 1 column(s) withheld: name" in msg
            assert first_fr not in msg and first_nl not in msg and fr in msg
        finally:
            db.execute("DELETE FROM nl2sql.value_policy WHERE table_name = 'singer'")
            db.execute("SELECT nl2sql.reindex(force => true)")
        # at or below the winner's confidence it answers
        db.execute("SELECT nl2sql.set_setting('abstain_below', '0.5')")
        assert db.execute("SELECT nl2sql(%s)", (q,)).fetchone()[0] in (fr, nl)
    finally:
        db.execute("SELECT nl2sql.reset_setting('abstain_below')")


def test_narrate_refused_with_send_values_off(db, llm):
    add_models(db, llm, ["m1"])
    llm.set_default(SQL1)
    db.execute("SELECT nl2sql.set_setting('send_values', 'off')")
    try:
        with pytest.raises(psycopg.Error, match="send_values is off"):
            db.execute("SELECT nl2sql.narrate(%s)", (Q1,))
    finally:
        db.execute("SELECT nl2sql.reset_setting('send_values')")
    assert llm.requests == []  # refused before any model call


def test_narrate_request_has_no_opted_out_column_values(db, llm):
    q = "Who are the singers from France and how old are they?"
    sql = "SELECT name, age, country FROM singer WHERE country = 'France' ORDER BY name"
    add_models(db, llm, ["m1"])
    llm.add_rule(
        Rule(
            model="m1",
            contains="Answer the question in words",
            response="Several singers are from France.",
        )
    )
    llm.add_rule(Rule(model="m1", question=q, response=sql))
    names = [r[0] for r in db.execute(sql).fetchall()]
    assert names
    db.execute("SELECT nl2sql.set_value_policy('singer', false, 'name')")
    try:
        text = db.execute("SELECT nl2sql.narrate(%s)", (q,)).fetchone()[0]
        assert text == "Several singers are from France."
        reqs = [
            r
            for r in llm.requests
            if "Answer the question in words" in r["messages"][-1]["content"]
        ]
        assert len(reqs) == 1
        body = reqs[0]["messages"][-1]["content"]
        assert '"country": "France"' in body and '"age"' in body
        assert not any(n in body for n in names)
        assert (
            "Left out of the result (their values may not be shown): 1 column(s) withheld: name"
            in body
        )
    finally:
        db.execute("DELETE FROM nl2sql.value_policy WHERE table_name = 'singer'")
        db.execute("SELECT nl2sql.reindex(force => true)")
    # without the policy the names do reach the narrating model
    llm.clear()
    llm.add_rule(Rule(model="m1", contains="Answer the question in words", response="ok"))
    llm.add_rule(Rule(model="m1", question=q, response=sql))
    db.execute("SELECT nl2sql.narrate(%s)", (q,))
    body = [
        r for r in llm.requests if "Answer the question in words" in r["messages"][-1]["content"]
    ][0]
    assert names[0] in body["messages"][-1]["content"]


def test_eleven_right_empty_results_outweigh_one_wrong_row_with_their_true_confidence(db, llm):
    # the shape of issue 31 §7: eleven candidates agree on the right, empty result; one returns
    # rows. Empty results weigh 0.1 each while another candidate returned rows (issue 42 §2:
    # weighed down, not dropped), so 1.1 against 1: the empty answer wins, with the confidence
    # of 11 executed candidates of 12; the row is the other reading
    q = "Which singers are older than a thousand years?"
    empty = "SELECT name FROM singer WHERE age > 1000"
    wrong = "SELECT name FROM singer WHERE age > 10"
    names = [f"right{i}" for i in range(11)] + ["wrong"]
    add_models(db, llm, names)
    for n in names:
        llm.add_rule(Rule(model=n, question=q, response=wrong if n == "wrong" else empty))
    db.execute("SELECT nl2sql.set_setting('presql_votes', 'off')")
    db.execute("SELECT nl2sql.set_setting('repair_rounds', '0')")
    try:
        trace = db.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]
        assert "age > 1000" in trace["sql"] and trace["confidence"] == pytest.approx(11 / 12)
        vote = trace["vote"]
        assert (vote["groups"][0]["size"], vote["groups"][0]["row_count"]) == (11, 0)
        assert vote["groups"][0]["score"] == pytest.approx(1.1)
        assert vote["groups"][1]["size"] == 1 and vote["groups"][1]["score"] == 1.0
        assert vote["groups"][1]["row_count"] > 0 and vote["set_aside"] == []
        logged = db.execute(
            "SELECT confidence FROM nl2sql.query_log WHERE id = %s", (trace["log_id"],)
        ).fetchone()[0]
        assert logged == pytest.approx(11 / 12)
        # abstain_below reads that confidence: the question asks for clarification, and the
        # readings show the row too
        db.execute("SELECT nl2sql.set_setting('abstain_below', '0.95')")
        with pytest.raises(psycopg.Error) as err:
            db.execute("SELECT nl2sql(%s)", (q,))
        msg = str(err.value)
        assert "confidence 0.92 < abstain_below 0.95" in msg
        assert "reading 1 (11 candidate(s), confidence 0.92)" in msg and "no rows" in msg
        assert "reading 2 (1 candidate(s), confidence 0.08)" in msg and "age > 10" in msg
    finally:
        db.execute("SELECT nl2sql.reset_setting('abstain_below')")
        db.execute("SELECT nl2sql.reset_setting('repair_rounds')")
