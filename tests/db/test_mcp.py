"""``nl2sql-mcp`` end to end: the installed console script started by the ``mcp`` SDK's own client
over stdio (and once over streamable HTTP), as a restricted role that must not see a protected
table, every tool called against a test cluster whose models are the scripted loopback server;
bad input (empty and 10 MB questions, an unknown argument, a database that is down or lacks the
extension, a connection lost mid-session): clear MCP tool errors, and the server keeps serving."""

from __future__ import annotations

import base64
import json
import subprocess
import time

import pytest

from conftest import MCP_SCRIPT as SCRIPT
from conftest import add_models
from conftest import mcp_session as session
from conftest import mcp_stdio as stdio
from nl2sql_indexer.cluster import free_port
from nl2sql_indexer.dev.demo_data import demo_sql
from nl2sql_indexer.dev.loopback import Rule

MCP_DB = "nl2sql_mcp"
BARE_DB = "nl2sql_mcp_bare"
ROLE = "nl2sql_mcp_analyst"
SECRET = "SALARY-SECRET-9917"
TOOLS = {
    "ask", "sql", "explain", "narrate", "chart", "retrieve", "explain_sql", "list_tables", "feedback",
    "describe_table", "search_values", "execute_sql", "semantic_context",
}  # fmt: skip
Q = "What are the names and ages of the singers from France?"
SQL = "SELECT name, age FROM singer WHERE country = 'France' ORDER BY name"
NARRATED = "Two singers are from France."
EXPLAINED = "It lists the French singers and their ages."

EXTRA_SQL = f"""
CREATE TABLE salary (salary_id int PRIMARY KEY, employee text, amount text);
COMMENT ON TABLE salary IS 'Protected: salaries';
INSERT INTO salary VALUES (1, 'Zed Quorum', '{SECRET}');
DO $$BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
        CREATE ROLE {ROLE} LOGIN;
    END IF;
END$$;
GRANT SELECT ON singer, stadium, concert, singer_in_concert TO {ROLE};
"""


@pytest.fixture(scope="module")
def mcp_admin(cluster):
    """Superuser connection to the MCP test database (demo tables, a protected table)."""
    cluster.create_database(MCP_DB, drop=True)
    cluster.create_database(BARE_DB, drop=True)
    conn = cluster.connect(MCP_DB)
    conn.execute(demo_sql())
    conn.execute(EXTRA_SQL)
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    conn.execute("SELECT nl2sql.reindex()")
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def analyst(cluster, mcp_admin):
    """One nl2sql-mcp over stdio as the restricted role, for the whole module."""
    with session(stdio(cluster.dsn(MCP_DB, ROLE))) as s:
        yield s


@pytest.fixture
def models(mcp_admin, llm):
    llm.clear()
    llm.set_default(None)
    mcp_admin.execute("DELETE FROM nl2sql.model")
    add_models(mcp_admin, llm, ["m1", "m2"])
    llm.add_rule(Rule(question=Q, response=SQL))
    llm.add_rule(Rule(contains="Answer the question in words", response=NARRATED))
    llm.add_rule(Rule(contains="Explain in words what this query does", response=EXPLAINED))
    yield llm


def test_lists_the_tools_with_closed_input_schemas(analyst):
    tools = {t.name: t for t in analyst.tools()}
    assert set(tools) == TOOLS
    for t in tools.values():
        assert t.description and t.input_schema["additionalProperties"] is False, t.name
    assert tools["ask"].input_schema["required"] == ["question"]
    # every tool but feedback only reads (the query log is an audit record, not the user's data)
    for name, t in tools.items():
        assert t.annotations.read_only_hint is (name != "feedback"), name
        assert t.annotations.destructive_hint is False, name


def test_list_tables_shows_what_the_role_may_read(analyst):
    tables = analyst.ok("list_tables")["tables"]
    names = {t["table"] for t in tables}
    assert names == {"singer", "stadium", "concert", "singer_in_concert"}
    singer = next(t for t in tables if t["table"] == "singer")
    assert singer["comment"].startswith("Singers who perform")
    assert {"name": "country", "type": "text"}.items() <= singer["columns"][2].items()
    assert analyst.ok("list_tables", {"schema": "nowhere"})["tables"] == []
    compact = analyst.ok("list_tables", {"name": "SING", "compact": True})
    assert {t["table"] for t in compact["tables"]} == {"singer", "singer_in_concert"}
    assert "country" in compact["tables"][0]["columns"] and compact["count"] == 2


def test_ask_returns_the_chosen_sql_and_its_rows_capped(analyst, models, mcp_admin):
    out = analyst.ok("ask", {"question": Q})
    assert out["sql"] == SQL and out["truncated"] is False
    expected = [dict(zip(("name", "age"), r)) for r in mcp_admin.execute(SQL).fetchall()]
    assert out["rows"] == expected and out["row_count"] == len(expected) >= 2
    assert out["confidence"] == 1.0
    row = mcp_admin.execute(
        "SELECT role_name, question, sql, conversation FROM nl2sql.query_log WHERE id = %s",
        (out["log_id"],),
    ).fetchone()
    assert row == (ROLE, Q, SQL, None)  # logged as the role; the one-off key forgotten
    capped = analyst.ok("ask", {"question": Q, "max_rows": 1})
    assert capped["row_count"] == 1 and capped["truncated"] is True
    assert "max_rows must be between 1 and 1000" in analyst.error(
        "ask", {"question": Q, "max_rows": 0}
    )


def test_sql_explain_narrate_retrieve_and_explain_sql(analyst, models, mcp_admin):
    out = analyst.ok("sql", {"question": Q})
    assert out["sql"] == SQL and out["log_id"]
    trace = analyst.ok("explain", {"question": Q})
    assert trace["sql"] == SQL and trace["confidence"] == 1.0
    # the default (model_rounds auto) answers in one round on the small demo schema
    assert trace["rounds"] == 1 and "fits prompt_token_budget" in trace["rounds_reason"]
    assert "linked_tables" not in trace
    mcp_admin.execute("SELECT nl2sql.set_setting('model_rounds', 'two')")
    try:
        two = analyst.ok("explain", {"question": Q})
    finally:
        mcp_admin.execute("SELECT nl2sql.reset_setting('model_rounds')")
    assert two["rounds"] == 2 and two["sql"] == SQL
    assert "singer" in two["linked_tables"] and two["linked_why"]["singer"]
    assert {c["source"].split("#")[0] for c in trace["candidates"]} >= {
        "finsql:m1",
        "finsql:m2",
    }
    assert all(c["status"] == "ok" for c in trace["candidates"] if c["source"] != "presql:m1")
    assert trace["vote"]["groups"][0]["size"] >= 2 and '"prompt' not in json.dumps(trace)
    said = analyst.ok("narrate", {"question": Q})
    assert (said["answer"], said["sql"], said["log_id"] > 0) == (NARRATED, SQL, True)
    found = analyst.ok("retrieve", {"question": Q})
    assert found["question"] == Q and "singer" in found["presql_tables"]
    assert analyst.ok("explain_sql", {"sql": SQL}) == {"explanation": EXPLAINED}


BY_COUNTRY = "How many singers come from each country?"
BY_COUNTRY_SQL = "SELECT country, count(*) AS singers FROM singer GROUP BY country"


def test_chart_returns_a_png_and_the_spec_without_withheld_values(analyst, models, mcp_admin):
    models.add_rule(Rule(question=BY_COUNTRY, response=BY_COUNTRY_SQL))
    r = analyst.call("chart", {"question": BY_COUNTRY})
    assert not r.is_error and [c.type for c in r.content] == ["image", "text"]
    png = base64.b64decode(r.content[0].data)
    assert r.content[0].mime_type == "image/png" and png[:8] == b"\x89PNG\r\n\x1a\n"
    spec = json.loads(r.content[1].text)
    meta = spec["usermeta"]
    assert meta["chart"] == "bar" and spec["encoding"]["x"]["field"] == "country"
    assert meta["sql"].lower() == BY_COUNTRY_SQL.lower()  # the pipeline writes COUNT
    assert {v["country"] for v in spec["data"]["values"]} >= {"France"} and meta["log_id"] > 0
    mcp_admin.execute("SELECT nl2sql.set_value_policy('singer', false, 'country')")
    try:
        held = analyst.call("chart", {"question": BY_COUNTRY})
    finally:
        mcp_admin.execute("SELECT nl2sql.set_value_policy('singer', true, 'country')")
    spec = json.loads(held.content[1].text)
    assert spec["usermeta"]["chart"] == "none" and "France" not in held.content[1].text
    assert spec["usermeta"]["withheld_columns"] == ["country"] and held.content[0].type == "image"


def test_a_conversation_key_makes_follow_ups(analyst, models, mcp_admin):
    key = "mcp-test-conversation"
    first = analyst.ok("sql", {"question": Q, "conversation": key})
    turns = mcp_admin.execute(
        "SELECT id FROM nl2sql.query_log WHERE conversation = %s", (key,)
    ).fetchall()
    assert [t[0] for t in turns] == [first["log_id"]]  # a key given by the client is kept


def test_the_restricted_role_never_sees_the_protected_table(analyst, models, mcp_admin):
    assert mcp_admin.execute("SELECT amount FROM salary").fetchone()[0] == SECRET
    q = "What does Zed Quorum earn?"
    models.add_rule(Rule(question=q, response="SELECT amount FROM salary"))
    err = analyst.error("ask", {"question": q})
    assert "no candidate executed" in err and SECRET not in err
    trace = analyst.ok("explain", {"question": q})
    assert trace.get("sql") is None and SECRET not in json.dumps(trace)
    assert "salary" not in json.dumps(analyst.ok("list_tables"))
    refused = analyst.error("explain_sql", {"sql": "SELECT amount FROM salary"})
    assert "refused" in refused and "unknown relation" in refused
    sent = json.dumps(models.requests)
    assert SECRET not in sent and "CREATE TABLE salary" not in sent
    assert "permission denied for function feedback" in analyst.error(
        "feedback", {"log_id": trace["log_id"], "correct": True}
    )


def test_bad_input_gets_clear_errors_and_the_server_keeps_serving(analyst, models):
    assert "the question is empty" in analyst.error("ask", {"question": "   "})
    assert "the question is empty" in analyst.error("sql", {"question": ""})
    err = analyst.error("ask", {"question": Q, "colour": "blue"})
    assert "takes no argument colour" in err and "question" in err
    err = analyst.error("ask", {})
    assert "question" in err  # a missing argument: the SDK's validation names it
    huge = "x" * (10 * 1024 * 1024)
    t0 = time.monotonic()
    err = analyst.error("ask", {"question": huge})
    assert "10,485,760 characters" in err and "at most 20,000" in err
    assert time.monotonic() - t0 < 60
    assert "the sql has" in analyst.error("explain_sql", {"sql": "SELECT " + huge})
    assert analyst.error("no_such_tool").startswith("Unknown tool")
    # the database's own refusals come back in words (question_max_chars is 4,000)
    assert "question_max_chars" in analyst.error("sql", {"question": "y" * 5000})
    assert analyst.ok("sql", {"question": Q})["sql"] == SQL


def test_a_lost_connection_is_reported_and_the_next_call_reconnects(analyst, models, mcp_admin):
    assert analyst.ok("list_tables")["tables"]
    killed = mcp_admin.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name = 'nl2sql-mcp' AND usename = %s",
        (ROLE,),
    ).fetchone()[0]
    assert killed == 1
    err = analyst.error("list_tables")
    assert "connection to the database" in err and "was lost" in err
    assert analyst.ok("sql", {"question": Q})["sql"] == SQL


def test_a_database_that_is_down_or_lacks_the_extension(cluster, mcp_admin):
    down = f"host=127.0.0.1 port={free_port()} dbname=x user={ROLE} password=hunter2"
    with session(stdio(down)) as s:
        assert {t.name for t in s.tools()} == TOOLS
        for _ in range(2):
            err = s.error("ask", {"question": Q})
            assert "cannot connect to the database" in err and "keeps running" in err
            assert "hunter2" not in err and "port=" in err
    with session(stdio(cluster.dsn(BARE_DB, "postgres"))) as s:
        err = s.error("list_tables")
        assert "CREATE EXTENSION nl2sql" in err and BARE_DB in err
        assert "CREATE EXTENSION nl2sql" in s.error("sql", {"question": Q})


def test_feedback_as_a_role_allowed_to_give_it(cluster, models, mcp_admin):
    with session(stdio(cluster.dsn(MCP_DB, "postgres"))) as s:
        out = s.ok("sql", {"question": Q})
        example = s.ok("feedback", {"log_id": out["log_id"], "correct": True})["example_id"]
        assert mcp_admin.execute(
            "SELECT sql FROM nl2sql.example WHERE id = %s", (example,)
        ).fetchone() == (SQL,)
        assert "no query_log row with id 987654321" in s.error(
            "feedback", {"log_id": 987654321, "correct": True}
        )


def test_streamable_http_transport(cluster, models, mcp_admin):
    port = free_port()
    proc = subprocess.Popen(
        [str(SCRIPT), "--dsn", cluster.dsn(MCP_DB, ROLE), "--http", f"127.0.0.1:{port}"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert "serving http://127.0.0.1" in proc.stderr.readline()
        time.sleep(0.5)
        with session(f"http://127.0.0.1:{port}/mcp") as s:
            assert {t.name for t in s.tools()} == TOOLS
            assert s.ok("sql", {"question": Q})["sql"] == SQL
            assert "the question is empty" in s.error("sql", {"question": " "})
    finally:
        proc.terminate()
        proc.wait(10)
    bad = subprocess.run(
        [str(SCRIPT), "--dsn", "dbname=x", "--http", "0.0.0.0:8765"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "loopback" in bad.stderr
