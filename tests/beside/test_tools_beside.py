"""The rest of the SQL surface beside the database (issue 32): ``Client.narrate``,
``explain_sql``, ``retrieve``, ``doctor``, ``evaluate``, ``export_semantic_model``,
``calibrate``, ``prune_query_log`` and ``mine_queries`` against the demo installed without
PL/Python, each with the result shape its SQL function has in the extension (tests/db); their
``nl2sql`` subcommands; a refused privilege as a ``ClientError``; the stubs' hints; and the
connection's ``statement_timeout`` bounding a whole question, as it bounds ``SELECT nl2sql()``."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
import yaml

import nl2sql
from nl2sql import udf
from nl2sql.client.cli import main

if not (Path(__file__).parent / "conftest.py").exists():  # the install branch's fixtures
    pytest.skip("tests/beside/conftest.py is missing", allow_module_level=True)

from conftest import add_models
from nl2sql.generation.explain_sql import ASK
from nl2sql_indexer.dev.loopback import Rule

from .test_client_beside import READER, demo  # noqa: F401  (the fixture)

COUNT_SQL = "SELECT count(*) AS n FROM singer"
WORDS = "Answer the question in words"  # the narrating prompt (curated/narrate.py)
VERIFIED_Q = "How many singers are there?"


def _verified(dsn: str) -> None:
    """One verified question, added through the same Python the SQL function runs."""
    with nl2sql.connect(dsn) as c:
        c._in_transaction(
            lambda _p: udf.add_verified_query(c.plpy, VERIFIED_Q, COUNT_SQL, "postgres")
        )


def _doctor_shape(rows) -> None:
    assert rows and all(set(r) == {"check", "status", "detail", "fix"} for r in rows), rows
    assert all(r["status"] in ("ok", "warn", "fail") for r in rows), rows
    checks = {r["check"]: r for r in rows}
    assert "index" in checks and "settings" in checks, sorted(checks)


def _evaluate_shape(out) -> None:
    for key in (
        "run_id",
        "questions",
        "judged",
        "right",
        "ex",
        "per_model",
        "misses",
        "not_judged",
    ):
        assert key in out, (key, out)
    assert out["questions"] == 1 and out["judged"] == 1 and out["right"] == 1, out


# (method, arguments, what the loopback model says, check of the result)
CASES = [
    ("narrate", ("How many singers?",), None, lambda r: r == "Six singers."),
    ("explain_sql", (COUNT_SQL,), None, lambda r: r == "It counts the singers."),
    (
        "retrieve",
        ("How many singers?",),
        None,
        lambda r: isinstance(r, dict) and "CREATE TABLE singer" in r["presql_prompt"],
    ),
    ("doctor", (), None, lambda r: _doctor_shape(r) is None),
    ("evaluate", (), "verified", lambda r: _evaluate_shape(r) is None),
    (
        "export_semantic_model",
        (),
        None,
        lambda r: isinstance(r, str) and isinstance(yaml.safe_load(r), dict),
    ),
    (
        "prune_query_log",
        (),
        None,
        lambda r: set(r) == {"deleted", "retention_days", "statements"} and r["deleted"] == 0,
    ),
    ("calibrate", (None,), None, lambda r: isinstance(r, dict)),
    (
        "chart",
        ("How many singers?",),
        None,
        lambda r: (
            (r["usermeta"]["chart"], r["usermeta"]["sql"].lower()) == ("none", COUNT_SQL.lower())
            and r["data"]["values"][0]["nl2sql_message"].startswith("n: ")
        ),
    ),
]


@pytest.fixture
def scripted(demo, llm):  # noqa: F811
    llm.clear()
    llm.set_default(COUNT_SQL)
    llm.add_rule(Rule(contains=WORDS, response="Six singers."))
    llm.add_rule(Rule(contains=ASK, response="It counts the singers."))
    return demo


@pytest.mark.parametrize("method, args, setup, check", CASES, ids=[c[0] for c in CASES])
def test_each_method_gives_its_sql_function_s_result(scripted, method, args, setup, check):
    if setup == "verified":
        _verified(scripted.dsn)
    with nl2sql.connect(scripted.dsn) as client:
        got = getattr(client, method)(*args)
    assert check(got), got


def test_narrate_is_logged_as_its_question(scripted):
    with nl2sql.connect(scripted.dsn) as client:
        assert client.narrate("How many singers are listed?") == "Six singers."
    with psycopg.connect(scripted.dsn) as c:
        n = c.execute(
            "SELECT count(*) FROM nl2sql.query_log WHERE question = 'How many singers are listed?'"
        ).fetchone()[0]
    assert n == 1


ADMIN = [
    ("doctor", ()),
    ("evaluate", ()),
    ("export_semantic_model", ()),
    ("prune_query_log", ()),
    ("calibrate", ()),
    ("mine_queries", ()),
]


@pytest.mark.parametrize("method, args", ADMIN, ids=[a[0] for a in ADMIN])
def test_a_role_without_the_grant_gets_a_client_error(cluster, scripted, method, args):
    with nl2sql.connect(cluster.dsn(scripted.name, READER)) as client:
        with pytest.raises(nl2sql.ClientError) as e:
            getattr(client, method)(*args)
    assert str(e.value).startswith("nl2sql") and "permission denied" in str(e.value)
    assert e.value.hint and "GRANT EXECUTE ON FUNCTION" in e.value.hint


def test_mine_queries_without_pg_stat_statements_is_a_client_error(scripted):
    with nl2sql.connect(scripted.dsn) as client:
        with pytest.raises(nl2sql.ClientError) as e:
            client.mine_queries(5)
    assert str(e.value).startswith("nl2sql") and "pg_stat_statements" in str(e.value)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_ask_chart_draws_the_answer_beside_the_database(scripted, capsys, tmp_path):
    code, out, _ = _run(capsys, "ask", "--dsn", scripted.dsn, "--chart", str(tmp_path / "a.png"),
                        "How many singers?")  # fmt: skip
    assert code == 0 and "none chart (n: " in out and "written to" in out
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    code, _, _ = _run(capsys, "ask", "--dsn", scripted.dsn, "--chart", str(tmp_path / "a.svg"),
                      "How many singers?")  # fmt: skip
    assert code == 0 and (tmp_path / "a.svg").read_text().lstrip().startswith("<svg")
    code, _, err = _run(capsys, "ask", "--dsn", scripted.dsn, "--chart", "a.gif", "q")
    assert code == 1 and "written as .png or .svg" in err


def test_subcommands(scripted, capsys):
    dsn = scripted.dsn
    code, out, _ = _run(capsys, "doctor", "--json", "--dsn", dsn)
    rows = json.loads(out)
    _doctor_shape(rows)
    assert code == (1 if any(r["status"] == "fail" for r in rows) else 0)
    code, out, _ = _run(capsys, "doctor", "--dsn", dsn)
    assert out.splitlines()[0].split(" | ")[0].strip() == "check" and "index" in out
    assert _run(capsys, "narrate", "--dsn", dsn, "How many singers?")[:2] == (0, "Six singers.\n")
    got = _run(capsys, "explain-sql", "--dsn", dsn, COUNT_SQL)
    assert got[:2] == (0, "It counts the singers.\n")
    code, out, _ = _run(capsys, "export-semantic-model", "--dsn", dsn)
    assert code == 0 and isinstance(yaml.safe_load(out), dict)
    code, out, _ = _run(capsys, "prune-query-log", "--json", "--dsn", dsn)
    assert code == 0 and set(json.loads(out)) == {"deleted", "retention_days", "statements"}
    code, out, _ = _run(capsys, "prune-query-log", "--dsn", dsn)
    assert code == 0 and out.startswith("deleted 0 query_log rows")
    code, out, err = _run(capsys, "evaluate", "--dsn", dsn)
    assert code == 1 and out == "" and err.startswith("nl2sql") and "hint:" in err  # none yet
    _verified(dsn)
    code, out, _ = _run(capsys, "evaluate", "--json", "--note", "cli", "--dsn", dsn)
    assert code == 0
    _evaluate_shape(json.loads(out))
    code, out, _ = _run(capsys, "evaluate", "--dsn", dsn)
    assert code == 0 and out.startswith("run ") and "EX 1" in out


def test_a_refused_subcommand_exits_1_with_the_hint(cluster, scripted, capsys):
    code, out, err = _run(capsys, "doctor", "--dsn", cluster.dsn(scripted.name, READER))
    assert code == 1 and out == ""
    assert err.startswith("nl2sql") and "permission denied" in err and "\nhint: " in err
    assert "Traceback" not in err


STUB_HINTS = [
    ("SELECT nl2sql.narrate('q')", "nl2sql narrate"),
    ("SELECT nl2sql.chart('q')", "nl2sql ask --chart"),
    ("SELECT nl2sql.explain_sql('SELECT 1')", "nl2sql explain-sql"),
    ("SELECT nl2sql.evaluate()", "nl2sql evaluate"),
    ("SELECT nl2sql.export_semantic_model()", "nl2sql export-semantic-model"),
]


@pytest.mark.parametrize("sql, names", STUB_HINTS, ids=[s[1] for s in STUB_HINTS])
def test_a_stub_s_hint_names_its_command(scripted, sql, names):
    with psycopg.connect(scripted.dsn) as c:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as e:
            c.execute(sql)
    assert names in e.value.diag.message_hint


def test_doctor_in_sql_names_the_command_in_its_fix(scripted):
    with psycopg.connect(scripted.dsn) as c:
        rows = c.execute('SELECT "check", status, fix FROM nl2sql.doctor()').fetchall()
    assert len(rows) == 1 and rows[0][1] == "fail" and "nl2sql doctor" in rows[0][2], rows


def test_statement_timeout_bounds_the_whole_question(scripted, llm):
    """A model that hangs (timeout 60 s): the connection's statement_timeout of 1.5 s ends the
    question as it ends SELECT nl2sql() in the server (each statement alone is short)."""
    with psycopg.connect(scripted.dsn, autocommit=True) as c:
        add_models(c, llm, ["beside-hang"], timeout_s=60)
        c.execute("UPDATE nl2sql.model SET enabled = (name = 'beside-hang')")
    llm.add_rule(Rule(model="beside-hang", hang=True))
    try:
        with nl2sql.connect(scripted.dsn, options="-c statement_timeout=1500") as client:
            with pytest.raises(nl2sql.ClientError) as e:
                client.ask("How many singers are there?")
        assert e.value.sqlstate == "57014", (str(e.value), e.value.hint, e.value.trace)
        assert "statement timeout" in str(e.value) and "statement_timeout" in e.value.hint
        # nothing of the call was committed: no query-log row
        with psycopg.connect(scripted.dsn) as c:
            n = c.execute(
                "SELECT count(*) FROM nl2sql.query_log WHERE question = 'How many singers are there?'"
            ).fetchone()[0]
        assert n == 0
    finally:
        llm.clear()
