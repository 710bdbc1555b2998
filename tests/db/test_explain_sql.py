"""``nl2sql.explain_sql(sql)``: a read-only query explained in words by a (scripted) model, as the
caller; every refusal made before any model call; the explanation in ``explain``'s trace
(setting ``explain_sql_in_trace``). The leak tests over withheld columns are in test_safety.py."""

from __future__ import annotations

import psycopg
import pytest

from conftest import add_models, login_role
from nl2sql.generation.explain_sql import ASK, SQL_MAX_CHARS
from nl2sql_indexer.dev.loopback import Rule

SAID = "It lists the French singers with their ages, youngest first."
SQL = "SELECT name, age FROM singer WHERE country = 'France' ORDER BY age"
ROLE = "nl2sql_explainer"


def _asked(llm) -> list[str]:
    return [
        r["messages"][-1]["content"] for r in llm.requests if ASK in r["messages"][-1]["content"]
    ]


@pytest.fixture
def xdb(db, llm):
    add_models(db, llm, ["m1", "m2"])
    llm.add_rule(Rule(model="m1", contains=ASK, response=SAID))
    yield db


def test_explain_sql_sends_the_query_and_the_schema_it_reads(xdb, llm):
    text = xdb.execute("SELECT nl2sql.explain_sql(%s)", (SQL,)).fetchone()[0]
    assert text == SAID
    asked = _asked(llm)
    assert len(asked) == 1 and llm.requests[0]["model"] == "m1"  # narrate_model: the first
    body = asked[0]
    assert "CREATE TABLE singer (" in body and "country text" in body
    assert "WHERE country = 'France'" in body  # values are on: the SQL is shown as written
    assert "CREATE TABLE stadium" not in body and "CREATE TABLE concert" not in body
    assert "values:" not in body  # no sample cell values at all


def test_explain_sql_joins_show_every_table_read_and_strip_comments(xdb, llm):
    sql = (
        "SELECT s.name, c.concert_name /* the note: Zanzibar-77 */ FROM singer s "
        "JOIN singer_in_concert sic ON sic.singer_id = s.singer_id -- trailing Zanzibar-78\n"
        "JOIN concert c ON c.concert_id = sic.concert_id;"
    )
    assert xdb.execute("SELECT nl2sql.explain_sql(%s)", (sql,)).fetchone()[0] == SAID
    body = _asked(llm)[0]
    for t in ("singer", "singer_in_concert", "concert"):
        assert f"CREATE TABLE {t} (" in body
    assert "CREATE TABLE stadium" not in body
    assert "FOREIGN KEY (concert_id) REFERENCES concert(concert_id)" in body
    assert "Zanzibar" not in body  # comments never reach the model


REFUSED = [
    ("", "empty"),
    ("   ", "empty"),
    ("DELETE FROM singer", "DELETE"),
    ("SELECT 1 FROM singer; DELETE FROM singer", "DELETE"),
    ("UPDATE singer SET age = 1", "UPDATE"),
    ("COMMIT", "COMMIT"),
    ("SET ROLE postgres", "SET"),
    ("SELECT 1 FROM singer; SELECT 2 FROM singer", "exactly one statement"),
    ("SELECT name FROM singer FOR UPDATE", "FOR UPDATE"),
    ("SELECT pg_sleep(1) FROM singer", "pg_sleep"),
    ("SELECT nextval('x') FROM singer", "nextval"),
    ("SELECT random() FROM singer", None),  # allowed, as in candidates
    ("SELECT pg_notify('c', name) FROM singer", "pg_notify"),
    ("SELECT setseed(0.5) FROM singer", "volatile"),
    ("SELECT * FROM pg_authid", "unknown relation"),
    ("SELECT * FROM no_such_table", "unknown relation"),
    ("SELECT FROM WHERE", "does not parse"),
    ("SELECT no_such_col FROM singer", "does not plan it as the calling role"),
    ("CREATE TABLE t AS SELECT 1", "CREATE"),
    ("WITH d AS (DELETE FROM singer RETURNING *) SELECT * FROM d", "Delete"),
]


@pytest.mark.parametrize("sql, why", REFUSED)
def test_explain_sql_refuses_anything_but_one_read_only_query(xdb, llm, sql, why):
    if why is None:
        assert xdb.execute("SELECT nl2sql.explain_sql(%s)", (sql,)).fetchone()[0] == SAID
        return
    with pytest.raises(psycopg.Error) as err:
        xdb.execute("SELECT nl2sql.explain_sql(%s)", (sql,))
    msg = str(err.value)
    assert "nl2sql.explain_sql: refused" in msg and why in msg, msg
    assert llm.requests == []  # refused before any model call
    assert xdb.execute("SELECT count(*) FROM singer").fetchone()[0] > 0


def test_explain_sql_refuses_a_huge_text_before_parsing_it(xdb, llm):
    sql = "SELECT 1 FROM singer WHERE name = '" + "x" * SQL_MAX_CHARS + "'"
    with pytest.raises(psycopg.Error, match="more than"):
        xdb.execute("SELECT nl2sql.explain_sql(%s)", (sql,))
    assert llm.requests == []


def test_explain_sql_needs_select_on_every_relation_read(xdb, cluster, llm):
    login_role(xdb, ROLE, "singer")
    with cluster.connect(xdb.info.dbname, user=ROLE) as conn:
        assert conn.execute("SELECT nl2sql.explain_sql(%s)", (SQL,)).fetchone()[0] == SAID
        with pytest.raises(psycopg.Error, match="unknown relation.*concert"):
            conn.execute(
                "SELECT nl2sql.explain_sql(%s)",
                ("SELECT s.name FROM singer s JOIN concert c ON c.concert_id = s.singer_id",),
            )
        assert conn.execute("SELECT 1").fetchone()[0] == 1
    assert len(_asked(llm)) == 1  # the refused one reached no model
    assert "CREATE TABLE concert" not in _asked(llm)[0]


def test_explain_sql_without_a_model_names_add_model(db, llm):
    with pytest.raises(psycopg.Error) as err:
        db.execute("SELECT nl2sql.explain_sql(%s)", (SQL,))
    assert "add_model" in str(err.value) + str(err.value.diag.message_hint)


def test_explain_sql_model_failure_is_a_clear_error(db, llm):
    add_models(db, llm, ["m1"])
    llm.add_rule(Rule(model="m1", contains=ASK, status=500, response="boom"))
    with pytest.raises(psycopg.Error, match="m1 gave no explanation"):
        db.execute("SELECT nl2sql.explain_sql(%s)", (SQL,))


def test_explain_trace_carries_the_explanation_when_the_setting_is_on(xdb, llm):
    q = "Which singers are from France, youngest first?"
    llm.add_rule(Rule(question=q, response=SQL))
    trace = xdb.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]
    assert trace["sql"] and "sql_explanation" not in trace
    assert _asked(llm) == []  # off by default: no extra model call
    xdb.execute("SELECT nl2sql.set_setting('explain_sql_in_trace', 'on')")
    try:
        trace = xdb.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]
        assert trace["sql_explanation"] == {"text": SAID}
        logged = xdb.execute(
            "SELECT trace->'sql_explanation'->>'text' FROM nl2sql.query_log WHERE id = %s",
            (trace["log_id"],),
        ).fetchone()[0]
        assert logged == SAID
        assert len(_asked(llm)) == 1
        # nl2sql() itself makes no explanation call
        assert xdb.execute("SELECT nl2sql(%s)", (q,)).fetchone()[0]
        assert len(_asked(llm)) == 1
    finally:
        xdb.execute("SELECT nl2sql.reset_setting('explain_sql_in_trace')")
