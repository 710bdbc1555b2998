"""The ``nl2sql`` command and the Python API where the extension is installed (issue 67 §3): the
extension's SQL functions answer (the models are called by the server, the query log is the
extension's own, written by its pipeline), the result is printed or drawn here. A question run in
this process there (``in_process=True``) is refused before any model is called. The demo
database of the other tests, its log writer the extension's; models on the loopback server."""

from __future__ import annotations

import dataclasses
import json

import pytest

import nl2sql
from conftest import add_models
from nl2sql.client.cli import main
from nl2sql_indexer.dev.loopback import Rule

SQL = "SELECT name, age FROM singer ORDER BY age, name"
WORDS = "Answer the question in words"  # the narrating prompt (curated/narrate.py)


@pytest.fixture
def served(cluster, db, llm):
    """The demo database with one model writing ``SQL``; its DSN."""
    add_models(db, llm, ["m1"])
    llm.set_default(SQL)
    return cluster.dsn(db.info.dbname)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _logged(db, question: str) -> list[tuple]:
    """The query log's rows of a question: (id, sql, conversation)."""
    return db.execute(
        "SELECT id, sql, conversation FROM nl2sql.query_log WHERE question = %s ORDER BY id",
        (question,),
    ).fetchall()


def _youngest(db) -> str:
    return db.execute(SQL + " LIMIT 1").fetchone()[0]


def test_ask_prints_the_servers_sql_and_rows(served, db, capsys):
    q = "Who are the singers, youngest first? (command)"
    code, out, err = _run(capsys, "ask", "--dsn", served, q)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == SQL + ";"
    assert [c.strip() for c in lines[2].split("|")] == ["name", "age"]  # the query's order
    assert lines[4].startswith(_youngest(db))
    [(log_id, sql, conversation)] = _logged(db, q)  # the extension's writer took it
    assert sql == SQL and conversation is None  # the call's own key forgotten
    code, out, err = _run(capsys, "ask", "--dsn", served, "--json", q)
    assert code == 0, err
    trace = json.loads(out)
    assert trace["sql"] == SQL and trace["columns"] == ["name", "age"]
    assert trace["rows"][0][0] == _youngest(db) and trace["candidates"]
    assert trace["log_id"] == _logged(db, q)[-1][0] > log_id
    assert "conversation" not in trace


def test_ask_chart_draws_the_servers_spec(served, db, llm, capsys, tmp_path):
    llm.set_default("SELECT country, count(*) AS n FROM singer GROUP BY country ORDER BY country")
    q = "How many singers are there per country? (chart)"
    png = tmp_path / "a.png"
    code, out, err = _run(capsys, "ask", "--dsn", served, "--chart", str(png), q)
    assert code == 0, err
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert out.startswith("SELECT country") and f"written to {png}" in out
    [(_, sql, _)] = _logged(db, q)
    assert sql.startswith("SELECT country")


def test_explain_and_narrate(served, db, llm, capsys):
    q = "Who are the singers, youngest first? (explain)"
    code, out, err = _run(capsys, "explain", "--dsn", served, q)
    assert code == 0, err
    trace = json.loads(out)
    [(log_id, _, _)] = _logged(db, q)
    assert trace["sql"] == SQL and trace["log_id"] == log_id and trace["candidates"]
    llm.add_rule(Rule(model="m1", contains=WORDS, response="The youngest is first."))
    q = "Who are the singers, youngest first? (narrate)"
    code, out, err = _run(capsys, "narrate", "--dsn", served, q)
    assert code == 0, err
    assert out.strip() == "The youngest is first."
    assert [r[1] for r in _logged(db, q)] == [SQL]


def test_the_python_api_calls_the_extensions_functions(served, db):
    q = "Who are the singers, youngest first? (api)"
    n = db.execute("SELECT count(*) FROM singer").fetchone()[0]
    with nl2sql.connect(served) as client:
        a = client.ask(q)
        assert a.sql == SQL and a.columns == ["name", "age"] and len(a.rows) == n
        assert a.rows[0][0] == _youngest(db) and a.confidence == a.trace["confidence"]
        assert a.log_id == a.trace["log_id"] == _logged(db, q)[0][0]
        assert client.sql(q) == SQL
        trace = client.explain(q)
        assert trace["sql"] == SQL and trace["log_id"] > a.log_id
        spec = client.chart(q)
        assert spec["usermeta"]["sql"] == SQL and spec["usermeta"]["log_id"] > trace["log_id"]
        assert len(_logged(db, q)) == 4
        # a key given by the caller is kept: the call is a turn of that conversation
        b = client.ask(q, conversation="client-extension-key")
        turns = db.execute("SELECT log_id FROM nl2sql.conversation('client-extension-key')")
        assert [t[0] for t in turns] == [b.log_id]
        assert b.trace["conversation"] == "client-extension-key"
        # the other functions
        assert {"check", "status", "detail", "fix"} == set(client.doctor()[0])
        got = client.execute_sql("SELECT count(*) AS n FROM singer")
        assert got["status"] == "ok" and got["rows"] == [{"n": n}]
        assert client.describe_table("singer")["table"] == "singer"
    with nl2sql.connect(served, for_model=True) as client:
        a = client.ask(q)
        assert a.sql == SQL and "agent_view" in a.trace


def test_ask_on_a_replica_reads_the_trace_then_the_rows(served, db):
    # a server in recovery logs nothing: nl2sql.explain's trace, then the rows fetched again
    q = "Who are the singers, youngest first? (replica)"
    with nl2sql.connect(served) as client:
        assert client.on_server()
        client._where = dataclasses.replace(client._where, replica=True)
        a = client.ask(q)
    assert a.sql == SQL and a.columns == ["name", "age"] and a.rows[0][0] == _youngest(db)
    assert a.log_id == a.trace["log_id"] == _logged(db, q)[0][0]  # this primary logged it


def test_a_failed_question_is_the_servers_error(served, db, llm, capsys):
    llm.set_default("SELECT no_such_column FROM singer")
    q = "How many singers do we have? (failed)"
    with nl2sql.connect(served) as client:
        with pytest.raises(nl2sql.ClientError) as e:
            client.ask(q)
    msg = str(e.value)
    assert msg.startswith("nl2sql") and "no candidate executed" in msg
    assert "plpy" not in msg and "Traceback" not in msg
    [(log_id, sql, conversation)] = _logged(db, q)  # kept by the server's shared process
    assert sql is None and conversation is None
    assert f"logged as nl2sql.query_log id {log_id}" in e.value.hint
    assert e.value.trace["log_id"] == log_id and e.value.trace["sql"] is None
    code, out, err = _run(capsys, "ask", "--dsn", served, q)
    assert code == 1 and not out and err.startswith("nl2sql") and "\nhint: " in err, err
    assert "Traceback" not in err and "plpy" not in err


def test_a_question_in_this_process_is_refused_before_any_model_call(served, db, llm):
    llm.clear()
    q = "How many singers do we have? (in process)"
    with nl2sql.connect(served, in_process=True) as client:
        for call in (client.ask, client.explain, client.narrate, client.chart):
            with pytest.raises(nl2sql.ClientError) as e:
                call(q)
            assert e.value.sqlstate == "42501" and "inside the server" in str(e.value)
            assert "without in_process" in e.value.hint
    assert llm.requests == [] and _logged(db, q) == []
