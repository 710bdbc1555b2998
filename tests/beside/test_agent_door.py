"""The agent door (issue 41): every nl2sql-mcp tool called through the official MCP SDK's client
as a restricted role — a column whose values the DBA withholds (``set_value_policy``), a table
with row-level security, a table it may not read — in both modes: the extension (the tools call
its PL/Python functions) and nl2sql installed beside the database (the tools run the pipeline
in the server's process). What the agent receives passes the role's value rules; its own SQL
runs as a candidate does; the bypasses published against other database MCP servers are
refused, the database unchanged and no lock left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

import nl2sql
from conftest import ROOT, add_models
from conftest import mcp_session as session
from conftest import mcp_stdio as stdio
from nl2sql_indexer.dev.demo_data import demo_sql
from nl2sql_indexer.dev.loopback import Rule

from .conftest import OWNER, make_db, nl2sql_admin

AGENT = "nl2sql_agent_door"
SECRET = "SALARY-SECRET-9917"
HIDDEN = "HIDDEN-MEMO-4471"
Q = "What are the names and ages of all singers from France?"
Q_STAR = "Show everything about the singers from France"
TABLES = f"""
CREATE TABLE salary (salary_id int PRIMARY KEY, employee text, amount text);
INSERT INTO salary VALUES (1, 'Zed Quorum', '{SECRET}');
CREATE TABLE ledger (id int PRIMARY KEY, owner name, memo text);
COMMENT ON TABLE ledger IS 'Ledger entries, each visible to its owner only';
INSERT INTO ledger VALUES (1, '{AGENT}', 'visible-memo'), (2, 'someone_else', '{HIDDEN}');
ALTER TABLE ledger ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON ledger USING (owner = current_user);
GRANT SELECT ON singer, stadium, concert, singer_in_concert, ledger TO {AGENT};
"""
ROLE_SQL = (
    f"DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{AGENT}') "
    f"THEN CREATE ROLE {AGENT} LOGIN; END IF; END$$"
)


@dataclass
class Door:
    """One mode's database: the owner's connection, the agent's MCP session, the names."""

    mode: str
    owner: psycopg.Connection
    agent: Any  # conftest.McpSession
    names: set[str]  # singer names: withheld from every model
    dsn: str  # the agent role's


def _prepare(owner: psycopg.Connection) -> set[str]:
    owner.execute(TABLES)
    owner.execute("SELECT nl2sql.set_value_policy('singer', false, 'name')")
    owner.execute("SELECT nl2sql.set_value_policy('ledger', true)")
    return {r[0] for r in owner.execute("SELECT name FROM singer")}


def _verify(owner: psycopg.Connection) -> None:
    """A verified query whose literal is a withheld column's value (after the index exists)."""
    first = owner.execute("SELECT name FROM singer ORDER BY singer_id LIMIT 1").fetchone()[0]
    owner.execute(
        "SELECT nl2sql.add_verified_query(%s, %s)",
        (f"How old is {first}?", f"SELECT age FROM singer WHERE name = '{first}'"),
    )


@contextmanager
def _extension_door(cluster):
    name = "nl2sql_agent_door_ext"
    cluster.create_database(name, drop=True)
    with cluster.connect() as su:
        su.execute(ROLE_SQL)
    owner = cluster.connect(name)
    owner.execute(demo_sql())
    owner.execute("CREATE EXTENSION nl2sql CASCADE")
    names = _prepare(owner)
    owner.execute("SELECT nl2sql.reindex()")
    _verify(owner)
    with session(stdio(cluster.dsn(name, AGENT))) as agent:
        yield Door("extension", owner, agent, names, cluster.dsn(name, AGENT))
    owner.close()


@contextmanager
def _beside_door(cluster):
    with cluster.connect() as su:
        su.execute(ROLE_SQL)
        if not su.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (OWNER,)).fetchone():
            su.execute(f"CREATE ROLE {OWNER} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
    db = make_db(cluster, OWNER)
    r = nl2sql_admin("install", "--dsn", db.dsn)
    assert r.returncode == 0, r.stderr
    owner = psycopg.connect(db.dsn, autocommit=True)
    owner.execute(demo_sql())
    names = _prepare(owner)
    with nl2sql.connect(db.dsn) as client:
        assert client.reindex()["tables_indexed"] >= 5
        _verify(owner)  # deferred beside the database: applied here, embedded
        assert [a.status for a in client.apply()] == ["done"]
    with session(stdio(cluster.dsn(db.name, AGENT))) as agent:
        yield Door("beside", owner, agent, names, cluster.dsn(db.name, AGENT))
    owner.close()


@pytest.fixture(scope="module", params=["extension", "beside"])
def door(request, cluster, llm):
    make = _extension_door if request.param == "extension" else _beside_door
    with make(cluster) as d:
        yield d


@pytest.fixture
def models(door, llm):
    llm.clear()
    llm.set_default(None)
    door.owner.execute("DELETE FROM nl2sql.model")
    add_models(door.owner, llm, ["m1", "m2"])
    llm.add_rule(Rule(question=Q, response="SELECT name, age FROM singer WHERE country = 'France'"))
    llm.add_rule(Rule(question=Q_STAR, response="SELECT * FROM singer WHERE country = 'France'"))
    llm.add_rule(Rule(contains="Answer the question in words", response="Seven singers."))
    llm.add_rule(Rule(contains="Explain in words what this query does", response="Ages."))
    yield llm


def _clean(door: Door, out: Any) -> None:
    """Nothing withheld in ``out``: no singer name, no salary, no other owner's ledger row."""
    text = json.dumps(out)
    assert SECRET not in text and HIDDEN not in text, text[:2000]
    leaked = sorted(n for n in door.names if n in text)
    where = [text[max(0, text.index(n) - 600) : text.index(n) + 100] for n in leaked]
    assert not leaked, (leaked, where)


# ---- what the agent receives: (tool, arguments, check of the structured result) ----------------


def _rows_without_name(out):
    assert out["rows"] and all("name" not in r and "age" in r for r in out["rows"])
    assert out["withheld_columns"] == ["name"] and "data_notice" in out


def _star_without_name(out):
    assert out["rows"] and all("name" not in r and "country" in r for r in out["rows"])
    assert out["withheld_columns"] == ["name"]


def _no_rows(out):
    assert out["rows"] == [] and "rows_withheld" in out


def _count_shown(out):
    assert out["rows"][0]["n"] > 0 and out["withheld_columns"] == []


def _own_ledger_rows(out):
    assert [r["memo"] for r in out["rows"]] == ["visible-memo"]


def _singer_described(out):
    cols = {c["name"]: c for c in out["columns"]}
    assert cols["name"]["values_withheld"] is True and cols["name"]["sample_values"] == []
    assert cols["country"]["sample_values"] and not cols["country"]["values_withheld"]
    assert any(fk["to"] == "singer" for fk in out["foreign_keys"])


def _no_match(out):
    assert out["matches"] == []


def _country_match(out):
    assert ("singer", "country") in {(m["table"], m["column"]) for m in out["matches"]}


def _ledger_match(out):
    assert [(m["table"], m["value"]) for m in out["matches"]] == [("ledger", "visible-memo")]


def _plan_only(out):
    assert out["dry_run"] is True and out["plan_cost"] > 0 and "rows" not in out


def _no_salary(out):
    assert "salary" not in {t["table"] for t in out["tables"]}
    assert "ledger" in {t["table"] for t in out["tables"]}


def _explained(out):
    assert out["sql"].startswith("SELECT name, age") and out["candidates"]


def _retrieved(out):
    assert "singer" in out["presql_tables"]


def _curated(out):
    assert set(out["semantic_model"]) == {"objects", "relationships"}
    (v,) = [v for v in out["verified_queries"] if "FROM singer WHERE name" in v["sql"]]
    assert "'value'" in v["sql"]  # its literal is a withheld column's value


def _narrated(out):
    assert out["answer"] == "Seven singers." and "data_notice" in out


RECEIVED = [
    ("ask", {"question": Q}, _rows_without_name),
    ("ask", {"question": Q_STAR}, _star_without_name),
    ("execute_sql", {"sql": "SELECT name, age FROM singer"}, _rows_without_name),
    ("execute_sql", {"sql": "SELECT * FROM singer WHERE country = 'France'"}, _star_without_name),
    ("execute_sql", {"sql": "SELECT string_agg(name, ', ') AS all_names FROM singer"},
     lambda o: o["rows"] == [{}] or _no_rows(o)),
    ("execute_sql", {"sql": "SELECT upper(name) AS n, age FROM singer"},
     lambda o: o["withheld_columns"] == ["n"]),
    ("execute_sql", {"sql": "SELECT s FROM singer s"}, lambda o: o["withheld_columns"] == ["s"]),
    ("execute_sql", {"sql": "WITH x AS (SELECT name FROM singer) SELECT * FROM x"}, _no_rows),
    ("execute_sql", {"sql": "SELECT n FROM (SELECT name AS n FROM singer) d"}, _no_rows),
    ("execute_sql", {"sql": "SELECT count(*) AS n FROM singer"}, _count_shown),
    ("execute_sql", {"sql": "SELECT memo FROM ledger ORDER BY id"}, _own_ledger_rows),
    ("execute_sql", {"sql": "SELECT age FROM singer", "dry_run": True}, _plan_only),
    ("sql", {"question": Q}, lambda o: o["sql"].startswith("SELECT name, age")),
    ("explain", {"question": Q}, _explained),
    ("explain_sql", {"sql": "SELECT name, age FROM singer"}, lambda o: o["explanation"] == "Ages."),
    ("retrieve", {"question": Q}, _retrieved),
    ("narrate", {"question": Q}, _narrated),
    ("list_tables", {}, _no_salary),
    ("describe_table", {"table": "singer"}, _singer_described),
    ("semantic_context", {"question": "How old is the singer called Bo?"}, _curated),
    ("search_values", {"text": "France"}, _country_match),
    ("search_values", {"text": "visible-memo"}, _ledger_match),
    ("search_values", {"text": HIDDEN}, _no_match),
    ("search_values", {"text": SECRET}, _no_match),
]  # fmt: skip


@pytest.mark.parametrize(
    "tool,args,check", RECEIVED, ids=[f"{c[0]}-{i}" for i, c in enumerate(RECEIVED)]
)
def test_what_the_agent_receives_passes_the_value_rules(door, models, tool, args, check):
    out = door.agent.ok(tool, args)
    # a check asserts inside (returns None) or returns whether it holds (the lambdas)
    assert check(out) is not False, (tool, args, out)
    _clean(door, out)


def test_a_withheld_column_is_never_searched_and_errors_quote_no_value(door, models):
    for name in sorted(door.names)[:3]:
        assert door.agent.ok("search_values", {"text": name})["matches"] == []
    err = door.agent.error("execute_sql", {"sql": "SELECT CAST(name AS integer) FROM singer"})
    assert "execute_sql error" in err and "invalid input syntax" in err and "withheld" in err
    _clean(door, err)
    assert "no indexed table 'salary'" in door.agent.error("describe_table", {"table": "salary"})
    log_id = door.agent.ok("sql", {"question": Q})["log_id"]  # feedback is administrative
    assert "permission denied" in door.agent.error("feedback", {"log_id": log_id, "correct": True})


def test_the_settings_that_open_and_close_the_door(door, models):
    door.owner.execute("SELECT nl2sql.set_setting('agent_values', 'role')")
    try:
        sql = "SELECT name FROM singer ORDER BY name"
        out = door.agent.ok("execute_sql", {"sql": sql, "max_rows": 1000})
        assert {r["name"] for r in out["rows"]} == door.names  # all the role may read
    finally:
        door.owner.execute("SELECT nl2sql.reset_setting('agent_values')")
    door.owner.execute("SELECT nl2sql.set_setting('send_values', 'off')")
    try:
        out = door.agent.ok("execute_sql", {"sql": "SELECT age FROM singer"})
        assert out["rows"] == [] and "send_values is off" in out["rows_withheld"]
        assert out["row_count"] > 0
    finally:
        door.owner.execute("SELECT nl2sql.reset_setting('send_values')")


def test_the_python_api_and_the_cli_give_a_model_the_same_view(door, models):
    # beside the database the pipeline runs in the client; with the extension, its functions
    with nl2sql.connect(door.dsn, for_model=True) as client:
        answer = client.ask(Q)
        assert answer.columns == ["age"] and answer.rows
        assert answer.trace["agent_view"]["withheld_columns"] == ["name"]
        assert client.execute_sql("SELECT name, age FROM singer")["withheld_columns"] == ["name"]
        _clean(door, [answer.rows, answer.sql])
    with nl2sql.connect(door.dsn) as client:  # a person reads: all the role may SELECT
        assert client.ask(Q).columns == ["name", "age"]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py_udf"))
    cli = [sys.executable, "-m", "nl2sql.client.cli", "execute-sql", "--dsn", door.dsn]
    sql = "SELECT name, age FROM singer"
    out = subprocess.run([*cli, "--for-model", sql], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["withheld_columns"] == ["name"]
    refused = subprocess.run([*cli, "SELECT pg_sleep(1)"], capture_output=True, text=True, env=env)
    assert refused.returncode == 1 and json.loads(refused.stdout)["status"] == "refused"


def test_the_sql_functions_take_null_for_their_defaults(door, models):
    if door.mode != "extension":
        pytest.skip("beside the database these functions' bodies run in the client")
    with psycopg.connect(door.dsn, autocommit=True) as c:
        out = c.execute(
            "SELECT nl2sql.execute_sql('SELECT count(*) AS n FROM singer', NULL, NULL, NULL)"
        ).fetchone()[0]
        assert out["status"] == "ok" and out["rows"][0]["n"] > 0 and "data_notice" not in out
        found = c.execute("SELECT nl2sql.search_values('France', NULL)").fetchone()[0]
        assert found["matches"][0]["value"] == "France"
        with pytest.raises(psycopg.Error, match="max_rows must be between"):
            c.execute("SELECT nl2sql.execute_sql('SELECT 1', 0)")


def test_the_tools_declare_their_output(door):
    tools = {t.name: t for t in door.agent.tools()}
    for name, key in [("execute_sql", "withheld_columns"), ("ask", "data_notice"),
                      ("search_values", "matches"), ("describe_table", "foreign_keys")]:  # fmt: skip
        assert key in tools[name].output_schema["properties"], name


# ---- the agent's own SQL: the bypasses published against database MCP servers ------------------

BYPASSES = [
    "SELECT pg_read_file('/etc/passwd')",
    "SELECT * FROM pg_read_file('/etc/passwd') AS f(line)",  # postgres-mcp #178: FROM
    "SELECT * FROM pg_ls_dir('.') AS d(name)",
    "SELECT * FROM dblink('dbname=postgres', 'SELECT 1') AS t(a int)",
    "WITH gone AS (DELETE FROM singer RETURNING *) SELECT count(*) FROM gone",
    "COMMIT; DELETE FROM singer",  # the reference server: COMMIT escaped read-only
    "SELECT 1; COMMIT; DROP TABLE concert",
    "ROLLBACK; SELECT 1",
    "SELECT * INTO stolen FROM singer",
    "SELECT set_config('default_transaction_read_only', 'off', false)",
    "SET ROLE postgres",
    "SET SESSION AUTHORIZATION postgres",
    "SELECT lo_export(1, '/tmp/nl2sql-agent-door')",
    "COPY singer TO PROGRAM 'id'",
    "SELECT pg_sleep(30)",
    "SELECT pg_advisory_lock(4242)",
    "SELECT pg_try_advisory_lock(4243), count(*) FROM singer",
    "SELECT * FROM singer FOR UPDATE",
    "SELECT age FROM singer; SELECT 2",
    "DELETE FROM singer",
    "UPDATE singer SET age = 0",
    "SELECT nextval('nl2sql.query_log_id_seq')",
    "SELECT txid_current()",
    "SELECT * FROM salary",
    "SELECT amount FROM public.salary",
    "CREATE TABLE planted (x int)",
    "SELECT * FROM generate_series(1, 100000000) g, singer",  # over the plan limits or time
]


@pytest.mark.parametrize("sql", BYPASSES)
def test_a_bypass_is_refused_and_changes_nothing(door, models, sql):
    before = door.owner.execute("SELECT count(*), sum(age) FROM singer").fetchone()
    door.owner.execute("SELECT nl2sql.set_setting('candidate_timeout_ms', '3000')")
    try:
        err = door.agent.error("execute_sql", {"sql": sql})
    finally:
        door.owner.execute("SELECT nl2sql.reset_setting('candidate_timeout_ms')")
    assert "nl2sql-mcp: execute_sql " in err and "hint:" in err, err
    assert SECRET not in err
    assert door.owner.execute("SELECT count(*), sum(age) FROM singer").fetchone() == before
    assert door.owner.execute(
        "SELECT to_regclass('stolen'), to_regclass('planted'), to_regclass('concert') IS NOT NULL"
    ).fetchone() == (None, None, True)
    locks = door.owner.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
    assert locks.fetchone()[0] == 0
    logged = door.owner.execute(
        "SELECT trace->>'status', error FROM nl2sql.query_log "
        "WHERE trace->>'source' = 'agent' AND role_name = %s ORDER BY id DESC LIMIT 1",
        (AGENT,),
    ).fetchone()
    assert logged is not None and logged[0] in ("refused", "error", "timeout") and logged[1]
