"""What each model's endpoint is sent: known from the name, configured, learned from refusals;
replies read whatever their shape."""

from __future__ import annotations

import pytest

from nl2sql.core.types import ModelConfig
from nl2sql.model import _reply, capability

MCT, MT = "max_completion_tokens", "max_tokens"


@pytest.fixture(autouse=True)
def _fresh():
    capability.forget()
    capability.forget_windows()
    yield
    capability.forget()
    capability.forget_windows()


# model id → (cap parameter, temperature sent, n sent, reasoning_effort, cap)
BY_NAME = [
    ("gpt-5", MCT, False, True, "low", 8192),
    ("gpt-5-mini", MCT, False, True, "low", 8192),
    ("o3-mini", MCT, False, True, "low", 8192),
    ("o1", MCT, False, True, "low", 8192),
    ("openai/gpt-5", MCT, False, True, "low", 8192),  # OpenRouter's id
    ("gpt-4o", MT, True, True, None, 512),
    ("claude-opus-4-7", MT, False, False, None, 512),
    ("claude-sonnet-4-5", MT, True, False, None, 512),
    ("gemini-3-pro-preview", MT, True, False, "low", 8192),
    ("deepseek-reasoner", MT, False, True, None, 8192),
    ("magistral-medium-latest", MT, True, True, None, 8192),
    ("prod-sql-writer", MT, True, True, None, 512),  # an Azure deployment name says nothing
    ("gemma-3-270m", MT, True, True, None, 512),
]


@pytest.mark.parametrize("model,param,temp,n,effort,cap", BY_NAME)
def test_the_request_follows_what_the_model_name_says(model, param, temp, n, effort, cap):
    c = capability.decide(ModelConfig(name="m", model=model))
    sent = capability.request_args(c, 3, 0.0)
    assert list(sent)[0] == param and sent[param] == cap
    assert ("temperature" in sent) is temp
    assert ("n" in sent) is n
    assert sent.get("reasoning_effort") == effort


def test_configured_arguments_win_over_the_name_and_say_so():
    cfg = ModelConfig(
        name="m",
        model="gpt-5",
        max_tokens=2000,
        cap_parameter=MCT,
        send_temperature=True,
        send_n=False,
        reasoning_effort="",
    )
    c = capability.decide(cfg)
    assert capability.request_args(c, 3, 0.2) == {MCT: 2000, "temperature": 0.2}
    assert c.source["send_n"] == "configured" and c.source["reasoning_effort"] == "configured"


# (error message, param field, what was sent, the fix: field, value)
REFUSALS = [
    (
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "max_tokens",
        {MT: 512, "temperature": 0},
        ("cap_parameter", MCT),
    ),
    (
        "Unsupported value: 'temperature' does not support 0 with this model. "
        "Only the default (1) value is supported.",
        "temperature",
        {MCT: 512, "temperature": 0},
        ("send_temperature", False),
    ),
    (
        "`temperature` is deprecated for this model.",
        None,
        {MT: 512, "temperature": 0},
        ("send_temperature", False),
    ),
    ("Only one completion choice is allowed", None, {MT: 512, "n": 3}, ("send_n", False)),
    ("'n' : number must be at most 1", None, {MT: 512, "n": 3}, ("send_n", False)),
    ("n must be 1", None, {MT: 512, "temperature": 0, "n": 2}, ("send_n", False)),
    (
        "Unrecognized request argument supplied: reasoning_effort",
        None,
        {MT: 512, "reasoning_effort": "low"},
        ("reasoning_effort", None),
    ),
    ("Invalid value for 'model'", "model", {MT: 512}, None),
    ("the request exceeds the available context size", None, {MT: 512}, None),
]


@pytest.mark.parametrize("message,param,sent,fix", REFUSALS)
def test_a_refusal_that_names_a_parameter_gets_the_change_it_asks_for(message, param, sent, fix):
    got = capability.fix_for(message, param, capability.Capability(), sent)
    assert (None if got is None else (got.field, got.value)) == fix


def test_what_was_learned_is_kept_per_model_for_the_next_call():
    azure = ModelConfig(name="az", model="prod-sql-writer", base_url="https://x.example/v1")
    other = ModelConfig(name="o", model="prod-sql-writer", base_url="https://y.example/v1")
    c = capability.decide(azure)
    fix = capability.fix_for("Use 'max_completion_tokens' instead.", "max_tokens", c, {MT: 512})
    capability.learn(azure, c, fix)
    again = capability.decide(azure)
    assert again.cap_parameter == MCT and again.source["cap_parameter"].startswith("learned")
    assert capability.decide(other).cap_parameter == MT  # another endpoint: not learned
    [entry] = capability.learned()
    assert entry["model"] == "prod-sql-writer" and "cap_parameter" in entry["learned"]
    capability.forget()
    capability.adopt([entry])  # the shared process's memory, taken by doctor()
    assert capability.decide(azure).cap_parameter == MCT


def test_a_learned_larger_cap_survives_a_smaller_configured_one():
    cfg = ModelConfig(name="m", model="local", max_tokens=512)
    c = capability.decide(cfg)
    capability.learn(cfg, c, capability.Fix("max_output", 8192, "cut"))
    assert capability.decide(cfg).max_output == 8192


# content shapes → the answer text
CONTENTS = [
    ("SELECT 1", "SELECT 1"),
    (None, None),
    ([], None),
    (
        [
            {"type": "thinking", "thinking": [{"type": "text", "text": "SELECT 2 maybe"}]},
            {"type": "text", "text": "SELECT 1"},
        ],
        "SELECT 1",
    ),
    ([{"type": "text", "text": "SELECT "}, {"type": "text", "text": "1"}], "SELECT 1"),
    ([{"type": "image_url", "image_url": {}}], None),
    ({"unexpected": "shape"}, None),
    (42, None),
]


@pytest.mark.parametrize("content,text", CONTENTS)
def test_content_of_any_shape_gives_its_answer_text_only(content, text):
    assert _reply.content_text(content) == text


def _resp(content, finish="stop", usage=None, n=1, **message):
    return {
        "choices": [
            {"message": {"content": content, **message}, "finish_reason": finish} for _ in range(n)
        ],
        "usage": usage,
    }


def test_reasoning_fields_are_never_the_answer_and_their_tokens_are_counted():
    got = _reply.read(
        _resp(
            None,
            finish="length",
            reasoning_content="SELECT secret FROM t",
            usage={
                "prompt_tokens": 10,
                "completion_tokens": 512,
                "completion_tokens_details": {"reasoning_tokens": 512},
            },
        )
    )
    assert got.texts == [] and got.cut
    assert (got.prompt_tokens, got.completion_tokens, got.reasoning_tokens) == (10, 512, 512)


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": -5, "completion_tokens": 3},
        {"prompt_tokens": 10**20, "completion_tokens": 3},
        {"prompt_tokens": "12", "completion_tokens": 3},
        {"prompt_tokens": None, "completion_tokens": 3},
    ],
)
def test_insane_usage_is_not_taken_and_says_why(usage):
    got = _reply.read(_resp("SELECT 1", usage=usage))
    assert got.texts == ["SELECT 1"] and got.prompt_tokens == 0 and got.completion_tokens == 0
    assert "not sane" in got.usage_note


def test_a_reply_of_no_known_shape_reads_as_empty_not_an_exception():
    for resp in ({}, {"choices": None}, {"choices": "x"}, {"choices": [{}]}, _resp("  ")):
        got = _reply.read(resp)
        assert got.texts == [] and not got.cut


WINDOW_BODIES = [
    ("props", {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 2}, 4096),
    ("props", {"n_ctx": 2048}, 2048),
    ("show", {"model_info": {"llama.context_length": 131072}, "parameters": "num_ctx 8192"}, 8192),
    ("show", {"model_info": {"gemma3.context_length": 32768}}, capability.OLLAMA_DEFAULT_CTX),
    ("show", {"model_info": {"x.context_length": 2048}}, 2048),
    ("show", {"nothing": 1}, None),
]


@pytest.mark.parametrize("kind,body,tokens", WINDOW_BODIES)
def test_a_servers_own_words_give_its_context_window(kind, body, tokens):
    read = capability._from_props if kind == "props" else capability._from_show
    assert read(body) == tokens
