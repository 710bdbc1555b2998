"""``nl2sql-mcp`` without a database: its arguments, the tools' schemas and errors, the compact
trace, the messages (no password). End to end over stdio and HTTP: tests/db/test_mcp.py."""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import time

import anyio
import pytest
from mcp import Client

from conftest import ROOT
from nl2sql_indexer.mcp import build_server, main
from nl2sql_indexer.mcp._database import describe
from nl2sql_indexer.mcp._server import _http_address
from nl2sql_indexer.mcp._tools import MAX_QUESTION_CHARS, ToolFailure, compact_trace, text_arg


@pytest.mark.parametrize(
    "text, ok",
    [
        ("127.0.0.1:8765", ("127.0.0.1", 8765)),
        ("localhost:1", ("localhost", 1)),
        ("[::1]:9000", ("::1", 9000)),
        ("0.0.0.0:8765", None),
        ("10.1.2.3:8765", None),
        ("127.0.0.1:0", None),
        ("127.0.0.1:70000", None),
        ("127.0.0.1", None),
        ("example.org:80", None),
    ],
)
def test_http_listens_on_loopback_only(text, ok):
    if ok is None:
        with pytest.raises(argparse.ArgumentTypeError, match="loopback"):
            _http_address(text)
    else:
        assert _http_address(text) == ok


def test_command_line_needs_a_dsn(capsys):
    with pytest.raises(SystemExit) as e:
        main([])
    assert e.value.code == 2 and "--dsn" in capsys.readouterr().err


def test_text_arguments_are_checked_before_the_database():
    assert text_arg("question", "Q?") == "Q?"
    assert text_arg("evidence", None, required=False) is None
    assert text_arg("evidence", "  ", required=False) is None
    with pytest.raises(ToolFailure, match="the question is empty"):
        text_arg("question", " \n")
    with pytest.raises(ToolFailure, match="20,001 characters"):
        text_arg("question", "x" * (MAX_QUESTION_CHARS + 1))


def test_messages_name_the_database_never_the_password():
    d = describe("host=db.local port=5433 dbname=shop user=analyst password=hunter2")
    assert d == "dbname=shop user=analyst host=db.local port=5433"
    assert "hunter2" not in describe("postgresql://analyst:hunter2@db.local/shop")
    assert describe("not a dsn ===") == "(an unreadable DSN)"


def test_compact_trace_keeps_what_an_agent_reads():
    trace = {
        "question": "Q",
        "sql": "SELECT 1",
        "confidence": 0.5,
        "log_id": 7,
        "rounds": 2,
        "rounds_reason": "model_rounds is two",
        "linked_tables": ["singer"],
        "linking": {"why": {"singer": ["presql"]}},
        "presql": {"prompt": "long prompt"},
        "candidates": [
            {"source": "finsql:m1", "status": "ok", "sql": "SELECT 1", "sample_rows": ["{}"]}
        ],
        "vote": {"method": "majority", "reason": "r", "groups": [{"size": 2, "sql": "S"}]},
        "timings": {"total_ms": 12.5},
    }
    out = compact_trace(trace)
    assert out["candidates"] == [{"source": "finsql:m1", "status": "ok", "sql": "SELECT 1"}]
    assert out["vote"]["groups"] == [{"size": 2, "confidence": None, "sources": None, "sql": "S"}]
    assert out["linked_why"] == {"singer": ["presql"]} and out["total_ms"] == 12.5
    assert out["rounds"] == 2 and out["rounds_reason"] == "model_rounds is two"
    assert "presql" not in out and "error" not in out
    assert compact_trace(None)["candidates"] == []


def test_tools_refuse_unknown_arguments_and_report_an_unreachable_database():
    server = build_server("host=127.0.0.1 port=1 dbname=x connect_timeout=2")

    async def run():
        async with Client(server) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            bad = await c.call_tool("sql", {"question": "Q", "colour": "blue"})
            down = await c.call_tool("list_tables", {})
            empty = await c.call_tool("sql", {"question": ""})
            return names, bad, down, empty

    names, bad, down, empty = anyio.run(run)
    assert "ask" in names and "explain_sql" in names
    assert bad.is_error and "takes no argument colour" in bad.content[0].text
    assert down.is_error and "cannot connect to the database" in down.content[0].text
    assert empty.is_error and "the question is empty" in empty.content[0].text


def _stdio_server() -> subprocess.Popen:
    """``nl2sql-mcp`` of this checkout over stdio, its database unreachable (no tool needs it
    before its arguments are checked)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'indexer'}:{ROOT / 'py_udf'}"}
    return subprocess.Popen(
        [sys.executable, "-m", "nl2sql_indexer.mcp", "--dsn", "host=127.0.0.1 port=1 dbname=x"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def _exchange(proc: subprocess.Popen, line: str, wait_s: float = 20.0) -> dict | None:
    """Send one JSON-RPC line; the reply, or None when none came within ``wait_s``."""
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    ready, _, _ = select.select([proc.stdout], [], [], wait_s)
    return json.loads(proc.stdout.readline()) if ready else None


def _call(i: int, arguments: str) -> str:
    return (
        f'{{"jsonrpc": "2.0", "id": {i}, "method": "tools/call", '
        f'"params": {{"name": "sql", "arguments": {arguments}}}}}'
    )


def test_arguments_that_explode_cost_nothing_and_the_server_keeps_serving():
    proc = _stdio_server()
    try:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        }
        assert "result" in _exchange(proc, json.dumps(init))
        proc.stdin.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        nested = "[" * 100 + "]" * 100
        wide = json.dumps({"a": [[]] * 100_000, "b": [{"c": "x" * 1000}] * 1000})
        for i, args, says in [
            (1, f'{{"question": {nested}}}', "question\n  Input should be a valid string"),
            (2, f'{{"question": "Q", "evidence": {wide}}}', "evidence\n  Input should be"),
            (3, '{"question": {"$ref": "#"}}', "Input should be a valid string"),
        ]:
            t0 = time.monotonic()
            reply = _exchange(proc, _call(i, args))
            assert reply["id"] == i and reply["result"]["isError"], reply
            assert says in reply["result"]["content"][0]["text"]
            assert time.monotonic() - t0 < 10
        # nested past the SDK's JSON depth limit: dropped unparsed (no id to answer)
        deep = "[" * 100_000 + "]" * 100_000
        assert _exchange(proc, _call(4, f'{{"question": {deep}}}'), wait_s=3) is None
        tools = _exchange(proc, '{"jsonrpc": "2.0", "id": 5, "method": "tools/list"}')
        assert tools["id"] == 5 and any(t["name"] == "sql" for t in tools["result"]["tools"])
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(10)
