"""Model calls: concurrent rounds, replies handed over as they arrive, statement budget."""

from __future__ import annotations

import time

import pytest

from nl2sql.core.types import LLMReply, ModelConfig
from nl2sql.model import llm as llm_mod
from nl2sql.model.gate import open_gate
from nl2sql.net import deadline as net_deadline

KNOWN = {"singer", "stadium", "concert", "singer_in_concert"}
MSG = open_gate().seal("test", "q")  # what the model layer sends: messages the gate sealed


def _delayed_models(monkeypatch, delays: dict[str, float]) -> list[ModelConfig]:
    def answer(cfg, messages, timeout_s=None):
        time.sleep(delays[cfg.name])
        return LLMReply(
            model=cfg.name,
            text=f"SELECT '{cfg.name}'",
            error=None,
            latency_ms=delays[cfg.name] * 1000,
        )

    monkeypatch.setattr(llm_mod, "call_model", lambda cfg, m, t=None: answer(cfg, m, t))
    return [ModelConfig(name=n, model=n, timeout_s=30) for n in delays]


def test_work_during_a_round_is_not_counted_as_model_wait(monkeypatch):
    cfgs = _delayed_models(monkeypatch, {"a": 0.3, "b": 0.5})
    rnd = llm_mod.call_models_during([(c, MSG) for c in cfgs], lambda: time.sleep(0.2))
    assert [r.text for r in rnd.replies] == ["SELECT 'a'", "SELECT 'b'"]
    assert 450 <= rnd.wait_ms < 650 and 190 <= rnd.work_ms < 300  # hidden behind the models
    t0 = time.monotonic()
    rnd = llm_mod.call_models_during([(c, MSG) for c in cfgs], lambda: time.sleep(0.8))
    assert time.monotonic() - t0 >= 0.8
    assert 450 <= rnd.wait_ms < 650  # the 0.3 s of work after the last reply is not model time


def test_replies_reach_on_reply_as_they_arrive_with_the_calls_still_out(monkeypatch):
    cfgs = _delayed_models(monkeypatch, {"slow": 0.6, "fast": 0.0, "mid": 0.3})
    seen: list[tuple[int, str, int, float]] = []
    t0 = time.monotonic()
    rnd = llm_mod.call_models_during(
        [(c, MSG) for c in cfgs],
        None,
        on_reply=lambda i, r, out: seen.append((i, r.model, out, time.monotonic() - t0)),
    )
    assert [(i, m, out) for i, m, out, _ in seen] == [(1, "fast", 2), (2, "mid", 1), (0, "slow", 0)]
    assert seen[0][3] < 0.25 and seen[1][3] < 0.55  # handled while the slower ones ran
    assert [r.model for r in rnd.replies] == ["slow", "fast", "mid"]  # replies in call order


def test_call_models_abandons_a_call_at_the_statement_budget(monkeypatch):
    def slow(cfg, messages, timeout_s=None):
        time.sleep(2.0)
        return LLMReply(model=cfg.name, text="SELECT 1", error=None, latency_ms=2000)

    def fast(cfg, messages, timeout_s=None):
        return LLMReply(model=cfg.name, text="SELECT 2", error=None, latency_ms=1)

    monkeypatch.setattr(
        llm_mod,
        "call_model",
        lambda cfg, m, t=None: (slow if cfg.name == "slow" else fast)(cfg, m, t),
    )
    cfgs = [
        ModelConfig(name="slow", model="s", timeout_s=30),
        ModelConfig(name="fast", model="f", timeout_s=30),
    ]
    t0 = time.monotonic()
    replies = llm_mod.call_models([(c, MSG) for c in cfgs], budget_s=0.5)
    took = time.monotonic() - t0
    assert took < 1.5
    assert replies[0].text is None and "statement_timeout" in replies[0].error
    assert replies[1].text == "SELECT 2"


def _llm_threads() -> int:
    import threading

    return sum(1 for t in threading.enumerate() if t.name == "nl2sql-llm")


def test_trickling_models_end_at_their_deadline_and_never_starve_later_calls():
    """20 questions whose model trickles its reply a byte at a time (the per-read timeout never
    trips) are each cut at the model's timeout_s; the next ordinary call answers at once."""
    from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule

    with LoopbackLLM() as server:
        server.add_rule(Rule(model="slow", response="SELECT 1", trickle_s=0.05))
        server.add_rule(Rule(model="fast", response="SELECT 2"))
        slow = ModelConfig(
            name="slow", model="slow", base_url=server.base_url, timeout_s=1, max_retries=2
        )
        fast = ModelConfig(name="fast", model="fast", base_url=server.base_url, timeout_s=5)
        before = _llm_threads()
        t0 = time.monotonic()
        for q in range(20):  # 20 questions, 4 trickling calls each (80 calls at once)
            rnd = llm_mod.call_models([(slow, open_gate().seal("test", f"q{q}"))] * 4)
            assert all(r.text is None and "1 s" in r.error for r in rnd)
        assert time.monotonic() - t0 < 20 * 1.6
        t1 = time.monotonic()
        (reply,) = llm_mod.call_models([(fast, open_gate().seal("test", "ordinary"))])
        assert reply.text == "SELECT 2" and reply.error is None
        assert time.monotonic() - t1 < 1.0
        # the abandoned calls do not linger: each ended at its deadline (+ slack)
        deadline = time.monotonic() + 1.5
        while _llm_threads() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _llm_threads() <= before


def test_call_model_cuts_a_trickling_reply_at_its_hard_deadline():
    from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule

    with LoopbackLLM() as server:
        server.add_rule(Rule(model="slow", response="SELECT 1", trickle_s=0.02))
        cfg = ModelConfig(
            name="slow", model="slow", base_url=server.base_url, timeout_s=0.7, max_retries=2
        )
        t0 = time.monotonic()
        reply = llm_mod.call_model(cfg, MSG)
        took = time.monotonic() - t0
        assert reply.text is None and "0.7 s" in reply.error
        assert 0.6 <= took < 0.7 + 0.3, took


def test_a_message_that_did_not_pass_the_gate_never_reaches_a_model():
    """llm sends only what gate.Gate.seal made: plain messages are refused before any call,
    and a Gated built by hand cannot exist."""
    import pytest

    from nl2sql.core.errors import GateError
    from nl2sql.model.gate import Gated

    cfg = ModelConfig(name="m", model="m", base_url="http://127.0.0.1:9", timeout_s=1)
    plain = [{"role": "user", "content": "q"}]
    with pytest.raises(GateError):
        llm_mod.call_model(cfg, plain)
    with pytest.raises(GateError):
        llm_mod.call_models([(cfg, plain)])
    with pytest.raises(GateError):
        Gated("presql", tuple(plain))


def test_call_threads_are_reused_and_an_error_reaches_the_waiter():
    """A call thread that finished waits for the next call (no thread started per call); a
    call's exception is handed to its Future; threads past MAX_IDLE_THREADS end."""
    import threading

    def ident() -> tuple[int, str]:
        return threading.get_ident(), threading.current_thread().name

    first = llm_mod._spawn(ident).result(timeout=5)
    assert first[1] == "nl2sql-llm"  # named as a running call
    again = [llm_mod._spawn(ident).result(timeout=5) for _ in range(5)]
    assert {a[0] for a in again} == {first[0]}  # the same thread, one call after the other

    def boom() -> None:
        raise ValueError("model call failed")

    with pytest.raises(ValueError, match="model call failed"):
        llm_mod._spawn(boom).result(timeout=5)
    # many calls at once: more threads, of which at most MAX_IDLE_THREADS stay
    gate = threading.Event()
    many = [llm_mod._spawn(gate.wait, 5) for _ in range(net_deadline.MAX_IDLE_THREADS + 8)]
    gate.set()
    assert all(f.result(timeout=5) for f in many)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (
        _idle_threads() < net_deadline.MAX_IDLE_THREADS or _llm_threads()
    ):
        time.sleep(0.02)
    assert _idle_threads() == net_deadline.MAX_IDLE_THREADS == len(net_deadline._IDLE)
    assert _llm_threads() == 0  # the 8 beyond it ended


def _idle_threads() -> int:
    import threading

    return sum(1 for t in threading.enumerate() if t.name == "nl2sql-idle")
