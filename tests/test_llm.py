"""Model calls: concurrent rounds, replies handed over as they arrive, statement budget."""
from __future__ import annotations

import time

from nl2sql import llm as llm_mod
from nl2sql.types import LLMReply, ModelConfig


KNOWN = {"singer", "stadium", "concert", "singer_in_concert"}


def _delayed_models(monkeypatch, delays: dict[str, float]) -> list[ModelConfig]:
    def answer(cfg, messages, timeout_s=None):
        time.sleep(delays[cfg.name])
        return LLMReply(model=cfg.name, text=f"SELECT '{cfg.name}'", error=None,
                        latency_ms=delays[cfg.name] * 1000)

    monkeypatch.setattr(llm_mod, "call_model", lambda cfg, m, t=None: answer(cfg, m, t))
    return [ModelConfig(name=n, model=n, timeout_s=30) for n in delays]


def test_work_during_a_round_is_not_counted_as_model_wait(monkeypatch):
    cfgs = _delayed_models(monkeypatch, {"a": 0.3, "b": 0.5})
    rnd = llm_mod.call_models_during([(c, []) for c in cfgs], lambda: time.sleep(0.2))
    assert [r.text for r in rnd.replies] == ["SELECT 'a'", "SELECT 'b'"]
    assert 450 <= rnd.wait_ms < 650 and 190 <= rnd.work_ms < 300  # hidden behind the models
    t0 = time.monotonic()
    rnd = llm_mod.call_models_during([(c, []) for c in cfgs], lambda: time.sleep(0.8))
    assert time.monotonic() - t0 >= 0.8
    assert 450 <= rnd.wait_ms < 650  # the 0.3 s of work after the last reply is not model time


def test_replies_reach_on_reply_as_they_arrive_with_the_calls_still_out(monkeypatch):
    cfgs = _delayed_models(monkeypatch, {"slow": 0.6, "fast": 0.0, "mid": 0.3})
    seen: list[tuple[int, str, int, float]] = []
    t0 = time.monotonic()
    rnd = llm_mod.call_models_during(
        [(c, []) for c in cfgs], None,
        on_reply=lambda i, r, out: seen.append((i, r.model, out, time.monotonic() - t0)))
    assert [(i, m, out) for i, m, out, _ in seen] == [(1, "fast", 2), (2, "mid", 1), (0, "slow", 0)]
    assert seen[0][3] < 0.25 and seen[1][3] < 0.55  # handled while the slower ones ran
    assert [r.model for r in rnd.replies] == ["slow", "fast", "mid"]  # replies in call order


def test_call_models_abandons_a_call_at_the_statement_budget(monkeypatch):
    def slow(cfg, messages, timeout_s=None):
        time.sleep(2.0)
        return LLMReply(model=cfg.name, text="SELECT 1", error=None, latency_ms=2000)

    def fast(cfg, messages, timeout_s=None):
        return LLMReply(model=cfg.name, text="SELECT 2", error=None, latency_ms=1)

    monkeypatch.setattr(llm_mod, "call_model",
                        lambda cfg, m, t=None: (slow if cfg.name == "slow" else fast)(cfg, m, t))
    cfgs = [ModelConfig(name="slow", model="s", timeout_s=30),
            ModelConfig(name="fast", model="f", timeout_s=30)]
    t0 = time.monotonic()
    replies = llm_mod.call_models([(c, []) for c in cfgs], budget_s=0.5)
    took = time.monotonic() - t0
    assert took < 1.5
    assert replies[0].text is None and "statement_timeout" in replies[0].error
    assert replies[1].text == "SELECT 2"
