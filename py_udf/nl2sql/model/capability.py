"""What each configured model's endpoint takes: the output-cap parameter, temperature, ``n``,
``reasoning_effort``, the output budget and the context window — configured, known from the
model name, or learned from the endpoint's own refusals and kept per process
(docs/models.md "What nl2sql learns"; docs/internals/model.md "Capabilities")."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode, urlsplit

from ..core.types import ModelConfig
from ..net import deadline, fetch

__all__ = [
    "Capability",
    "adopt",
    "Fix",
    "KNOWN",
    "decide",
    "fix_for",
    "forget",
    "forget_windows",
    "learn",
    "learned",
    "remember_window",
    "request_args",
    "server_facts",
    "window_of",
    "local_server",
]

MAX_TOKENS, MAX_COMPLETION_TOKENS = "max_tokens", "max_completion_tokens"
PLAIN_CAP = 512  # the output budget of a model that does not think (one SQL query)


@dataclass(frozen=True)
class Known:
    """What a family of model names is known to take (from its provider's documentation)."""

    pattern: str  # matched against the model id after its last '/' (OpenRouter's 'openai/gpt-5')
    provider: str  # whose documentation says so (docs/models.md)
    cap_parameter: str = MAX_TOKENS
    send_temperature: bool = True
    send_n: bool = True
    reasoning: bool = False  # thinks before answering: needs the reasoning budget
    reasoning_effort: str | None = None  # sent unless configured otherwise


# fmt: off
KNOWN: tuple[Known, ...] = (
    # OpenAI reasoning models: 'max_tokens' refused, only the default temperature (1)
    Known(r"o[1-9](-|$)", "OpenAI o-series", MAX_COMPLETION_TOKENS, False, True, True, "low"),
    Known(r"gpt-5(?!.*-chat)", "OpenAI GPT-5", MAX_COMPLETION_TOKENS, False, True, True, "low"),
    Known(r"gpt-", "OpenAI GPT"),
    # Anthropic's OpenAI compatibility: n must be 1; Opus 4.7 and later refuse temperature
    Known(r"claude-opus-(4-[7-9]|[5-9])", "Anthropic", MAX_TOKENS, False, False),
    Known(r"claude-", "Anthropic", MAX_TOKENS, True, False),
    # Gemini's OpenAI compatibility: thinking on by default; one candidate per request
    Known(r"gemini-(2\.5|[3-9])", "Google Gemini", MAX_TOKENS, True, False, True, "low"),
    Known(r"gemini-", "Google Gemini", MAX_TOKENS, True, False),
    Known(r"deepseek-reasoner", "DeepSeek", MAX_TOKENS, False, True, True),
    Known(r"magistral-", "Mistral", MAX_TOKENS, True, True, True),
    Known(r"(qwq|deepseek-r1|qwen3)", "open reasoning model", MAX_TOKENS, True, True, True),
)
# fmt: on


@dataclass
class Capability:
    """The request shape for one model, and where each part of it comes from.

    ``source`` maps a field name to ``configured``, ``model name (<provider>)``, ``learned:
    <what the endpoint said>`` or ``default``.
    """

    cap_parameter: str = MAX_TOKENS
    max_output: int = PLAIN_CAP  # the output cap, tokens
    send_temperature: bool = True
    send_n: bool = True
    reasoning: bool = False
    reasoning_effort: str | None = None
    context_window: int | None = (
        None  # tokens the endpoint holds, prompt and answer (None: unknown)
    )
    source: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Fix:
    """One change to a request that an endpoint's refusal asks for."""

    field: str  # a ``Capability`` field
    value: object
    why: str  # the endpoint's words, shortened


_LOCK = threading.Lock()
# (endpoint, model, revision of its row) → field → (value, why): add_model again starts afresh
_LEARNED: dict[tuple[str, str, str], dict[str, tuple[object, str]]] = {}


def _key(cfg: ModelConfig) -> tuple[str, str, str]:
    return (cfg.endpoint, cfg.model, cfg.revision)


def known_for(model: str) -> Known | None:
    """The ``KNOWN`` row of a model id (after its last '/'), or None.

    Args:
        model: the model id sent to the endpoint (``gpt-5-mini``, ``openai/o3``, a deployment name).

    Returns:
        The first matching row, or None when the name says nothing.
    """
    name = (model or "").rsplit("/", 1)[-1].lower()
    for row in KNOWN:
        if re.match(row.pattern, name):
            return row
    return None


def decide(cfg: ModelConfig) -> Capability:
    """The request shape for a model: configured overrides, then what this process learned from
    the endpoint, then the model name's row of ``KNOWN``, then the defaults.

    Args:
        cfg: the model (its ``None`` fields mean "decide"; ``reasoning_max_tokens`` is the
            budget of a model that thinks).

    Returns:
        The ``Capability``, with ``source`` naming where each field came from.
    """
    cap = Capability()
    row = known_for(cfg.model)
    if row is not None:
        by_name = f"model name ({row.provider})"
        for f in ("cap_parameter", "send_temperature", "send_n", "reasoning", "reasoning_effort"):
            setattr(cap, f, getattr(row, f))
            cap.source[f] = by_name
    with _LOCK:
        for f, (value, why) in _LEARNED.get(_key(cfg), {}).items():
            setattr(cap, f, value)
            cap.source[f] = f"learned: {why}"
    if cap.reasoning or cfg.reasoning_effort:
        cap.reasoning = True
        cap.max_output = max(cfg.reasoning_max_tokens, cap.max_output)
    _configured(cfg, cap)
    return cap


def _configured(cfg: ModelConfig, cap: Capability) -> None:
    """Apply what ``add_model`` set (not None) over ``cap``, recording ``configured``."""
    overrides = {
        "cap_parameter": cfg.cap_parameter,
        "max_output": cfg.max_tokens,
        "send_temperature": cfg.send_temperature,
        "send_n": cfg.send_n,
        "reasoning_effort": cfg.reasoning_effort or None,
        "context_window": cfg.context_window,
    }
    learned_cap = cap.source.get("max_output", "").startswith("learned")
    for f, value in overrides.items():
        if value is None or (f == "max_output" and learned_cap and value < cap.max_output):
            continue
        setattr(cap, f, value)
        cap.source[f] = "configured"
    if cfg.reasoning_effort == "":  # configured as '' : never send it
        cap.reasoning_effort = None
        cap.source["reasoning_effort"] = "configured"
    for f in ("cap_parameter", "max_output", "send_temperature", "send_n", "reasoning_effort"):
        cap.source.setdefault(f, "default")


def server_facts(cap: Capability, how: str) -> None:
    """Apply what the kind of server (``window_of``'s ``how``) says: a llama.cpp server takes
    ``n`` only up to its slots and its ``usage`` then counts one choice, so its samples go as
    separate requests unless ``add_model`` says otherwise.

    Args:
        cap: the capability, changed in place; how: where the window came from.
    """
    if how.startswith("llama.cpp") and cap.send_n and cap.source.get("send_n") != "configured":
        cap.send_n = False
        cap.source["send_n"] = "server: llama.cpp counts one choice of n in usage"


def request_args(cap: Capability, n: int, temperature: float | None) -> dict:
    """The chat-completions parameters ``cap`` says to send (besides model and messages).

    Args:
        cap: the model's capability.
        n: samples asked of this request (sent only when more than 1 and ``send_n``).
        temperature: the sampling temperature (sent only when ``send_temperature``).

    Returns:
        e.g. ``{"max_completion_tokens": 8192, "reasoning_effort": "low"}``.
    """
    args: dict = {cap.cap_parameter: int(cap.max_output)}
    if cap.send_temperature and temperature is not None:
        args["temperature"] = temperature
    if n > 1 and cap.send_n:
        args["n"] = n
    if cap.reasoning_effort:
        args["reasoning_effort"] = cap.reasoning_effort
    return args


# What an endpoint's 400 names, and the change it asks for. A parameter is named by the error's
# ``param`` field (OpenAI, Azure, vLLM) or in its message (the others); messages seen in the
# providers' documentation and servers: docs/models.md.
_NAMED = (
    (MAX_TOKENS, re.compile(r"max_tokens\b")),
    (MAX_COMPLETION_TOKENS, re.compile(r"max_completion_tokens")),
    ("reasoning_effort", re.compile(r"reasoning_effort|reasoning effort")),
    ("temperature", re.compile(r"temperature")),
    ("n", re.compile(r"(\bn\b.{0,40}(must|only|supported|1))|completion choice|candidate_?count")),
)


def fix_for(message: str, param: str | None, cap: Capability, sent: dict) -> Fix | None:
    """The change an endpoint's refusal (HTTP 400/422) asks for, or None when it names no
    parameter this layer can change.

    Args:
        message: the endpoint's error message.
        param: the error body's ``param`` field, when it has one.
        cap: the capability the refused request was made with.
        sent: the parameters that request sent (``request_args``).

    Returns:
        The ``Fix``: the other output-cap parameter, or stop sending ``temperature``, ``n`` or
        ``reasoning_effort``.
    """
    named = param if param in sent else None
    if named is None:
        for name, pattern in _NAMED:
            if name in sent and pattern.search(message or ""):
                named = name
                break
    why = f"{named} refused ({' '.join((message or '').split())[:120]})"
    if named == MAX_TOKENS:
        return Fix("cap_parameter", MAX_COMPLETION_TOKENS, why)
    if named == MAX_COMPLETION_TOKENS:
        return Fix("cap_parameter", MAX_TOKENS, why)
    if named == "temperature":
        return Fix("send_temperature", False, why)
    if named == "n":
        return Fix("send_n", False, why)
    if named == "reasoning_effort":
        return Fix("reasoning_effort", None, why)
    return None


def learn(cfg: ModelConfig, cap: Capability, fix: Fix) -> Capability:
    """Apply a ``Fix`` to ``cap`` and remember it for this model in this process.

    Args:
        cfg: the model.
        cap: its capability for the current call.
        fix: the change.

    Returns:
        The changed capability (a new object).
    """
    with _LOCK:
        _LEARNED.setdefault(_key(cfg), {})[fix.field] = (fix.value, fix.why)
    out = replace(cap, source=dict(cap.source))
    setattr(out, fix.field, fix.value)
    if fix.field == "max_output":
        out.reasoning = True
        out.source["reasoning"] = f"learned: {fix.why}"
    out.source[fix.field] = f"learned: {fix.why}"
    return out


def learned() -> list[dict]:
    """What this process learned, per model.

    Returns:
        ``[{"endpoint", "model", "revision", "learned": {field: {"value", "why"}}}]``.
    """
    with _LOCK:
        return [
            {
                "endpoint": endpoint,
                "model": model,
                "revision": revision,
                "learned": {f: {"value": v, "why": w} for f, (v, w) in fields.items()},
            }
            for (endpoint, model, revision), fields in _LEARNED.items()
        ]


def adopt(entries: list[dict]) -> None:
    """Take what another process learned into this one's memory (what it learned itself is kept).

    Args:
        entries: ``learned``'s shape (the shared process's, for ``doctor()``).
    """
    with _LOCK:
        for e in entries:
            key = (str(e.get("endpoint")), str(e.get("model")), str(e.get("revision") or ""))
            mine = _LEARNED.setdefault(key, {})
            for f, got in (e.get("learned") or {}).items():
                if f in Capability.__dataclass_fields__ and isinstance(got, dict):
                    mine.setdefault(f, (got.get("value"), str(got.get("why"))))


def forget(cfg: ModelConfig | None = None) -> None:
    """Forget what was learned.

    Args:
        cfg: the model, or None for every model.
    """
    with _LOCK:
        if cfg is None:
            _LEARNED.clear()
        else:
            _LEARNED.pop(_key(cfg), None)


# --- the context window: where the server says it ------------------------------------------
# llama.cpp's GET /props (default_generation_settings.n_ctx: one slot's window, the server's
# --ctx-size divided among its --parallel slots) and Ollama's POST /api/show (num_ctx of the
# model's parameters, else Ollama's default context, at most the model's context_length).

PROBE_TIMEOUT_S = 2.0
OLLAMA_DEFAULT_CTX = 4096  # Ollama's documented default context (OLLAMA_CONTEXT_LENGTH)

_WIN_LOCK = threading.Lock()
_WINDOWS: dict[tuple[str, str, str], tuple[int | None, str]] = {}  # _key → (tokens, how)


def _root(base_url: str) -> str:
    """The server's root for a base URL ending in ``/v1`` (llama.cpp and Ollama serve their own
    paths beside the OpenAI ones)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def _from_props(body: dict) -> int | None:
    """llama.cpp's per-slot window from a ``/props`` body, or None."""
    settings = body.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    if n_ctx is None:
        n_ctx = body.get("n_ctx")
    return int(n_ctx) if isinstance(n_ctx, int) and n_ctx > 0 else None


def _from_show(body: dict) -> int | None:
    """Ollama's effective window from an ``/api/show`` body, or None."""
    info = body.get("model_info")
    if not isinstance(info, dict):
        return None
    trained = [v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int)]
    for line in str(body.get("parameters") or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "num_ctx" and parts[1].isdigit():
            return int(parts[1])
    return min([OLLAMA_DEFAULT_CTX, *trained])


def _get_json(url: str, body: dict | None, seconds: float) -> tuple[int, object]:
    """One probe request under an overall deadline of ``seconds`` (``net.fetch``: the standard
    library's HTTP; a cancel lands within a slice): ``(status, JSON body or None)``; an HTTP
    error status is returned, not raised."""
    path = urlsplit(url).path
    return fetch.fetch_json(url, body, seconds, f"the context-window probe ({path})")


def _ask(cfg: ModelConfig) -> tuple[int | None, str]:
    """Ask the server (llama.cpp first, then Ollama), both paths within one budget of
    ``PROBE_TIMEOUT_S`` (at most the model's ``timeout_s``); ``(None, why)`` when neither
    answers."""
    root = _root(cfg.base_url or "")
    end = time.monotonic() + min(PROBE_TIMEOUT_S, cfg.timeout_s or PROBE_TIMEOUT_S)
    try:
        # ?model=: llama-server's router mode answers for that model (one model: ignored)
        url = f"{root}/props?{urlencode({'model': cfg.model})}"
        status, got = _get_json(url, None, end - time.monotonic())
        if status == 200 and isinstance(got, dict):
            n = _from_props(got)
            if n:
                return n, "llama.cpp GET /props (n_ctx of one slot)"
        if end - time.monotonic() > 0.05:
            status, got = _get_json(
                f"{root}/api/show", {"model": cfg.model}, end - time.monotonic()
            )
            if status == 200 and isinstance(got, dict):
                n = _from_show(got)
                if n:
                    return n, "Ollama POST /api/show (num_ctx)"
    except Exception as e:  # noqa: BLE001 - no window is an answer: the call itself reports
        deadline.raise_cancel(e)
        return None, f"not asked: {type(e).__name__}"
    return None, "the server does not say"


def window_of(cfg: ModelConfig) -> tuple[int | None, str]:
    """The context window of a model's endpoint, in tokens.

    Configured (``add_model(context_window => …)``) first; a model whose name ``capability.KNOWN``
    knows (a provider's hosted model) or with no ``base_url`` is not asked; otherwise the
    server is asked once per process, both paths within ``PROBE_TIMEOUT_S`` (at most the
    model's ``timeout_s``; a cancel lands within ``net.deadline.SLICE_S``).

    Args:
        cfg: the model.

    Returns:
        ``(tokens or None, how it is known)``.
    """
    if cfg.context_window:
        return cfg.context_window, "configured"
    if not cfg.base_url or known_for(cfg.model) is not None:
        return None, "hosted model: not asked"
    key = _key(cfg)
    with _WIN_LOCK:
        if key in _WINDOWS:
            return _WINDOWS[key]
    got = _ask(cfg)
    with _WIN_LOCK:
        _WINDOWS[key] = got
    return got


LOCAL_SERVERS = ("llama.cpp", "Ollama")
"""Servers that run a model on the user's own hardware, known by the endpoint that stated the
window (``window_of``'s ``how``): they read a prompt at tens to hundreds of tokens a second on
a CPU and keep the prefix they last read (docs/models.md, llama.cpp: "A small model on the
database's own CPU")."""


def local_server(cfg: ModelConfig) -> str | None:
    """The kind of local server that serves a model, from what its server said of its window.

    Args:
        cfg: the model (``window_of`` asks its server once per process).

    Returns:
        ``"llama.cpp"`` or ``"Ollama"``; None for any other endpoint, one whose window is
        configured (not asked) or one that does not say.
    """
    window, how = window_of(cfg)
    return next((k for k in LOCAL_SERVERS if window and how.startswith(k)), None)


def remember_window(cfg: ModelConfig, tokens: int, how: str) -> None:
    """Keep a window learned another way.

    Args:
        cfg: the model; tokens: its window; how: where it was learned (a server's refusal that
            states its ``n_ctx``).
    """
    with _WIN_LOCK:
        _WINDOWS[_key(cfg)] = (tokens, how)


def forget_windows() -> None:
    """Forget every window (tests; a server restarted with another ``--ctx-size``)."""
    with _WIN_LOCK:
        _WINDOWS.clear()
