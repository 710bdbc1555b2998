"""Reading a chat-completions reply whatever its shape: ``content`` as a string, a list of parts
(text kept; thinking and anything else left out) or null; reasoning in ``reasoning`` /
``reasoning_content`` fields never read as the answer; ``usage`` with
``completion_tokens_details.reasoning_tokens``, kept only when its counts are sane."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_TOKENS_SANE = 10**9  # a count beyond this (or below 0) is the endpoint's bookkeeping error


@dataclass
class Read:
    """What one response held."""

    texts: list[str] = field(default_factory=list)  # each choice's answer text, empty ones left out
    choices: int = 0  # choices the endpoint returned
    cut: bool = False  # no answer text and some choice ended on ``finish_reason`` "length"
    prompt_tokens: int = 0
    completion_tokens: int = 0  # reasoning included (as the providers count it)
    reasoning_tokens: int = 0
    usage_note: str | None = None  # why the endpoint's usage was not taken
    # the server's own time reading the prompt and writing the answer (llama.cpp's
    # ``timings.prompt_ms + predicted_ms``), ms; None where the server does not say
    server_ms: float | None = None


def _get(obj, name: str):
    """``obj[name]`` for a dict, else ``obj.name``; None when absent."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def content_text(content) -> str | None:
    """The answer text of a message's ``content``.

    Args:
        content: a string; a list of parts (``{"type": "text", "text": …}`` kept;
            ``thinking``, ``reasoning``, images and unknown parts left out — Mistral's reasoning
            models answer so); None.

    Returns:
        The text (parts joined), or None when there is none.
    """
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif _get(part, "type") in ("text", "output_text") and isinstance(
                _get(part, "text"), str
            ):
                parts.append(_get(part, "text"))
        return "".join(parts) or None
    return None


def _count(value) -> int | None:
    """A token count as reported, or None when it is no sane count."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_TOKENS_SANE else None


def read(resp) -> Read:
    """Read one chat-completions response (the openai client's object or a dict).

    Args:
        resp: the response.

    Returns:
        The ``Read``: answer texts, choice count, whether the budget cut it, usage.
    """
    out = Read()
    choices = _get(resp, "choices") or []
    if not isinstance(choices, list):
        choices = []
    out.choices = len(choices)
    reasons = []
    for ch in choices:
        message = _get(ch, "message")
        text = content_text(_get(message, "content")) if message is not None else None
        if text and text.strip():
            out.texts.append(text)
        reasons.append(_get(ch, "finish_reason"))
    out.cut = not out.texts and "length" in reasons
    _read_usage(out, _get(resp, "usage"))
    out.server_ms = _server_ms(_get(resp, "timings"))
    return out


def _server_ms(timings) -> float | None:
    """llama.cpp's ``timings`` (``prompt_ms``, ``predicted_ms``) as one figure, or None."""
    try:
        total = float(_get(timings, "prompt_ms")) + float(_get(timings, "predicted_ms"))
    except (TypeError, ValueError):
        return None
    return total if 0 <= total < 1e9 else None


def _read_usage(out: Read, usage) -> None:
    """Fill ``out``'s token counts from ``usage``; an absent or insane one leaves 0 (counted
    locally by ``tokens.account``) and says why in ``usage_note``."""
    if usage is None:
        return
    p, c = _count(_get(usage, "prompt_tokens")), _count(_get(usage, "completion_tokens"))
    if p is None or c is None:
        out.usage_note = (
            f"the endpoint's usage was not sane (prompt_tokens {_get(usage, 'prompt_tokens')!r}, "
            f"completion_tokens {_get(usage, 'completion_tokens')!r}): counted here instead"
        )[:300]
        return
    out.prompt_tokens, out.completion_tokens = p, c
    details = _get(usage, "completion_tokens_details")
    r = _count(_get(details, "reasoning_tokens")) if details is not None else None
    out.reasoning_tokens = min(r or 0, c)
