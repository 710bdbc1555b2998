"""nl2sql beside the database (issue 32 §1, §3): the server's pipeline run in this test process
over psycopg (``nl2sql.connect(..., in_process=True)``), against a database with the extension
installed, so that the two modes can be compared on the same data (the ``nl2sql`` command there
calls the extension's SQL functions). The query log's writer is replaced by the
PL/pgSQL one of a database without PL/Python (no pipeline token to check beside the server).
Model answers come from the scripted loopback server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import nl2sql
from conftest import ROOT, add_models, login_role
from nl2sql.core.errors import Nl2sqlError
from nl2sql_indexer.dev.demo_data import demo_sql

CLIENT_DB = "nl2sql_client_test"
READER = "nl2sql_client_reader"

# the log writer beside the server: no token (no PL/Python interpreter to hold one), the row
# attributed as the extension's writer attributes it
LOG_WRITER = """
CREATE OR REPLACE FUNCTION nl2sql._log_query(token text, role_name name, question text,
    sql text, confidence float8, error text, trace jsonb, conversation text DEFAULT NULL)
RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO nl2sql.query_log (role_name, question, sql, confidence, error, trace,
                                  conversation)
    VALUES (nl2sql._acting_role(role_name), question, sql, confidence, error, trace,
            conversation)
    RETURNING id
$$;
"""

# what a candidate may try: a STABLE function that writes (read-only stops it) and one that
# sleeps (the time limit stops it)
TRAPS = """
CREATE TABLE client_written (x int);
CREATE FUNCTION client_writer() RETURNS int LANGUAGE sql AS
    'INSERT INTO client_written VALUES (1) RETURNING x';
CREATE FUNCTION client_liar() RETURNS int LANGUAGE plpgsql STABLE AS
    'BEGIN RETURN client_writer(); END';
CREATE FUNCTION client_nap() RETURNS int LANGUAGE plpgsql STABLE AS
    'BEGIN PERFORM pg_sleep(30); RETURN 1; END';
"""

QUESTIONS = {
    "How many singers do we have?": "SELECT count(*) FROM singer",
    "Which singers are from France, youngest first?": (
        "SELECT name, age FROM singer WHERE country = 'France' ORDER BY age, name"
    ),
    "What is the largest stadium capacity per location?": (
        "SELECT location, max(capacity) AS most FROM stadium GROUP BY location ORDER BY location"
    ),
}


# ``nl2sql ask`` with Ctrl-C raising KeyboardInterrupt, as in a terminal: a suite started in the
# background by a shell inherits SIGINT ignored, and Python keeps an ignored SIGINT ignored. Set
# in the child's Python, not in a preexec_fn: a fork of this threaded process (the loopback
# server's threads) may deadlock before exec when it runs Python code (the subprocess docs).
# SIGUSR1 prints where each of its threads is (faulthandler), for a test that finds it stuck
CLI_WITH_CTRL_C = (
    "import faulthandler, runpy, signal; faulthandler.register(signal.SIGUSR1); "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('nl2sql.client.cli', run_name='__main__', alter_sys=True)"
)


@pytest.fixture(scope="module")
def client_db(cluster):
    cluster.create_database(CLIENT_DB, drop=True)
    conn = cluster.connect(CLIENT_DB)
    conn.execute(demo_sql())
    conn.execute(TRAPS)
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    conn.execute(LOG_WRITER)
    conn.execute("SELECT nl2sql.reindex()")
    login_role(conn, READER, "singer")
    yield conn
    conn.close()


@pytest.fixture
def cdb(client_db, llm):
    llm.clear()
    llm.set_default(None)
    client_db.execute("DELETE FROM nl2sql.model")
    client_db.execute("SELECT nl2sql.set_setting('presql_votes', 'on')")
    client_db.execute("SELECT nl2sql.set_setting('model_rounds', 'two')")
    client_db.execute("SELECT nl2sql.reset_setting('candidate_timeout_ms')")
    return client_db


def prompts_seen(llm) -> str:
    return "\n".join(m.get("content") or "" for r in llm.requests for m in r["messages"])


def test_client_answers_as_the_server_does(cluster, cdb, llm):
    add_models(cdb, llm, ["m1"])
    with nl2sql.connect(cluster.dsn(CLIENT_DB), in_process=True) as client:
        for question, sql in QUESTIONS.items():
            llm.clear()
            llm.set_default(sql)
            server_sql = cdb.execute("SELECT nl2sql(%s)", (question,)).fetchone()[0]
            server_rows = [r[0] for r in cdb.execute("SELECT * FROM nl2sql.ask(%s)", (question,))]
            server_prompts = [r["messages"] for r in llm.requests]
            llm.clear()
            llm.set_default(sql)
            answer = client.ask(question)
            assert answer.sql == server_sql
            assert [dict(zip(answer.columns, r)) for r in answer.rows] == server_rows
            assert server_rows  # the comparison compares something
            # the models were shown the same prompts (nl2sql() and ask() both asked them)
            client_prompts = [r["messages"] for r in llm.requests]
            assert client_prompts == server_prompts[: len(client_prompts)]
            assert answer.trace["question"] == question and answer.log_id
            logged = cdb.execute(
                "SELECT question, sql FROM nl2sql.query_log WHERE id = %s", (answer.log_id,)
            ).fetchone()
            assert logged == (question, answer.sql)
        trace = client.explain(next(iter(QUESTIONS)))
        assert trace["sql"] and trace["candidates"] and trace["log_id"] > answer.log_id


def test_client_leaves_the_connection_as_it_was(cluster, cdb, llm):
    add_models(cdb, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM singer")
    with cluster.connect(CLIENT_DB) as conn:
        conn.execute("SET search_path = pg_catalog, public")
        client = nl2sql.connect(conn, in_process=True)
        assert client.ask("How many singers do we have?").rows[0][0] > 0
        client.close()  # a passed connection stays open
        assert conn.execute("SHOW search_path").fetchone()[0] == "pg_catalog, public"
        assert conn.execute("SHOW transaction_read_only").fetchone()[0] == "off"
        assert conn.info.transaction_status.name == "IDLE"


def test_role_without_select_sees_neither_columns_nor_rows(cluster, cdb, llm):
    add_models(cdb, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM singer")
    names = [r[0] for r in cdb.execute("SELECT name FROM stadium")]
    with nl2sql.connect(cluster.dsn(CLIENT_DB, READER), in_process=True) as client:
        trace = client.explain("Which stadium holds the most people?")
        seen = prompts_seen(llm)
        assert "CREATE TABLE singer" in seen
        assert "CREATE TABLE stadium" not in seen and "capacity" not in seen
        assert not any(n in seen or n in json.dumps(trace) for n in names)
        # a candidate over the table it may not read: no rows, an nl2sql error
        llm.clear()
        llm.set_default("SELECT name, capacity FROM stadium")
        with pytest.raises(nl2sql.ClientError) as e:
            client.ask("Which stadium holds the most people?")
        assert str(e.value).startswith("nl2sql")
        assert not any(n in str(e.value) for n in names)
        # refused by the check (a table it may not read) or by the database (42501)
        for c in e.value.trace["candidates"]:
            assert c["status"] in ("refused", "error") and c["row_count"] is None, c
            assert c["status"] == "refused" or c["sqlstate"] == "42501", c
    roles = {r[0] for r in cdb.execute("SELECT role_name FROM nl2sql.query_log WHERE id > 0")}
    assert READER in roles  # the log rows are the reader's own


def test_a_candidate_that_writes_or_hangs_is_stopped(cluster, cdb, llm):
    add_models(cdb, llm, ["m1"])
    cdb.execute("SELECT nl2sql.set_setting('candidate_timeout_ms', '500')")
    with nl2sql.connect(cluster.dsn(CLIENT_DB), in_process=True) as client:
        llm.set_default("SELECT client_liar()")
        trace = client.explain("Write something")
        assert trace["candidates"] and trace["sql"] is None
        for c in trace["candidates"]:
            assert c["status"] in ("error", "refused"), c
            assert c["status"] == "refused" or "read-only" in c["reason"]
        assert cdb.execute("SELECT count(*) FROM client_written").fetchone()[0] == 0
        llm.clear()
        llm.set_default("SELECT client_nap()")
        trace = client.explain("Take a nap")
        assert {c["status"] for c in trace["candidates"]} == {"timeout"}
        # the cancel landed on the candidate only: the connection answers the next question
        llm.clear()
        llm.set_default("SELECT count(*) FROM singer")
        assert client.ask("How many singers do we have?").rows[0][0] > 0


def test_errors_are_nl2sql_errors(cluster, cdb, llm):
    with nl2sql.connect(cluster.dsn(CLIENT_DB), in_process=True) as client:
        with pytest.raises(nl2sql.ClientError) as no_model:
            client.ask("How many singers do we have?")
        with pytest.raises(nl2sql.ClientError) as empty:
            client.ask("   ")
    with pytest.raises(nl2sql.ClientError) as no_db:
        nl2sql.connect(cluster.dsn("nl2sql_no_such_database"))
    with cluster.connect("postgres") as other, nl2sql.connect(other) as client:
        with pytest.raises(nl2sql.ClientError) as not_installed:
            client.ask("How many singers do we have?")
    for e in (no_model, empty, no_db, not_installed):
        assert isinstance(e.value, Nl2sqlError)
        assert str(e.value).startswith("nl2sql"), str(e.value)
    assert "install" in not_installed.value.hint


def test_reindex_from_the_client(cluster, cdb):
    # a value the index has not seen: embedded in this process, its progress reported
    probe = "Client Reindex Probe Singer"
    cdb.execute(
        "INSERT INTO singer (singer_id, name, country) "
        "SELECT max(singer_id) + 1, %s, 'Nowhere' FROM singer",
        (probe,),
    )
    seen: dict[str, int] = {}
    with nl2sql.connect(cluster.dsn(CLIENT_DB), in_process=True) as client:
        counts = client.reindex(force=True, on_progress=seen.__setitem__)
    tables = cdb.execute("SELECT count(*) FROM nl2sql.schema_table").fetchone()[0]
    assert counts["tables_indexed"] == tables >= 4
    assert counts["values"] == cdb.execute("SELECT count(*) FROM nl2sql.cell_value").fetchone()[0]
    assert counts["values_embedded"] >= 1 and seen.get("public.singer", 0) >= 1
    embedded = cdb.execute(
        "SELECT embedding IS NOT NULL FROM nl2sql.cell_value WHERE value = %s", (probe,)
    ).fetchone()
    assert embedded == (True,)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py_udf"))
    return subprocess.run(
        [sys.executable, "-m", "nl2sql.client.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_cli_ask_prints_sql_and_rows_and_json(cluster, cdb, llm):
    add_models(cdb, llm, ["m1"])
    llm.set_default("SELECT name, age FROM singer ORDER BY age, name")
    dsn = cluster.dsn(CLIENT_DB)
    out = _cli("ask", "--dsn", dsn, "--json", "Who are the singers, youngest first?")
    assert out.returncode == 0, out.stderr
    trace = json.loads(out.stdout)
    assert trace["sql"].startswith("SELECT name, age") and trace["log_id"]
    youngest = cdb.execute("SELECT name FROM singer ORDER BY age, name LIMIT 1").fetchone()[0]
    assert trace["rows"][0][0] == youngest
    out = _cli("ask", "--dsn", dsn, "Who are the singers, youngest first?")
    assert out.returncode == 0, out.stderr
    assert "SELECT name, age" in out.stdout and youngest in out.stdout
    bad = _cli("ask", "--dsn", cluster.dsn("nl2sql_no_such_database"), "anything")
    assert bad.returncode != 0 and bad.stderr.startswith("nl2sql")


def test_mcp_tools_answer_in_process_as_in_the_server(cluster, cdb, llm):
    from nl2sql_indexer.mcp._database import Database, ToolFailure
    from nl2sql_indexer.mcp._tools import Tools

    add_models(cdb, llm, ["m1"])
    llm.set_default("SELECT name, age FROM singer ORDER BY age, name")
    question = "Who are the singers, youngest first?"
    dsn = cluster.dsn(CLIENT_DB, READER)
    in_server, here = Tools(Database(dsn)), Tools(Database(dsn, in_process=True))
    expected = in_server.ask(question, max_rows=3)
    got = here.ask(question, max_rows=3)
    assert here.db.in_process and not in_server.db.in_process
    assert got["sql"] == expected["sql"] and got["rows"] == expected["rows"]
    assert got["truncated"] and got["log_id"] > expected["log_id"]
    assert here.sql(question)["sql"] == expected["sql"]
    assert here.explain(question)["sql"] == expected["sql"]
    cdb.execute("DELETE FROM nl2sql.model")
    with pytest.raises(ToolFailure) as e:
        here.ask(question)
    assert str(e.value).startswith("nl2sql")


def test_ctrl_c_cancels_the_running_statement(cluster, cdb, llm):
    add_models(cdb, llm, ["m1"])
    cdb.execute("SELECT nl2sql.set_setting('candidate_timeout_ms', '60000')")
    llm.set_default("SELECT client_nap()")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py_udf"))
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI_WITH_CTRL_C, "ask", "--dsn", cluster.dsn(CLIENT_DB), "Nap"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    # the candidate's nap: in the server's nl2sql.ask (the command calls the extension's SQL
    # functions where it is installed, tests/db/test_client_extension.py)
    running = (
        "SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND state = 'active' "
        f"AND datname = '{CLIENT_DB}' AND pid <> pg_backend_pid()"
    )
    deadline = time.monotonic() + 120
    while not cdb.execute(running).fetchall():
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.send_signal(signal.SIGUSR1)  # its threads' stacks on stderr
                time.sleep(1)
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(
                f"the candidate never ran; nl2sql ask: exit {proc.returncode}\n{out}\n{err}"
            )
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.startswith("nl2sql: interrupted"), err
    assert not cdb.execute(running).fetchall()  # cancelled in the server, not left running


def test_a_failed_question_beside_the_database_keeps_its_log_row(cluster, cdb, llm):
    # as in the server (tests/db/test_failed_call_log.py): sql() and narrate() raise inside the
    # call's transaction, so the client writes the row once it rolled back and names it; ask()
    # commits the trace first and names it too
    add_models(cdb, llm, ["m1"])
    llm.set_default("SELECT no_such_column FROM singer")
    day = (
        "SELECT coalesce(sum(questions), 0) FROM nl2sql.usage_day WHERE role_name = %s "
        "AND day = (pg_catalog.clock_timestamp() AT TIME ZONE 'UTC')::date"
    )
    with nl2sql.connect(cluster.dsn(CLIENT_DB, READER), in_process=True) as client:
        for n, call in enumerate((client.sql, client.ask, client.narrate)):
            question = f"How many singers do we have? (beside, failed {n})"
            before = cdb.execute(day, (READER,)).fetchone()[0]
            with pytest.raises(nl2sql.ClientError) as e:
                call(question)
            # the failed question counts on the role's day, once
            assert cdb.execute(day, (READER,)).fetchone()[0] == before + 1, call.__name__
            assert "no candidate executed" in str(e.value), str(e.value)
            rows = cdb.execute(
                "SELECT id, role_name, sql, error FROM nl2sql.query_log WHERE question = %s",
                (question,),
            ).fetchall()
            assert len(rows) == 1, (call.__name__, rows)
            log_id, role, sql, error = rows[0]
            assert role == READER and sql is None and "no candidate executed" in error
            assert f"logged as nl2sql.query_log id {log_id}" in (e.value.hint or ""), e.value.hint
