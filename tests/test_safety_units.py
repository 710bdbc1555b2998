"""Safety checks that need no server: the adversarial corpus against the shape check, the
volatility check with a scripted pg_proc lookup, function-name extraction, model-call budgets."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "py_udf"))

from adversarial_corpus import CORPUS  # noqa: E402
from nl2sql import llm as llm_mod  # noqa: E402
from nl2sql.safety import VOLATILE_ALLOWLIST, check_functions, function_names  # noqa: E402
from nl2sql.sqlcheck import CandidateRefused, check_candidate, parse_one  # noqa: E402
from nl2sql.types import LLMReply, ModelConfig  # noqa: E402

KNOWN = {"singer", "stadium", "concert", "singer_in_concert"}


def test_corpus_has_at_least_fifty_statements_with_unique_ids():
    assert len(CORPUS) >= 50
    assert len({c[0] for c in CORPUS}) == len(CORPUS)
    assert {c[2] for c in CORPUS} == {"shape", "refused", "contained"}


@pytest.mark.parametrize("cid,sql", [(c[0], c[1]) for c in CORPUS if c[2] == "shape"])
def test_shape_check_refuses_corpus_statement(cid, sql):
    with pytest.raises(CandidateRefused):
        check_candidate(sql, KNOWN)


@pytest.mark.parametrize("cid,sql", [(c[0], c[1]) for c in CORPUS if c[2] == "refused"])
def test_volatility_check_refuses_what_the_shape_check_lets_through(cid, sql):
    tree = check_candidate(sql, KNOWN)  # a plain SELECT: the shape check cannot know
    volatile_in_pg_proc = {"currval", "setseed", "pg_notify", "pg_stat_reset_shared", "lo_creat",
                           "pg_stat_reset", "pg_try_advisory_lock", "adv_writer", "random"}
    with pytest.raises(CandidateRefused, match="volatile"):
        check_functions(tree, lambda names: names & volatile_in_pg_proc)


def test_function_names_cover_qualified_and_portable_nodes():
    names = function_names(parse_one(
        "SELECT pg_catalog.pg_sleep(1), random(), count(*), gen_random_uuid() FROM singer"))
    assert {"pg_sleep", "random", "count", "gen_random_uuid"} <= names


def test_allowlisted_volatile_function_passes_and_others_do_not():
    seen: list[set[str]] = []

    def lookup(names: set[str]) -> set[str]:
        seen.append(set(names))
        return names & {"random", "clock_timestamp", "gen_random_uuid"}

    check_functions(parse_one("SELECT name FROM singer ORDER BY random() LIMIT 1"), lookup)
    assert "random" in VOLATILE_ALLOWLIST and "random" not in seen[-1]
    with pytest.raises(CandidateRefused, match=r"gen_random_uuid\(\)"):
        check_functions(parse_one("SELECT gen_random_uuid()"), lookup)


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
