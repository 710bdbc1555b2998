"""Provider profiles of the loopback server: which requests a provider refuses, and the shape
of its answers. Its answers stay SCRIPTED, NOT A MODEL'S (see :mod:`nl2sql_indexer.dev.loopback`).

A profile is attached to a model name (``LoopbackLLM.set_profile``); requests for that model
are then refused and answered as the provider does, from its published documentation and the
error bodies users reported (the source of each behaviour is named beside its profile below).
Everything a profile does is data in :data:`PROFILES`; the functions read it: the refusal of a
request body (:func:`request_refusal`), of a prompt over the context window
(:func:`context_refusal`), the choices and usage of an answer (:func:`shaped_answer`), and the
llama.cpp ``GET /props`` and Ollama ``POST /api/show`` bodies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from nl2sql_indexer.dev._loopback_script import count_usage

__all__ = [
    "OPTIONS",
    "PROFILES",
    "REASONING_TEXT",
    "Profile",
    "Refusal",
    "context_refusal",
    "error_body",
    "llamacpp_props",
    "ollama_show",
    "output_cap",
    "profile_named",
    "request_refusal",
    "shaped_answer",
]

# What a profile that shows its thinking puts there: scripted, never a model's.
REASONING_TEXT = (
    "Scripted reasoning of the loopback server (not a model's): the question asks for a count."
)


@dataclass(frozen=True)
class Refusal:
    """A request body the provider refuses.

    ``when``: ``"present"`` (the key is sent, not null), ``"not_one"`` (sent and != 1),
    ``"above_one"`` (sent and > 1), ``"not_in"`` (sent and not one of ``allowed``).
    ``message`` may hold ``{value}``: the value sent, as JSON (``0.0``) or quoted (``'none'``).
    """

    param: str
    when: str
    message: str
    status: int = 400
    code: str | None = None
    allowed: tuple = ()


@dataclass(frozen=True)
class Profile:
    """How one provider takes and answers chat completions.

    ``errors``: the error body's shape (``openai``, ``anthropic``, ``gemini``, ``llamacpp``,
    ``groq``). ``n``: ``"honour"`` (n choices) or ``"ignore"`` (one). ``reasoning``: where the
    thinking goes: ``none``, ``hidden`` (counted in usage only), ``reasoning_content``,
    ``reasoning`` (message fields), ``think_tags`` (``<think>`` in content) or ``parts`` (content
    a list of thinking and text parts). ``thinking_tokens``: what the thinking spends of the
    output cap (``cap``: the request keys read as the cap, first present wins); when the cap is
    below thinking + answer the content is ``empty`` and ``finish_reason`` "length".
    ``context``: ``llamacpp`` (a prompt over ``context_window`` is refused) or ``ollama`` (it is
    truncated). ``details``: usage carries ``completion_tokens_details.reasoning_tokens``.
    ``kv_unified``: as llama-server with ``--parallel`` on auto, the slots share one KV cache of
    ``context_window`` tokens: a request answered while the requests in flight together (its
    own prompt and cap included) hold more is refused with llama.cpp's 500 "Context size has
    been exceeded." though it fits alone.
    """

    provider: str
    errors: str = "openai"
    refusals: tuple[Refusal, ...] = ()
    n: str = "honour"
    reasoning: str = "none"
    thinking_tokens: int = 0
    empty: str | None = ""
    cap: tuple[str, ...] = ("max_completion_tokens", "max_tokens")
    context: str | None = None
    context_window: int = 0
    total_slots: int = 1
    kv_unified: bool = False  # the slots share one cache of ``context_window`` tokens
    delay_s: float = 0.0
    details: bool = False


# Options a caller may override per model (set_profile(..., **options), the script, /_profile).
OPTIONS = ("delay_s", "thinking_tokens", "context_window", "total_slots", "kv_unified")

# OpenAI's refusals of a reasoning model (gpt-5*, o1/o3/o4*). Bodies as users reported them:
# max_tokens: github.com/griptape-ai/ComfyUI-Griptape/issues/312; temperature:
# github.com/gabrii/Cursor-Azure-GPT-5/issues/33 (Python sends 0.0: "does not support 0.0",
# OpenHands/OpenHands#4131); reasoning_effort values: github.com/Kilo-Org/cloud/pull/3807.
# "Reasoning models" guide: platform.openai.com/docs/guides/reasoning (max_completion_tokens
# holds reasoning and answer; reasoning tokens in usage.completion_tokens_details).
_OPENAI_REASONING_REFUSALS = (
    Refusal(
        "max_tokens",
        "present",
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        code="unsupported_parameter",
    ),
    Refusal(
        "temperature",
        "not_one",
        "Unsupported value: 'temperature' does not support {value} with this model. "
        "Only the default (1) value is supported.",
        code="unsupported_value",
    ),
    Refusal(
        "reasoning_effort",
        "not_in",
        "Unsupported value: 'reasoning_effort' does not support {value} with this model. "
        "Supported values are: 'minimal', 'low', 'medium', and 'high'.",
        code="unsupported_value",
        allowed=("minimal", "low", "medium", "high"),
    ),
)

PROFILES: dict[str, Profile] = {
    # An older OpenAI chat model (gpt-4o, gpt-4.1): the baseline; max_tokens, temperature and n
    # as sent. reasoning_effort is refused (a 400 on gpt-4o: github.com/avante-corp/avante.nvim/
    # pull/1359; the message as OpenAI words it for gpt-4.1: BoundaryML/baml#2708).
    "openai-chat": Profile(
        provider="OpenAI chat model (gpt-4o)",
        refusals=(
            Refusal(
                "reasoning_effort",
                "present",
                "Unsupported parameter: 'reasoning_effort' is not supported with this model.",
                code="unsupported_parameter",
            ),
        ),
        details=True,
    ),
    "openai-reasoning": Profile(
        provider="OpenAI reasoning model (gpt-5*, o1/o3/o4*)",
        refusals=_OPENAI_REASONING_REFUSALS,
        reasoning="hidden",
        thinking_tokens=1536,
        cap=("max_completion_tokens",),
        details=True,
    ),
    # Azure OpenAI serves the same models under any deployment name with the same bodies
    # (github.com/anomalyco/opencode/issues/37964: GPT 5.1 on Azure; holoviz/lumen#1087).
    "azure-openai-reasoning": Profile(
        provider="Azure OpenAI deployment of a reasoning model",
        refusals=_OPENAI_REASONING_REFUSALS,
        reasoning="hidden",
        thinking_tokens=1536,
        cap=("max_completion_tokens",),
        details=True,
    ),
    # Anthropic's OpenAI SDK compatibility (docs.anthropic.com/en/api/openai-sdk): max_tokens and
    # max_completion_tokens "fully supported", n "must be exactly 1", reasoning_effort "ignored",
    # choices[] "will always have a length of 1", thinking not returned. Claude Opus 4.7+ refuse
    # temperature (github.com/UKGovernmentBEIS/inspect_ai/issues/3721). The compatibility
    # endpoint's body: github.com/yinzara/ha-config-ai-agent/issues/5 (code = type, param null).
    # The n message is not published: ours.
    "anthropic": Profile(
        provider="Anthropic OpenAI-compatible endpoint, Claude Opus 4.7+",
        errors="anthropic",
        refusals=(
            Refusal("temperature", "present", "`temperature` is deprecated for this model."),
            Refusal("n", "not_one", "n: must be exactly 1, got {value}"),
        ),
        reasoning="hidden",
    ),
    # Gemini's OpenAI compatibility (ai.google.dev/gemini-api/docs/openai): reasoning_effort maps
    # to the thinking level; its errors are a JSON list (github.com/suyiiyii/AutoGLM-GUI/issues/85;
    # the reasoning_effort message: discuss.ai.google.dev, "reasoning_effort minimal not working
    # for gemini 3 flash"); Gemini 3 refuses several candidates (googleapis/js-genai#1609); the
    # thinking spends max_tokens (BerriAI/litellm-docs#559: gemini 3.5 flash, 112 of 116).
    "gemini": Profile(
        provider="Gemini 3 through OpenAI compatibility",
        errors="gemini",
        refusals=(
            Refusal("n", "above_one", "Multiple candidates is not enabled for this model"),
            Refusal(
                "reasoning_effort",
                "not_in",
                "Invalid reasoning_effort: {raw}. Valid values are: high, low, medium, none",
                allowed=("none", "low", "medium", "high"),
            ),
        ),
        reasoning="hidden",
        thinking_tokens=1536,
        empty=None,
        details=True,
    ),
    # llama.cpp's llama-server (tools/server/server-common.cpp): n != 1 throws
    # std::runtime_error("Only one completion choice is allowed"), which ex_wrapper answers 500
    # server_error (only std::invalid_argument is a 400); bodies {code, message, type}
    # (format_error_response). server-context.cpp refuses a prompt of n_ctx tokens or more with
    # 400 exceed_context_size_error and sends 500 "Context size has been exceeded." when the
    # slot's cells run out while generating. n_ctx is per slot (/props
    # default_generation_settings.n_ctx; 8192 over 4 slots by default). The cap: n_predict,
    # else max_completion_tokens, else max_tokens (server-task.cpp). Newer builds take n up to
    # the slots (n_cmpl, alias n): this profile is the build that refuses it.
    "llamacpp": Profile(
        provider="llama.cpp llama-server",
        errors="llamacpp",
        refusals=(Refusal("n", "not_one", "Only one completion choice is allowed", status=500),),
        context="llamacpp",
        context_window=2048,
        total_slots=4,
    ),
    # Groq (console.groq.com/docs/openai, "OpenAI Compatibility"): "If N is supplied, it must be
    # equal to 1" (a 400); temperature 0 becomes 1e-8. Errors {message, type}, fields quoted as
    # 'n' : (github.com/posit-dev/chatlas/issues/25); reasoning_effort on a non-reasoning model:
    # github.com/iamsrikanthnani/pluely/issues/242.
    "groq": Profile(
        provider="Groq (llama-3.3-70b-versatile)",
        errors="groq",
        refusals=(
            Refusal("n", "above_one", "'n' : number must be at most 1"),
            Refusal(
                "reasoning_effort", "present", "`reasoning_effort` is not supported with this model"
            ),
        ),
    ),
    # Ollama (docs.ollama.com/api/openai-compatibility): n is not among the supported fields
    # (one choice back), max_tokens is; a prompt over num_ctx is truncated silently (the
    # prompt_tokens reported are num_ctx); /api/show gives model_info "<arch>.context_length"
    # and the Modelfile's parameters (num_ctx).
    "ollama": Profile(
        provider="Ollama",
        n="ignore",
        cap=("max_tokens",),
        context="ollama",
        context_window=4096,
    ),
    # OpenRouter: n ignored (github.com/OpenRouterArchived/openrouter-runner/issues/99); the
    # thinking in message.reasoning and usage (openrouter.ai/docs/use-cases/reasoning-tokens).
    "openrouter": Profile(
        provider="OpenRouter",
        n="ignore",
        reasoning="reasoning",
        thinking_tokens=256,
        details=True,
    ),
    # Mistral's reasoning models (docs.mistral.ai, "Reasoning": magistral-medium/small-latest
    # always think): content is a list of a thinking part and a text part
    # (github.com/spring-projects/spring-ai/issues/5019 shows the body).
    "mistral-reasoning": Profile(
        provider="Mistral Magistral",
        reasoning="parts",
        thinking_tokens=256,
    ),
    # DeepSeek (api-docs.deepseek.com/guides/reasoning_model): reasoning_content beside content;
    # max_tokens holds the chain of thought; temperature, top_p and the penalties are accepted
    # with no effect. n is not among its parameters: one choice back (our reading).
    "deepseek-reasoner": Profile(
        provider="DeepSeek deepseek-reasoner",
        n="ignore",
        reasoning="reasoning_content",
        thinking_tokens=768,
        cap=("max_tokens",),
        details=True,
    ),
    # vLLM with a reasoning parser (docs.vllm.ai, "Reasoning Outputs"): message.reasoning since
    # vllm-project/vllm#27752 (reasoning_content before; removed by #33402); n honoured.
    "vllm": Profile(provider="vLLM", reasoning="reasoning", thinking_tokens=256),
    # LM Studio (lmstudio.ai/docs, OpenAI compatibility endpoints): n is not among the supported
    # payload parameters; the thinking stays in content as <think> unless "separate
    # reasoning_content" is set (Mintplex-Labs/anything-llm#4267); reasoning_effort accepted
    # without effect (lmstudio-ai/lmstudio-bug-tracker#988).
    "lmstudio": Profile(
        provider="LM Studio",
        n="ignore",
        reasoning="think_tags",
        thinking_tokens=256,
    ),
}


def profile_named(name: str, options: dict | None = None) -> Profile:
    """The profile ``name`` with ``options`` (a subset of :data:`OPTIONS`) applied.

    Args:
        name: a key of :data:`PROFILES`.
        options: overrides, e.g. ``{"delay_s": 8}``.

    Returns:
        The profile.

    Raises:
        ValueError: an unknown profile or option, or an option of the wrong type.
    """
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}: one of {sorted(PROFILES)}")
    options = dict(options or {})
    unknown = set(options) - set(OPTIONS)
    if unknown:
        raise ValueError(f"unknown profile option(s) {sorted(unknown)}: one of {list(OPTIONS)}")
    for key, value in options.items():
        if key == "kv_unified":
            if not isinstance(value, bool):
                raise ValueError("profile option kv_unified must be true or false")
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"profile option {key} must be a non-negative number")
        if key != "delay_s" and not isinstance(value, int):
            raise ValueError(f"profile option {key} must be an integer")
    return replace(PROFILES[name], **options)


def request_refusal(profile: Profile, body: dict) -> tuple[int, Any] | None:
    """The provider's answer to a request body it refuses: the first refusal that applies.

    Args:
        profile: the model's profile.
        body: the chat-completions request body (already valid as a protocol).

    Returns:
        ``(HTTP status, error body)``, or None when the provider takes the request.
    """
    for r in profile.refusals:
        value = body.get(r.param)
        if value is None or not _applies(r, value):
            continue
        shown = f"'{value}'" if isinstance(value, str) else json.dumps(value)
        message = r.message.format(value=shown, raw=value)
        return r.status, error_body(profile, r.status, message, r.param, r.code)
    return None


def _applies(r: Refusal, value: Any) -> bool:
    """Whether refusal ``r`` applies to the value sent (not None)."""
    if r.when == "present":
        return True
    if r.when == "not_one":
        return value != 1
    if r.when == "above_one":
        return isinstance(value, (int, float)) and value > 1
    return value not in r.allowed  # "not_in"


def error_body(
    profile: Profile, status: int, message: str, param: str | None = None, code: str | None = None
) -> Any:
    """An error body in the profile's provider's shape (sources beside :data:`PROFILES`).

    Args:
        profile: whose shape.
        status: the HTTP status it goes with.
        message: the provider's message.
        param: the parameter at fault (OpenAI's ``param``).
        code: OpenAI's ``code``.

    Returns:
        The JSON body: an object, or for Gemini a list holding one.
    """
    kind = "invalid_request_error" if status < 500 else "server_error"
    if profile.errors == "anthropic":
        return {"error": {"code": kind, "message": message, "type": kind, "param": None}}
    if profile.errors == "gemini":
        return [{"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}]
    if profile.errors == "llamacpp":
        return {"error": {"code": status, "message": message, "type": kind}}
    if profile.errors == "groq":
        return {"error": {"message": message, "type": kind}}
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def context_refusal(profile: Profile, prompt_tokens: int, answer_tokens: int | None) -> Any:
    """llama.cpp's refusal of a request that does not fit the slot's context, else None.

    Args:
        profile: the model's profile (only ``context == "llamacpp"`` refuses).
        prompt_tokens: the prompt's tokens.
        answer_tokens: what the answer would generate; None before the answer is known (the
            prompt alone is checked: a 400), else prompt + answer past the window is a 500.

    Returns:
        ``(HTTP status, error body)`` or None.
    """
    window = profile.context_window
    if profile.context != "llamacpp" or window <= 0:
        return None
    if answer_tokens is None:
        if prompt_tokens < window:
            return None
        msg = (
            f"request ({prompt_tokens} tokens) exceeds the available context size "
            f"({window} tokens), try increasing it"
        )
        body = error_body(profile, 400, msg)
        body["error"].update(type="exceed_context_size_error", n_prompt_tokens=prompt_tokens)
        body["error"]["n_ctx"] = window
        return 400, body
    if prompt_tokens + answer_tokens <= window:
        return None
    return 500, error_body(profile, 500, "Context size has been exceeded.")


def output_cap(profile: Profile, body: dict) -> int | None:
    """The output cap the provider reads from the request (its first key present), or None."""
    for key in profile.cap:
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def shaped_answer(
    profile: Profile, messages: list[dict], body: dict, answer: str, n: int
) -> tuple[list[dict], dict]:
    """The choices and usage of a scripted answer as the provider shapes them.

    Args:
        profile: the model's profile.
        messages: the request's messages (for prompt tokens).
        body: the request body (the output cap).
        answer: the scripted answer (the SQL).
        n: the choices asked for.

    Returns:
        ``(choices, usage)``: n choices (one where the provider ignores n), each message's
        content, reasoning fields and finish_reason; usage with reasoning tokens where the
        provider reports them.
    """
    choices_n = 1 if profile.n == "ignore" else n
    prompt_tokens, answer_tokens = count_usage(messages, answer, 1)
    if profile.context == "ollama" and profile.context_window > 0:
        prompt_tokens = min(prompt_tokens, profile.context_window)  # truncated, silently
    thinking = profile.thinking_tokens if profile.reasoning != "none" else 0
    cap = output_cap(profile, body)
    cut = thinking > 0 and cap is not None and cap < thinking + answer_tokens
    message = _message(profile, answer, cut)
    spent = cap if cut else thinking + answer_tokens
    choices = [
        {
            "index": i,
            "message": dict(message),
            "logprobs": None,
            "finish_reason": "length" if cut else "stop",
        }
        for i in range(choices_n)
    ]
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": spent * choices_n,
        "total_tokens": prompt_tokens + spent * choices_n,
    }
    if profile.details:
        reasoning_tokens = min(cap, thinking) if cut else thinking
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens * choices_n}
    return choices, usage


def _message(profile: Profile, answer: str, cut: bool) -> dict:
    """The assistant message: content as the provider shapes it, and its reasoning field."""
    kind = profile.reasoning
    content: Any = profile.empty if cut else answer
    message: dict = {"role": "assistant"}
    if kind in ("reasoning_content", "reasoning"):
        message[kind] = REASONING_TEXT
    elif kind == "think_tags":
        content = f"<think>\n{REASONING_TEXT}" + ("" if cut else f"\n</think>\n\n{answer}")
    elif kind == "parts":
        content = [{"type": "thinking", "thinking": [{"type": "text", "text": REASONING_TEXT}]}]
        if not cut:
            content.append({"type": "text", "text": answer})
    message["content"] = content
    return message


def llamacpp_props(profile: Profile, model: str) -> dict:
    """llama-server's ``GET /props`` (tools/server/README.md, "GET /props"): the slot's context
    and the slots, as the server was started.

    Args:
        profile: the llama.cpp profile of the served model.
        model: the model's name.

    Returns:
        The body.
    """
    return {
        "default_generation_settings": {
            "n_ctx": profile.context_window,
            "params": {"n_predict": -1, "temperature": 0.8},
        },
        "total_slots": profile.total_slots,
        "model_path": f"/models/{model}.gguf",
        "chat_template": "(scripted loopback server, not a model)",
        "build_info": "loopback",
    }


def ollama_show(profile: Profile, model: str) -> dict:
    """Ollama's ``POST /api/show`` (docs.ollama.com/api, "Show model details"): the model's
    trained context in ``model_info`` and the Modelfile's ``num_ctx`` in ``parameters``.

    Args:
        profile: the Ollama profile of the model.
        model: the model's name.

    Returns:
        The body.
    """
    return {
        "modelfile": f"FROM {model}\nPARAMETER num_ctx {profile.context_window}\n",
        "parameters": f"num_ctx                        {profile.context_window}",
        "template": "{{ .Prompt }}",
        "details": {"format": "gguf", "family": "llama", "parameter_size": "8.0B"},
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
        "capabilities": ["completion"],
    }
