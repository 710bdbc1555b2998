"""Room on a server (``net.room``) and a call that a llama.cpp server with one KV cache shared
by its slots refused for room: sent again, the server's window then bounding what is sent at
once (the loopback's ``kv_unified`` profile option emulates such a server)."""

from __future__ import annotations

import threading
import time

import pytest

from nl2sql.core.errors import DeadlineExceeded
from nl2sql.core.types import ModelConfig
from nl2sql.model import capability, llm
from nl2sql.model.gate import open_gate
from nl2sql.net import deadline, room
from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule


@pytest.fixture(autouse=True)
def _fresh():
    room.forget()
    capability.forget_windows()
    yield
    room.forget()
    capability.forget_windows()


def test_requests_wait_for_room_once_a_limit_is_known_and_one_alone_always_goes():
    key = ("http://server/v1",)
    with room.hold(key, 5000, None) as waited:  # no limit known: nothing waits
        assert waited < 0.05
    room.limit(key, 6000)
    with room.hold(key, 9000, None):  # alone, larger than the limit: goes
        pass
    order = []

    def second():
        with room.hold(key, 4000, None) as waited:
            order.append(("second", waited))

    with room.hold(key, 4000, None):
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        order.append(("first done", 0))
    t.join(2)
    assert order[0][0] == "first done" and order[1][0] == "second" and order[1][1] >= 0.25


def test_waiting_for_room_ends_at_the_request_deadline():
    key = ("http://server/v1",)
    room.limit(key, 1000)
    with room.hold(key, 800, None):
        d = deadline.Deadline(0.3)
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            with room.hold(key, 800, d):
                pass
        assert time.monotonic() - t0 < 0.6


def test_calls_a_shared_cache_refused_for_room_are_sent_again_and_all_answered():
    with LoopbackLLM() as server:
        server.set_profile(
            "g", "llamacpp", context_window=2000, total_slots=4, kv_unified=True, delay_s=0.3
        )
        server.add_rule(Rule(model="g", response="SELECT 1"))
        cfg = ModelConfig(
            name="g",
            model="g",
            base_url=server.base_url,
            timeout_s=20,
            max_tokens=600,
            max_retries=0,
        )
        prompt = "How many singers are there? " * 40  # ~400 tokens: 1,000 with the cap
        calls = [(cfg, open_gate().seal("test", prompt))] * 4  # 4,000 at once: twice the cache
        replies = llm.call_models(calls)
    assert [r.error for r in replies] == [None] * 4
    assert all(r.text == "SELECT 1" for r in replies)
    learned = [x for r in replies for x in r.learned if "refused for room" in x]
    assert learned, [r.learned for r in replies]
    assert room.limit_of((server.base_url,)) == 2000
