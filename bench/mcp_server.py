#!/usr/bin/env python3
"""``nl2sql-mcp``: a client session's transcript, and what the MCP server adds to a question.

The demo database (``nl2sql_indexer.dev.demo_data``) on a local cluster, a restricted role
``mcp_analyst`` (SELECT on the four demo tables), two models on the scripted loopback server
(``nl2sql_indexer.dev.loopback``: answers are SCRIPTED, not a model's) answering each demo
question with its reference SQL. The ``mcp`` SDK's own client starts ``nl2sql-mcp --dsn ...``
over stdio as that role.

With ``--transcript`` it prints the session as a client sees it: the tools, then calls of
``list_tables``, ``ask``, ``explain``, ``narrate``, ``explain_sql`` and two refused calls, then
the agent door with ``singer.name``'s values withheld (``ask``, ``describe_table``,
``search_values``, ``execute_sql`` run, planned and refused), each request and its result (long
results cut). Then it times the demo questions ``--rounds`` times
each, through the server's ``sql`` tool and directly (``SELECT nl2sql(q)`` on a psycopg
connection as the same role), alternating; one warm-up call each is not counted.

Usage: python bench/mcp_server.py [--rounds 5] [--transcript] [--datadir DIR]
The last line printed is ``RESULT mcp_overhead_ms_p50=<ms> direct_ms_p50=<ms> mcp_ms_p50=<ms>``:
the p50 of (MCP call − direct call) over the questions' rounds, and the two p50 times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from anyio.from_thread import start_blocking_portal
from mcp import Client, StdioServerParameters

import common as C
from nl2sql_indexer.dev.demo_data import DEMO_QUESTIONS, demo_sql
from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule

DB = "nl2sql_bench_mcp"
ROLE = "mcp_analyst"
SCRIPT = Path(sys.executable).parent / "nl2sql-mcp"


def _cut(value: Any, limit: int = 900) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(client_call, portal, name: str, args: dict) -> None:
    print(f"→ tools/call {name} {json.dumps(args, ensure_ascii=False)}")
    r = portal.call(client_call, name, args)
    body = r.structured_content if not r.is_error else r.content[0].text
    print(f"← {'isError: ' if r.is_error else ''}{_cut(body)}\n")


def _agent_transcript(admin, call, portal, q: str) -> None:
    """The agent door: singer.name's values withheld from models, then the same question and
    an agent's own SQL (checked, run, refused), the lookups an agent makes first."""
    admin.execute("SELECT nl2sql.set_value_policy('singer', false, 'name')")
    print("-- a DBA withholds singer.name from models: SELECT nl2sql.set_value_policy(")
    print("--     'singer', false, 'name')\n")
    try:
        _show(call, portal, "ask", {"question": q, "max_rows": 3})
        _show(call, portal, "describe_table", {"table": "singer"})
        _show(call, portal, "search_values", {"text": "france", "k": 3})
        sql = "SELECT country, count(*) AS singers FROM singer GROUP BY country ORDER BY 2 DESC"
        _show(call, portal, "execute_sql", {"sql": sql, "max_rows": 3})
        _show(call, portal, "execute_sql", {"sql": "SELECT * FROM singer", "max_rows": 2})
        _show(call, portal, "execute_sql", {"sql": sql, "dry_run": True})
        _show(call, portal, "execute_sql", {"sql": "SELECT * FROM pg_read_file('/etc/passwd')"})
        _show(call, portal, "execute_sql", {"sql": "COMMIT; DELETE FROM singer"})
    finally:
        admin.execute("SELECT nl2sql.set_value_policy('singer', true, 'name')")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--transcript", action="store_true")
    ap.add_argument("--datadir", type=Path, default=None, help="cluster folder (bench/common.py)")
    args = ap.parse_args(argv)
    cluster = C.start_cluster(args.datadir)
    cluster.create_database(DB, drop=True)
    admin = cluster.connect(DB)
    admin.execute(demo_sql())
    admin.execute("CREATE EXTENSION nl2sql CASCADE")
    admin.execute("SELECT nl2sql.reindex()")
    admin.execute(
        f"DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') "
        f"THEN CREATE ROLE {ROLE} LOGIN; END IF; END$$"
    )
    admin.execute(f"GRANT SELECT ON singer, stadium, concert, singer_in_concert TO {ROLE}")
    llm = LoopbackLLM().start()
    try:
        for i, name in enumerate(["model_a", "model_b"]):
            admin.execute(
                "SELECT nl2sql.add_model(%s, %s, base_url => %s, priority => %s)",
                (name, name, llm.base_url, i),
            )
        for q, sql in DEMO_QUESTIONS:
            llm.add_rule(Rule(question=q, response=sql))
        llm.add_rule(Rule(contains="Answer the question in words", response="Two singers."))
        llm.add_rule(
            Rule(
                contains="Explain in words what this query does",
                response="It counts the singers of each country, most first.",
            )
        )
        dsn = cluster.dsn(DB, ROLE)
        params = StdioServerParameters(command=str(SCRIPT), args=["--dsn", dsn], cwd="/")
        with (
            start_blocking_portal() as portal,
            portal.wrap_async_context_manager(Client(params, read_timeout_seconds=120)) as client,
        ):
            if args.transcript:
                print(f"$ nl2sql-mcp --dsn {dsn!r}   (started by the client over stdio)\n")
                tools = portal.call(client.list_tools).tools
                print("→ tools/list")
                print("← " + ", ".join(t.name for t in tools) + "\n")
                q = DEMO_QUESTIONS[1][0]
                _show(client.call_tool, portal, "list_tables", {})
                _show(client.call_tool, portal, "ask", {"question": q, "max_rows": 3})
                _show(client.call_tool, portal, "explain", {"question": q})
                _show(client.call_tool, portal, "narrate", {"question": q})
                _show(
                    client.call_tool,
                    portal,
                    "explain_sql",
                    {"sql": "SELECT country, count(*) FROM singer GROUP BY 1 ORDER BY 2 DESC"},
                )
                _show(client.call_tool, portal, "ask", {"question": ""})
                _show(client.call_tool, portal, "explain_sql", {"sql": "DELETE FROM singer"})
                _agent_transcript(admin, client.call_tool, portal, q)
            direct = cluster.connect(DB, user=ROLE)
            mcp_ms: list[float] = []
            direct_ms: list[float] = []
            for q, _ in DEMO_QUESTIONS:
                portal.call(client.call_tool, "sql", {"question": q})  # warm-up
                direct.execute("SELECT nl2sql(%s)", (q,))
                for _ in range(args.rounds):
                    t0 = time.perf_counter()
                    r = portal.call(client.call_tool, "sql", {"question": q})
                    mcp_ms.append((time.perf_counter() - t0) * 1000)
                    assert not r.is_error, r.content[0].text
                    t0 = time.perf_counter()
                    direct.execute("SELECT nl2sql(%s)", (q,)).fetchone()
                    direct_ms.append((time.perf_counter() - t0) * 1000)
            direct.close()
    finally:
        llm.stop()
        admin.close()
    over = [m - d for m, d in zip(mcp_ms, direct_ms)]
    print(
        f"{len(mcp_ms)} calls: MCP p50 {statistics.median(mcp_ms):.1f} ms, direct p50 "
        f"{statistics.median(direct_ms):.1f} ms"
    )
    print(
        f"RESULT mcp_overhead_ms_p50={statistics.median(over):.1f} "
        f"direct_ms_p50={statistics.median(direct_ms):.1f} mcp_ms_p50={statistics.median(mcp_ms):.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
