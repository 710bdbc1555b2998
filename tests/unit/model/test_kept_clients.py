"""Kept model clients (``openai_call``): calls to one endpoint reuse its connections (HTTP
keep-alive), and a call's hard deadline still shuts every connection its client holds."""

from __future__ import annotations

import time

import pytest

from nl2sql.core.types import ModelConfig
from nl2sql.model import capability
from nl2sql.model.openai_call import call_here
from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule

MSGS = [{"role": "user", "content": "How many singers are there?"}]


@pytest.fixture()
def server():
    capability.forget()
    with LoopbackLLM() as llm:
        llm.add_rule(Rule(model="fast", response="SELECT 1"))
        llm.add_rule(Rule(model="other", response="SELECT 2"))
        yield llm
    capability.forget()


def _cfg(server, model: str, **kw) -> ModelConfig:
    kw.setdefault("timeout_s", 1)
    return ModelConfig(name=model, model=model, base_url=server.base_url, max_retries=0, **kw)


def _port_of_each_call(server, calls: list[tuple[str, dict]]) -> list[int]:
    """Make the calls one after the other; the client port each request came from."""
    for model, kw in calls:
        call_here(_cfg(server, model, **kw), MSGS, 1, 1, None)
    return [r["port"] for r in server.requests]


# calls made one after the other; which of them share a connection (same letter: same port)
CASES = [
    ("one endpoint, one key: one connection", [("fast", {})] * 3, "aaa"),
    ("another model on the same endpoint", [("fast", {}), ("other", {}), ("fast", {})], "aaa"),
    (
        "another time limit: a client of its own",
        [("fast", {}), ("fast", {"timeout_s": 2}), ("fast", {})],
        "aba",
    ),
    (
        "another API key: a client of its own",
        [("fast", {"api_key_env": "NL2SQL_TEST_KEY_A"}), ("fast", {"api_key_env": "NL2SQL_TEST_KEY_B"}),
         ("fast", {"api_key_env": "NL2SQL_TEST_KEY_A"})],
        "aba",
    ),
]  # fmt: skip


@pytest.mark.parametrize("what,calls,shared", CASES, ids=[c[0] for c in CASES])
def test_calls_share_a_connection_only_with_the_same_endpoint_key_and_limits(
    server, monkeypatch, what, calls, shared
):
    monkeypatch.setenv("NL2SQL_TEST_KEY_A", "key-a")
    monkeypatch.setenv("NL2SQL_TEST_KEY_B", "key-b")
    ports = _port_of_each_call(server, calls)
    assert len(ports) == len(calls) and None not in ports
    first_port: dict[str, int] = {}
    for letter, port in zip(shared, ports):
        assert first_port.setdefault(letter, port) == port, (what, ports)
    assert len(set(ports)) == len(set(shared)), (what, ports)


def test_a_kept_connection_is_still_cut_at_the_deadline_and_not_kept_after():
    """A trickling reply on a connection an earlier call left open ends at the call's
    timeout_s; the next call opens a new connection and answers."""
    capability.forget()
    with LoopbackLLM() as server:
        server.add_rule(Rule(model="fast", response="SELECT 1"))
        server.add_rule(Rule(model="slow", response="SELECT 2", trickle_s=0.05))
        assert call_here(_cfg(server, "fast"), MSGS, 1, 1, None).error is None
        t0 = time.monotonic()
        slow = call_here(_cfg(server, "slow"), MSGS, 1, 1, None)
        took = time.monotonic() - t0
        assert slow.text is None and "1 s" in slow.error
        assert 0.9 <= took < 1.5, took
        after = call_here(_cfg(server, "fast"), MSGS, 1, 1, None)
        assert after.error is None and "SELECT 1" in after.text
        first, cut, last = [r["port"] for r in server.requests]
        assert cut == first  # the slow call came on the kept connection
        assert last != first  # which its deadline shut, with its client
