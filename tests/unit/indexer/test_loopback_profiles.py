"""Provider profiles of the loopback server (scripted answers, not a model's): each profile's
refusals, choices and reply shapes, read through the real ``openai`` client as it reads a real
provider's, and what the server records of each request.

Tables: ``REFUSED`` (profile, request, status, param, message), ``ACCEPTED`` (requests each
profile takes), ``CHOICES`` (what ``n`` gets), ``SHAPES`` (where the reasoning goes),
``CUT`` (thinking that spends a small cap); ``test_every_profile_is_tested`` keeps them complete.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import openai
import pytest

from nl2sql_indexer.dev._loopback_profiles import PROFILES, REASONING_TEXT
from nl2sql_indexer.dev._loopback_script import count_usage
from nl2sql_indexer.dev.loopback import QUESTION_MARKER, LoopbackLLM, Rule

SQL = "SELECT count(*) FROM singer"
PROMPT = f"CREATE TABLE singer (id int, name text);\n{QUESTION_MARKER}How many singers? */\nSELECT"
SQL_TOKENS = count_usage([], SQL, 1)[1]  # what the answer itself costs (cl100k: 5 tokens)


@pytest.fixture
def llm():
    server = LoopbackLLM().start()
    server.set_default(SQL)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def client(llm):
    return openai.OpenAI(base_url=llm.base_url, api_key="x", max_retries=0, timeout=10)


def chat(client, model: str, content: str = PROMPT, **kw):
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": content}], **kw
    )


def refused(client, model: str, **kw) -> openai.APIStatusError:
    with pytest.raises(openai.APIStatusError) as ei:
        chat(client, model, **kw)
    return ei.value


_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http(method: str, url: str, body=None) -> tuple[int, object]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with _opener.open(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def root(llm) -> str:
    return llm.base_url[: -len("/v1")]


# -- refusals: (profile, model name, request, status, param, message) -------------------------
REFUSED = [
    (
        "openai-reasoning",
        "gpt-5",
        {"max_tokens": 512},
        400,
        "max_tokens",
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
    ),
    (
        "openai-reasoning",
        "o3-mini",
        {"max_completion_tokens": 4096, "temperature": 0.0},
        400,
        "temperature",
        "Unsupported value: 'temperature' does not support 0.0 with this model. "
        "Only the default (1) value is supported.",
    ),
    (
        "openai-reasoning",
        "gpt-5",
        {"reasoning_effort": "none"},
        400,
        "reasoning_effort",
        "Unsupported value: 'reasoning_effort' does not support 'none' with this model. "
        "Supported values are: 'minimal', 'low', 'medium', and 'high'.",
    ),
    (
        "azure-openai-reasoning",
        "prod-sql-writer",
        {"max_tokens": 512, "temperature": 0},
        400,
        "max_tokens",
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
    ),
    (
        "azure-openai-reasoning",
        "prod-sql-writer",
        {"max_completion_tokens": 4096, "temperature": 0},
        400,
        "temperature",
        "Unsupported value: 'temperature' does not support 0 with this model. "
        "Only the default (1) value is supported.",
    ),
    (
        "openai-chat",
        "gpt-4o",
        {"reasoning_effort": "low"},
        400,
        "reasoning_effort",
        "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
    ),
    (
        "anthropic",
        "claude-opus-4-7",
        {"temperature": 0, "max_tokens": 512},
        400,
        None,
        "`temperature` is deprecated for this model.",
    ),
    ("anthropic", "claude-opus-4-7", {"n": 3}, 400, None, "n: must be exactly 1, got 3"),
    (
        "gemini",
        "gemini-3-pro",
        {"n": 3},
        400,
        None,
        "Multiple candidates is not enabled for this model",
    ),
    (
        "gemini",
        "gemini-3-pro",
        {"reasoning_effort": "minimal"},
        400,
        None,
        "Invalid reasoning_effort: minimal. Valid values are: high, low, medium, none",
    ),
    ("llamacpp", "gemma", {"n": 2}, 500, None, "Only one completion choice is allowed"),
    ("groq", "llama-3.3-70b", {"n": 3}, 400, None, "'n' : number must be at most 1"),
    (
        "groq",
        "llama-3.3-70b",
        {"reasoning_effort": "low"},
        400,
        None,
        "`reasoning_effort` is not supported with this model",
    ),
]


@pytest.mark.parametrize(("profile", "model", "kw", "status", "param", "message"), REFUSED)
def test_refused_as_the_provider_refuses(llm, client, profile, model, kw, status, param, message):
    llm.set_profile(model, profile)
    e = refused(client, model, **kw)
    assert e.status_code == status
    if PROFILES[profile].errors == "gemini":
        # Gemini's body is a list: the client keeps it whole, with no param or code
        assert isinstance(e.body, list) and e.param is None
        err = e.body[0]["error"]
        assert err["message"] == message and err["status"] == "INVALID_ARGUMENT"
        assert err["code"] == status
        return
    assert e.body["message"] == message
    assert e.param == param
    if PROFILES[profile].errors == "openai":
        assert e.code in ("unsupported_parameter", "unsupported_value")
        assert e.type == "invalid_request_error"
    elif PROFILES[profile].errors == "anthropic":
        assert e.body == {
            "code": "invalid_request_error",
            "message": message,
            "type": "invalid_request_error",
            "param": None,
        }
    elif PROFILES[profile].errors == "llamacpp":
        assert e.body == {"code": status, "message": message, "type": "server_error"}
    else:  # groq
        assert e.body == {"message": message, "type": "invalid_request_error"}
    assert llm.requests[-1]["refused"] == status


# -- what each profile takes ------------------------------------------------------------------
ACCEPTED = [
    ("openai-chat", {"max_tokens": 512, "temperature": 0, "n": 2}),
    ("openai-reasoning", {"max_completion_tokens": 4096, "reasoning_effort": "low"}),
    ("openai-reasoning", {"max_completion_tokens": 4096, "temperature": 1}),
    ("azure-openai-reasoning", {"max_completion_tokens": 4096, "reasoning_effort": "medium"}),
    ("anthropic", {"max_tokens": 512, "reasoning_effort": "high", "n": 1}),
    ("anthropic", {"max_completion_tokens": 512}),
    ("gemini", {"temperature": 0, "max_tokens": 4096, "reasoning_effort": "low", "n": 1}),
    ("llamacpp", {"temperature": 0, "max_tokens": 256, "n": 1}),
    ("groq", {"temperature": 0, "max_completion_tokens": 512, "n": 1}),
    ("ollama", {"temperature": 0, "max_tokens": 512, "reasoning_effort": "low", "n": 3}),
    ("openrouter", {"temperature": 0, "max_tokens": 4096, "n": 3}),
    ("mistral-reasoning", {"temperature": 0.7, "max_tokens": 4096}),
    ("deepseek-reasoner", {"temperature": 0, "max_tokens": 4096, "reasoning_effort": "low"}),
    ("vllm", {"temperature": 0, "max_tokens": 4096, "n": 3}),
    ("lmstudio", {"temperature": 0, "max_tokens": 4096, "reasoning_effort": "low", "n": 3}),
]


@pytest.mark.parametrize(("profile", "kw"), ACCEPTED)
def test_accepted_as_the_provider_accepts(llm, client, profile, kw):
    llm.set_profile("m", profile)
    r = chat(client, "m", **kw)
    assert r.choices and r.choices[0].finish_reason == "stop"
    assert llm.requests[-1]["refused"] is None


# -- how many choices n=3 gets ----------------------------------------------------------------
CHOICES = [
    ("openai-chat", 3),
    ("openai-reasoning", 3),
    ("vllm", 3),
    ("mistral-reasoning", 3),
    ("ollama", 1),
    ("openrouter", 1),
    ("deepseek-reasoner", 1),
    ("lmstudio", 1),
]


@pytest.mark.parametrize(("profile", "choices"), CHOICES)
def test_choices_for_n(llm, client, profile, choices):
    llm.set_profile("m", profile)
    r = chat(client, "m", n=3, max_tokens=4096) if profile != "openai-reasoning" else None
    if r is None:
        r = chat(client, "m", n=3, max_completion_tokens=4096)
    assert [c.index for c in r.choices] == list(range(choices))
    assert llm.requests[-1]["n"] == 3  # asked for three either way


# -- where the reasoning goes -----------------------------------------------------------------
def _fields(message) -> dict:
    return message.model_extra or {}


SHAPES = [
    # profile, content check, reasoning field (name, value) or None, reasoning tokens in usage
    ("openai-chat", SQL, None, 0),
    ("openai-reasoning", SQL, None, 1536),
    ("gemini", SQL, None, 1536),
    ("anthropic", SQL, None, None),
    ("groq", SQL, None, None),
    ("llamacpp", SQL, None, None),
    ("ollama", SQL, None, None),
    ("deepseek-reasoner", SQL, ("reasoning_content", REASONING_TEXT), 768),
    ("vllm", SQL, ("reasoning", REASONING_TEXT), None),
    ("openrouter", SQL, ("reasoning", REASONING_TEXT), 256),
    ("lmstudio", f"<think>\n{REASONING_TEXT}\n</think>\n\n{SQL}", None, None),
    (
        "mistral-reasoning",
        [
            {"type": "thinking", "thinking": [{"type": "text", "text": REASONING_TEXT}]},
            {"type": "text", "text": SQL},
        ],
        None,
        None,
    ),
]


@pytest.mark.parametrize(("profile", "content", "field", "reasoning_tokens"), SHAPES)
def test_reply_shape(llm, client, profile, content, field, reasoning_tokens):
    llm.set_profile("m", profile)
    cap = "max_tokens" if "max_tokens" in PROFILES[profile].cap else "max_completion_tokens"
    r = chat(client, "m", **{cap: 4096})
    message = r.choices[0].message
    assert message.content == content
    assert r.choices[0].finish_reason == "stop"
    extra = {k: v for k, v in _fields(message).items() if k.startswith("reasoning")}
    assert extra == ({field[0]: field[1]} if field else {})
    details = r.usage.completion_tokens_details
    if reasoning_tokens is None:
        assert details is None
    else:
        assert details.reasoning_tokens == reasoning_tokens
    # completion tokens hold the thinking and the answer
    thinking = PROFILES[profile].thinking_tokens if PROFILES[profile].reasoning != "none" else 0
    assert r.usage.completion_tokens == thinking + SQL_TOKENS


# -- thinking that spends a small cap: empty content, finish_reason "length" ------------------
CUT = [
    ("openai-reasoning", {"max_completion_tokens": 512}, "", None),
    ("azure-openai-reasoning", {"max_completion_tokens": 512}, "", None),
    ("gemini", {"max_tokens": 512}, None, None),
    ("deepseek-reasoner", {"max_tokens": 512}, "", ("reasoning_content", REASONING_TEXT)),
    ("openrouter", {"max_tokens": 100}, "", ("reasoning", REASONING_TEXT)),
    ("vllm", {"max_tokens": 100}, "", ("reasoning", REASONING_TEXT)),
    ("lmstudio", {"max_tokens": 100}, f"<think>\n{REASONING_TEXT}", None),
    (
        "mistral-reasoning",
        {"max_tokens": 100},
        [{"type": "thinking", "thinking": [{"type": "text", "text": REASONING_TEXT}]}],
        None,
    ),
]


@pytest.mark.parametrize(("profile", "kw", "content", "field"), CUT)
def test_thinking_spends_a_small_cap(llm, client, profile, kw, content, field):
    llm.set_profile("m", profile)
    r = chat(client, "m", **kw)
    choice = r.choices[0]
    assert choice.finish_reason == "length"
    assert choice.message.content == content
    extra = {k: v for k, v in _fields(choice.message).items() if k.startswith("reasoning")}
    assert extra == ({field[0]: field[1]} if field else {})
    cap = next(iter(kw.values()))
    assert r.usage.completion_tokens == cap  # the whole budget, spent
    if PROFILES[profile].details:
        assert r.usage.completion_tokens_details.reasoning_tokens == cap


def test_no_cap_means_no_cut_and_the_thinking_budget_is_an_option(llm, client):
    llm.set_profile("m", "openai-reasoning")
    assert chat(client, "m").choices[0].message.content == SQL  # nothing capped it
    llm.set_profile("m", "openai-reasoning", thinking_tokens=100)
    r = chat(client, "m", max_completion_tokens=512)
    assert r.choices[0].message.content == SQL and r.usage.completion_tokens == 100 + SQL_TOKENS


def test_every_profile_is_tested():
    tables = [REFUSED, ACCEPTED, CHOICES, SHAPES, CUT]
    covered = {row[0] for table in tables for row in table}
    assert covered == set(PROFILES)
    shaped = {row[0] for row in SHAPES} | {"azure-openai-reasoning"}  # same shape as OpenAI's
    assert shaped == set(PROFILES)


# -- a reasoning model's delay ------------------------------------------------------------------
def test_profile_delay_is_added_to_answers_not_to_refusals(llm, client):
    llm.set_profile("slow", "openai-reasoning", delay_s=0.4)
    t0 = time.monotonic()
    refused(client, "slow", max_tokens=512)
    assert time.monotonic() - t0 < 0.3  # a refusal comes at once
    t0 = time.monotonic()
    assert chat(client, "slow", max_completion_tokens=4096).choices[0].message.content == SQL
    assert time.monotonic() - t0 >= 0.4
    llm.add_rule(Rule(model="slow", response=SQL, delay_s=0.2))
    t0 = time.monotonic()
    chat(client, "slow", max_completion_tokens=4096)
    assert time.monotonic() - t0 >= 0.6  # the rule's delay and the profile's


# -- context windows ----------------------------------------------------------------------------
def test_llamacpp_refuses_a_prompt_over_the_slot_context(llm, client):
    llm.set_profile("gemma", "llamacpp", context_window=64)
    e = refused(client, "gemma", content="word " * 100)
    assert e.status_code == 400 and e.type == "exceed_context_size_error"
    n_prompt = e.body["n_prompt_tokens"]
    assert n_prompt > 64 and e.body["n_ctx"] == 64
    assert e.body["message"] == (
        f"request ({n_prompt} tokens) exceeds the available context size (64 tokens), "
        "try increasing it"
    )
    assert llm.requests[-1]["refused"] == 400
    assert chat(client, "gemma").choices[0].message.content == SQL  # a short prompt fits


def test_llamacpp_answer_that_outgrows_the_context_is_a_500(llm, client):
    llm.set_profile("gemma", "llamacpp", context_window=64)
    llm.add_rule(Rule(model="gemma", response="SELECT 1 " * 40))  # 120 tokens
    with pytest.raises(openai.InternalServerError) as ei:
        chat(client, "gemma", max_tokens=512)
    assert ei.value.body == {
        "code": 500,
        "message": "Context size has been exceeded.",
        "type": "server_error",
    }
    # a cap that keeps prompt + answer inside the window gets an answer
    assert chat(client, "gemma", max_tokens=8).choices[0].finish_reason == "stop"


def test_llamacpp_props_at_the_server_root(llm):
    status, _ = http("GET", root(llm) + "/props")
    assert status == 404  # no llama.cpp-profiled model yet
    llm.set_profile("gemma", "llamacpp")
    status, props = http("GET", root(llm) + "/props")
    assert status == 200
    assert props["default_generation_settings"]["n_ctx"] == 2048 and props["total_slots"] == 4
    llm.set_profile("gemma", "llamacpp", context_window=8192, total_slots=1)
    _, props = http("GET", root(llm) + "/props")
    assert props["default_generation_settings"]["n_ctx"] == 8192 and props["total_slots"] == 1


def test_ollama_truncates_silently_and_shows_its_context(llm, client):
    llm.set_profile("llama3.1", "ollama", context_window=32)
    r = chat(client, "llama3.1", content="word " * 100)
    assert r.choices[0].message.content == SQL  # no error
    assert r.usage.prompt_tokens == 32  # the prompt it kept
    status, show = http("POST", root(llm) + "/api/show", {"model": "llama3.1"})
    assert status == 200
    assert show["model_info"]["llama.context_length"] == 131072
    assert show["parameters"].split() == ["num_ctx", "32"]
    status, body = http("POST", root(llm) + "/api/show", {"model": "other"})
    assert status == 404 and body == {"error": "model 'other' not found"}


# -- the request log: what a client sent ----------------------------------------------------------
def test_request_log_records_the_body_keys_and_the_refusal(llm, client):
    llm.set_profile("gpt-5", "openai-reasoning")
    refused(client, "gpt-5", max_tokens=512, temperature=0.0, n=2)
    chat(client, "gpt-5", max_completion_tokens=4096, reasoning_effort="low", n=2)
    chat(client, "plain")  # no profile
    first, second, third = llm.requests
    assert first["params"] == {"max_tokens": 512, "temperature": 0.0, "n": 2}
    assert (first["profile"], first["refused"]) == ("openai-reasoning", 400)
    assert second["params"] == {"max_completion_tokens": 4096, "reasoning_effort": "low", "n": 2}
    assert second["temperature"] is None and second["refused"] is None
    assert third["params"] == {} and third["profile"] is None and third["n"] == 1


# -- setting profiles ---------------------------------------------------------------------------
def test_set_profile_validates_and_none_removes(llm, client):
    with pytest.raises(ValueError, match="unknown profile"):
        llm.set_profile("m", "openai-o7")
    with pytest.raises(ValueError, match="unknown profile option"):
        llm.set_profile("m", "llamacpp", n_ctx=4096)
    with pytest.raises(ValueError, match="non-negative"):
        llm.set_profile("m", "llamacpp", delay_s=-1)
    llm.set_profile("gpt-5", "openai-reasoning")
    assert "gpt-5" in llm.models()
    refused(client, "gpt-5", max_tokens=512)
    llm.set_profile("gpt-5", None)
    assert chat(client, "gpt-5", max_tokens=512).choices[0].message.content == SQL
    llm.set_profile("gpt-5", "openai-reasoning")
    llm.clear()  # drops profiles with the rules
    assert chat(client, "gpt-5", max_tokens=512).choices[0].message.content == SQL


def test_load_script_and_admin_endpoint_set_profiles(llm, client):
    llm.load_script(
        {
            "profiles": {
                "claude-opus-4-7": "anthropic",
                "gemma": {"profile": "llamacpp", "context_window": 64},
            }
        }
    )
    assert refused(client, "claude-opus-4-7", temperature=0).status_code == 400
    assert refused(client, "gemma", content="word " * 100).body["n_ctx"] == 64
    with pytest.raises(ValueError):
        llm.load_script({"profiles": {"m": {"profile": "nope"}}})
    with pytest.raises(ValueError):
        llm.load_script({"profiles": ["anthropic"]})

    status, body = http(
        "POST",
        root(llm) + "/_profile",
        {"model": "prod-sql-writer", "profile": "azure-openai-reasoning"},
    )
    assert status == 200 and body["model"] == "prod-sql-writer"
    assert refused(client, "prod-sql-writer", max_tokens=512).param == "max_tokens"
    status, body = http("POST", root(llm) + "/_profile", {"model": "m", "profile": "nope"})
    assert status == 400 and "unknown profile" in body["error"]["message"]
    status, _ = http("POST", root(llm) + "/_profile", {"model": "prod-sql-writer", "profile": None})
    assert status == 200
    assert chat(client, "prod-sql-writer", max_tokens=512).choices[0].message.content == SQL
