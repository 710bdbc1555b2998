"""``nl2sql-mcp`` without a database: its arguments, the tools' schemas and errors, the compact
trace, the messages (no password). End to end over stdio and HTTP: tests/db/test_mcp.py."""

from __future__ import annotations

import argparse

import anyio
import pytest
from mcp import Client

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
