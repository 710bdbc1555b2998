"""The script of the loopback server: rules, replays and the reply each request gets.

Its answers are SCRIPTED, NOT A MODEL'S (see :mod:`nl2sql_indexer.dev.loopback`). This module
holds what a request is matched against and what a match answers: :class:`Rule`, the question
a pipeline prompt carries (:func:`extract_question`), the validation of rules and replays sent
as JSON, and :class:`Reply` (what the HTTP handler does for one chat request).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, fields
from typing import Any

from nl2sql.model.prompts import QUESTION_MARKER  # a prompt ends with it, the question and */
from nl2sql.model.tokens import count

__all__ = [
    "QUESTION_MARKER",
    "Reply",
    "Rule",
    "content_text",
    "count_usage",
    "count_words",
    "extract_question",
    "is_loopback_host",
    "last_user_text",
    "normalize",
    "replay_from_dict",
    "rule_from_dict",
    "rule_matches",
    "rule_reply",
]


def extract_question(prompt: str) -> str | None:
    """Return the question in a pipeline prompt, or None if the prompt has no marker.

    The question is the text after the LAST occurrence of :data:`QUESTION_MARKER` up to the
    next ``*/`` (or the end of the text if there is none), stripped of surrounding whitespace.
    """
    if not isinstance(prompt, str):
        return None
    i = prompt.rfind(QUESTION_MARKER)
    if i < 0:
        return None
    rest = prompt[i + len(QUESTION_MARKER) :]
    j = rest.find("*/")
    if j >= 0:
        rest = rest[:j]
    return rest.strip()


def normalize(text: str) -> str:
    """Collapse runs of whitespace and case-fold (for lenient question matching)."""
    return " ".join(text.split()).casefold()


def count_words(text: str) -> int:
    """Whitespace-separated words of ``text``."""
    return len(text.split())


def count_usage(messages: list[dict], content: str, n: int) -> tuple[int, int]:
    """The ``usage`` a real OpenAI endpoint would report: prompt tokens (each message's content
    in cl100k_base plus OpenAI's 3 tokens per message and 3 priming the reply) and completion
    tokens (``n`` copies of ``content``), with nl2sql's tokenizer (``model.tokens.count``;
    characters / 3.5 where tiktoken is not installed).

    Args:
        messages: the request's chat messages.
        content: the scripted answer.
        n: choices returned.

    Returns:
        ``(prompt_tokens, completion_tokens)``.
    """
    prompt = 3 + sum(3 + count(content_text(m.get("content")), "gpt-4")[0] for m in messages)
    return prompt, count(content, "gpt-4")[0] * n


def content_text(content: Any) -> str:
    """Text of a message's content: a string, or a list of content parts (text parts joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)


def last_user_text(messages: list[dict]) -> str | None:
    """Text of the last message whose role is ``user``; None if there is none."""
    for msg in reversed(messages):
        if msg.get("role") == "user":
            return content_text(msg.get("content"))
    return None


def is_loopback_host(host: str) -> bool:
    """True if ``host`` is ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if not isinstance(host, str) or not host:
        return False
    h = host.strip()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    if h.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


@dataclass
class Rule:
    """One scripted answer: when a request matches, answer with ``response`` (or an error).

    All match fields that are not None must hold: ``model`` equals the request's model,
    ``contains`` occurs in the last user message, ``question`` equals
    :func:`extract_question` of the last user message. Rules are tried in insertion order;
    the first match wins. ``times`` limits how often a rule may match (then it is skipped).
    ``status`` != 200 answers with an OpenAI-style JSON error (``response`` is its message, if
    given). ``hang`` never answers: the handler waits until the server stops (at most an hour),
    so the client must time out. ``trickle_s`` > 0 sends the answer's body one byte at a time
    with that pause before each byte (a slow endpoint that never trips a per-read timeout);
    it stops when the server stops or the client goes away.
    """

    model: str | None = None
    contains: str | None = None
    question: str | None = None
    response: str = ""
    delay_s: float = 0.0
    status: int = 200
    hang: bool = False
    times: int | None = None
    trickle_s: float = 0.0
    # False: the answer carries no ``usage`` (as some endpoints send); a dict: that ``usage``,
    # as sent whatever it holds (an endpoint's broken bookkeeping: negative, huge, text counts)
    usage: bool | dict = True


_RULE_FIELDS = {f.name for f in fields(Rule)}


def rule_from_dict(d: Any) -> Rule:
    """Build and validate a Rule from a JSON object; ValueError on anything malformed."""
    if not isinstance(d, dict):
        raise ValueError("a rule must be a JSON object")
    unknown = set(d) - _RULE_FIELDS
    if unknown:
        raise ValueError(f"unknown rule field(s): {sorted(unknown)}")
    rule = Rule(**d)
    for name in ("model", "contains", "question"):
        v = getattr(rule, name)
        if v is not None and not isinstance(v, str):
            raise ValueError(f"rule.{name} must be a string or null")
    if not isinstance(rule.response, str):
        raise ValueError("rule.response must be a string")
    if (
        isinstance(rule.delay_s, bool)
        or not isinstance(rule.delay_s, (int, float))
        or rule.delay_s < 0
    ):
        raise ValueError("rule.delay_s must be a non-negative number")
    if (
        isinstance(rule.status, bool)
        or not isinstance(rule.status, int)
        or not 100 <= rule.status <= 599
    ):
        raise ValueError("rule.status must be an HTTP status code")
    if (
        isinstance(rule.trickle_s, bool)
        or not isinstance(rule.trickle_s, (int, float))
        or rule.trickle_s < 0
    ):
        raise ValueError("rule.trickle_s must be a non-negative number")
    if not isinstance(rule.hang, bool):
        raise ValueError("rule.hang must be a boolean")
    if not isinstance(rule.usage, (bool, dict)):
        raise ValueError("rule.usage must be a boolean or a usage object")
    if rule.times is not None and (
        isinstance(rule.times, bool) or not isinstance(rule.times, int) or rule.times < 0
    ):
        raise ValueError("rule.times must be a non-negative integer or null")
    return rule


class Reply:
    """What the handler should do for one chat request."""

    __slots__ = ("status", "content", "message", "code", "delay_s", "hang", "trickle_s", "usage")

    def __init__(
        self,
        status=200,
        content="",
        message="",
        code=None,
        delay_s=0.0,
        hang=False,
        trickle_s=0.0,
        usage=True,
    ):
        self.usage = usage
        self.trickle_s = trickle_s
        self.status = status
        self.content = content
        self.message = message
        self.code = code
        self.delay_s = delay_s
        self.hang = hang


def replay_from_dict(body: Any) -> tuple[str, dict[str, str], float]:
    """Validate a replay object {"model", "answers", "delay_s"?}; ValueError if malformed."""
    if not isinstance(body, dict):
        raise ValueError(
            'expected {"model": str, "answers": {question: answer}, "delay_s": number}'
        )
    unknown = set(body) - {"model", "answers", "delay_s"}
    if unknown:
        raise ValueError(f"unknown replay field(s): {sorted(unknown)}")
    model = body.get("model")
    answers = body.get("answers")
    delay_s = body.get("delay_s", 0.0) or 0.0
    if not isinstance(model, str) or not model:
        raise ValueError("replay 'model' must be a non-empty string")
    if not isinstance(answers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in answers.items()
    ):
        raise ValueError(
            "replay 'answers' must be an object mapping question strings to answer strings"
        )
    if isinstance(delay_s, bool) or not isinstance(delay_s, (int, float)) or delay_s < 0:
        raise ValueError("replay 'delay_s' must be a non-negative number")
    return model, answers, float(delay_s)


def rule_matches(
    rule: Rule, remaining: int | None, model: str, user: str | None, question: str | None
) -> bool:
    """Whether a rule with uses left applies to this model, user message and question."""
    if remaining is not None and remaining <= 0:
        return False
    if rule.model is not None and rule.model != model:
        return False
    if rule.contains is not None and (user is None or rule.contains not in user):
        return False
    return rule.question is None or rule.question == question


def rule_reply(rule: Rule) -> Reply:
    """What a matched rule answers: a hang, a scripted HTTP error, or its response."""
    if rule.hang:
        return Reply(hang=True)
    if rule.status != 200:
        msg = rule.response or f"scripted error (HTTP {rule.status}) from the loopback server"
        return Reply(status=rule.status, message=msg, delay_s=rule.delay_s)
    return Reply(
        content=rule.response,
        delay_s=rule.delay_s,
        trickle_s=float(rule.trickle_s),
        usage=rule.usage,
    )
