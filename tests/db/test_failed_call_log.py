"""A call that raises because no SQL was chosen keeps its query log row: the shared process
writes it on a connection of its own, committed at once, so the error (and the caller's
rollback) cannot undo it; the hint names the row. One row per call, also when a PL/pgSQL block
traps the error. When the shared process cannot write it, the row is written in the call's
transaction as before (rolled back with the error) and the hint says why. ``explain()`` does not
raise: its row is written as before. The relay's pieces on their own:
tests/unit/embedding/test_query_log_relay.py; beside the database: tests/db/test_client.py."""

from __future__ import annotations

import re

import psycopg
import pytest
from psycopg import sql

from conftest import DEMO_DB, add_models, login_role
from nl2sql_indexer.dev.loopback import Rule

BAD_SQL = "SELECT no_such_column FROM singer"  # every candidate fails: no SQL is chosen
ANALYST = "nl2sql_failed_log_analyst"
# the shared process's insert fails (as a full disk, a lock held too long or a privilege
# revoked would make it): only the rows of its connection are refused
REFUSE_PROCESS_ROWS = """
CREATE FUNCTION nl2sql_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('application_name') LIKE 'nl2sql shared process%' THEN
        RAISE EXCEPTION 'refused by the test';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER nl2sql_test_refuse BEFORE INSERT ON nl2sql.query_log
    FOR EACH ROW EXECUTE FUNCTION nl2sql_test_refuse();
"""


@pytest.fixture
def failing(db, llm):
    """The demo connection with one model whose every answer fails to run."""
    add_models(db, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response=BAD_SQL))
    return db


def _rows(conn, question: str) -> list[tuple]:
    """The query log's rows of ``question``, read in a transaction of their own."""
    return conn.execute(
        "SELECT id, role_name, sql, error, trace FROM nl2sql.query_log WHERE question = %s "
        "ORDER BY id",
        (question,),
    ).fetchall()


def _day(conn, role: str) -> tuple[int, int, int]:
    """The role's questions, prompt and completion tokens of today (UTC) in nl2sql.usage_day."""
    got = conn.execute(
        "SELECT questions, prompt_tokens, completion_tokens FROM nl2sql.usage_day "
        "WHERE role_name = %s AND day = (pg_catalog.clock_timestamp() AT TIME ZONE 'UTC')::date",
        (role,),
    ).fetchone()
    return tuple(got) if got else (0, 0, 0)


def _logged_id(hint: str | None) -> int:
    found = re.search(r"logged as nl2sql\.query_log id (\d+)", hint or "")
    assert found, hint
    return int(found.group(1))


@pytest.mark.parametrize(
    ("statement", "tag"),
    [
        ("SELECT nl2sql(%s)", "nl2sql"),
        ("SELECT * FROM nl2sql.ask(%s)", "ask"),
        ("SELECT nl2sql.narrate(%s)", "narrate"),
    ],
)
def test_failed_call_keeps_one_row_with_error_role_and_tokens(cluster, failing, statement, tag):
    question = f"How many singers do we have? (failed {tag})"
    login_role(failing, ANALYST, "singer")
    before = _day(failing, ANALYST)
    with cluster.connect(DEMO_DB, user=ANALYST, autocommit=False) as conn:
        with pytest.raises(psycopg.Error) as e:
            conn.execute(statement, (question,))
        conn.rollback()  # the caller's transaction: the row is not in it
    assert "no candidate executed" in str(e.value)
    log_id = _logged_id(e.value.diag.message_hint)
    assert "nl2sql.explain" in e.value.diag.message_hint
    rows = _rows(failing, question)
    assert [r[0] for r in rows] == [log_id]
    _, role, chosen, error, trace = rows[0]
    assert role == ANALYST and chosen is None
    assert error and "no candidate executed" in error
    assert trace["question"] == question and trace["error"] == error
    assert trace["tokens"]["total"] > 0 and trace["tokens"]["by_model"]["m1"]["calls"] >= 1
    # the question and its tokens count on the role's day (quotas, nl2sql.usage), as an answered
    # call's: committed with the row, not rolled back with the error
    spent = (1, trace["tokens"]["prompt"], trace["tokens"]["completion"])
    assert _day(failing, ANALYST) == tuple(b + d for b, d in zip(before, spent, strict=True))


def _trapped(question: str) -> sql.Composed:
    """A PL/pgSQL block that asks ``question`` and traps the error."""
    return sql.SQL("DO $$BEGIN PERFORM nl2sql({}); EXCEPTION WHEN OTHERS THEN NULL; END$$").format(
        sql.Literal(question)
    )


def test_a_trapped_error_leaves_exactly_one_row(failing):
    question = "How many singers do we have? (trapped)"
    failing.execute(_trapped(question))
    assert len(_rows(failing, question)) == 1
    # in a transaction the caller rolls back: the row was committed on its own
    question = "How many singers do we have? (trapped, rolled back)"
    with pytest.raises(psycopg.Error) as e:
        with failing.transaction():
            failing.execute(_trapped(question))
            failing.execute("SELECT nl2sql(%s)", (question,))
    assert "no candidate executed" in str(e.value)
    assert len(_rows(failing, question)) == 2  # one per call: the trapped one and the raised one


def test_explain_writes_its_row_as_before(failing):
    question = "How many singers do we have? (explained)"
    trace = failing.execute("SELECT nl2sql.explain(%s)", (question,)).fetchone()[0]
    assert trace["sql"] is None and trace["log_id"] is not None
    assert "log_not_kept" not in trace
    assert [r[0] for r in _rows(failing, question)] == [trace["log_id"]]


@pytest.mark.parametrize(
    ("setup", "undo", "why"),
    [
        (
            "SELECT nl2sql.set_setting('embedder', 'local')",
            "SELECT nl2sql.reset_setting('embedder')",
            "the shared process is not in use",
        ),
        (REFUSE_PROCESS_ROWS, "DROP FUNCTION nl2sql_test_refuse() CASCADE", "insert failed"),
    ],
)
def test_without_the_shared_process_the_row_rolls_back_and_the_hint_says_why(
    failing, setup, undo, why
):
    question = f"How many singers do we have? (not kept: {why})"
    role = failing.execute("SELECT current_user").fetchone()[0]
    failing.execute(setup)
    before = _day(failing, role)
    try:
        with pytest.raises(psycopg.Error) as e:
            failing.execute("SELECT nl2sql(%s)", (question,))
    finally:
        failing.execute(undo)
    hint = e.value.diag.message_hint or ""
    assert "rolled back with the error" in hint and why in hint, hint
    assert "logged as" not in hint and "nl2sql.explain" in hint
    assert _rows(failing, question) == []  # today's in-transaction row, undone by the error
    assert _day(failing, role) == before  # and its usage with it
