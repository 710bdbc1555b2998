"""The failed call's log row relay (nl2sql.embedding.query_log_relay) without a server: the
socket read from postmaster.pid, the posted row's checks and its usage (the failed call's
question and tokens), the backend's fallbacks (not in use,
no process, a process that never answers) and the hint that names the row or says why there is
none. tests/db/test_failed_call_log.py writes rows through a real server."""

from __future__ import annotations

import json
import socket
import time

import pytest

from nl2sql.core.errors import LogNotKept, LogRowInvalid
from nl2sql.core.query_log import failed_hint
from nl2sql.embedding import client as embed_client
from nl2sql.embedding import query_log_relay as relay
from nl2sql.embedding._unix_http import UnixClient
from nl2sql.model import quota

PID_FILE = "4242\n/var/lib/postgresql/16/main\n1700000000\n{port}\n{sock}\n{listen}\n  1 2\nready\n"


@pytest.mark.parametrize(
    ("sock", "port", "want"),
    [
        ("/var/run/postgresql", "5432", ("/var/run/postgresql", 5432)),
        ("/tmp/x/data", "61234", ("/tmp/x/data", 61234)),
        ("@abstract", "5433", ("@abstract", 5433)),
        ("sockets", "5432", ("sockets", 5432)),  # relative: the writer joins the data directory
    ],
)
def test_server_socket_reads_postmaster_pid(sock, port, want):
    assert relay.server_socket(PID_FILE.format(port=port, sock=sock, listen="*")) == want


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (PID_FILE.format(port="5432", sock="", listen="127.0.0.1"), "no Unix socket"),
        ("4242\n/data\n", "names no port"),
        ("4242\n/data\n1\nnot-a-port\n/tmp\n", "names no port"),
    ],
)
def test_server_socket_refuses_no_socket_or_no_port(text, match):
    with pytest.raises(LogNotKept, match=match):
        relay.server_socket(text)


def _row(**changes):
    row = {
        "db": "shop",
        "role_name": "analyst",
        "question": "how many orders?",
        "sql": None,
        "confidence": None,
        "error": "nl2sql: no candidate executed",
        "trace": json.dumps({"question": "how many orders?", "usage": {"total": 120}}),
        "conversation": None,
    }
    row.update(changes)
    return row


def test_row_values_in_insert_order():
    db, values = relay.row_values(_row(confidence=0.5, conversation="c1"))
    assert db == "shop"
    assert values == [
        "analyst",
        "how many orders?",
        None,
        0.5,
        "nl2sql: no candidate executed",
        _row()["trace"],
        "c1",
    ]


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"db": ""}, "db"),
        ({"db": None}, "db"),
        ({"role_name": 7}, "role_name"),
        ({"question": None}, "question"),
        ({"trace": None}, "trace"),
        ({"trace": "[1, 2]"}, "JSON object"),
        ({"trace": "not json"}, "Expecting value"),
        ({"sql": 1}, "sql"),
        ({"error": ["x"]}, "error"),
        ({"conversation": {}}, "conversation"),
        ({"confidence": "high"}, "confidence"),
        ({"confidence": True}, "confidence"),
    ],
)
def test_row_values_refuses_bad_rows(changes, match):
    with pytest.raises(ValueError, match=match):
        relay.row_values(_row(**changes))


def test_row_values_refuses_what_is_no_object():
    with pytest.raises(ValueError, match="not a JSON object"):
        relay.row_values([1])


@pytest.mark.parametrize(
    ("tokens", "want"),
    [
        (None, ["analyst", 1, 0, 0, 0, "0"]),  # failed before any model call: the question
        (
            {"prompt": 900, "completion": 40, "estimated": 0, "cost_usd": None, "total": 940},
            ["analyst", 1, 900, 40, 0, "0"],
        ),
        (
            {"prompt": 10, "completion": 2, "estimated": 12, "cost_usd": 0.0015, "total": 12},
            ["analyst", 1, 10, 2, 12, "0.0015"],
        ),
    ],
)
def test_a_failed_calls_usage_is_its_question_and_tokens(tokens, want):
    usage = quota.failed_call(tokens)
    assert relay.usage_values(_row(usage=usage)) == want


def test_a_row_without_usage_adds_none():
    assert relay.usage_values(_row()) is None


@pytest.mark.parametrize(
    ("usage", "match"),
    [
        ([1], "usage must be"),
        ({"questions": -1}, "usage.questions"),
        ({"prompt": 1.5}, "usage.prompt"),
        ({"completion": "9"}, "usage.completion"),
        ({"estimated": True}, "usage.estimated"),
        ({"cost_usd": -0.1}, "usage.cost_usd"),
        ({"cost_usd": "free"}, "usage.cost_usd"),
    ],
)
def test_usage_values_refuse_what_could_lower_or_garble_a_day(usage, match):
    with pytest.raises(LogRowInvalid, match=match):
        relay.usage_values(_row(usage=usage))


@pytest.mark.parametrize(
    ("log_id", "why", "has", "has_not"),
    [
        (42, None, ["logged as nl2sql.query_log id 42", "nl2sql.explain"], ["rolled back"]),
        (None, "the shared process is not running", ["rolled back", "not running"], ["id "]),
        (None, None, ["read replica", "nl2sql.explain"], ["logged as"]),
    ],
)
def test_failed_hint_names_the_row_or_says_why_none(log_id, why, has, has_not):
    hint = failed_hint(log_id, why)
    assert all(h in hint for h in has), hint
    assert not any(h in hint for h in has_not), hint


@pytest.fixture
def shared(monkeypatch):
    """The backend's relay pointed at a socket path of the test's choosing (mode shared)."""
    monkeypatch.setitem(embed_client._STATE, "mode", "shared")

    def point_at(path: str) -> None:
        monkeypatch.setattr(relay, "_HTTP", [UnixClient(path)])

    return point_at


def test_relay_not_in_use_or_not_running_is_not_kept(shared, monkeypatch, tmp_path):
    monkeypatch.setitem(embed_client._STATE, "mode", "local")
    assert relay.relay_log(_row()) == (None, relay.NOT_IN_USE)
    monkeypatch.setitem(embed_client._STATE, "mode", "shared")
    shared(str(tmp_path / "none.sock"))
    got, why = relay.relay_log(_row())
    assert got is None and "not running" in why
    assert relay.last_not_kept()["why"] == why


def test_relay_gives_up_on_a_process_that_never_answers(shared, monkeypatch, tmp_path):
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(str(tmp_path / "mute.sock"))
    mute.listen(8)
    monkeypatch.setattr(relay, "LOG_TIMEOUT_S", 0.3)
    try:
        shared(str(tmp_path / "mute.sock"))
        t0 = time.monotonic()
        got, why = relay.relay_log(_row())
        assert time.monotonic() - t0 < 2.0
        assert got is None and "did not answer within 0.3 s" in why
    finally:
        mute.close()
