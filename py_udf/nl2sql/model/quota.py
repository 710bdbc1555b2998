"""Per-role quotas and usage: the check before a question and before its first model request
(``nl2sql._quota_take``), and what a call used, added to the role's day (``nl2sql._usage_add``);
docs/guardrails.md "Quotas"."""

from __future__ import annotations

import json
from typing import Any

from ..core import spi
from ..core.errors import QuotaExceeded
from ..core.types import LLMReply

__all__ = ["QUESTION", "TOKENS", "message", "record", "take", "usage_of"]

QUESTION = "question"  # the questions_per_minute check; the question is counted
TOKENS = "tokens"  # the tokens_per_day check, before the first model request

_TAKE = "SELECT nl2sql._quota_take(current_user, $1)::text AS q"
_ADD = "SELECT nl2sql._usage_add(current_user, $1, $2, $3, $4, $5::numeric) AS ok"
_WHAT = {
    "questions_per_minute": ("questions this minute", "questions"),
    "tokens_per_day": ("tokens today (UTC)", "tokens"),
}


def message(q: dict[str, Any]) -> str:
    """The error of a refused quota check: the limit, the use so far, when it resets.

    Args:
        q: ``nl2sql._quota_take``'s answer with ``refused`` set.

    Returns:
        The message (it says nothing was sent to a model, and how a DBA raises the limit).
    """
    limit = q["refused"]
    span, unit = _WHAT[limit]
    whose = "the default quota (role public)" if q.get("quota_of") == "public" else "its quota"
    return (
        f"nl2sql: role {q['role']} is over {limit} = {q['limit']} of {whose}: "
        f"{q['used']} {span}; it resets at {q['resets_at']}. Nothing was sent to a model. "
        f"A DBA raises it with SELECT nl2sql.set_quota('{q['role']}', {limit} => ...)"
        f" (nl2sql.usage shows the {unit} used)"
    )


def take(plpy, kind: str) -> dict[str, Any]:
    """Check the calling role's quota (``kind`` ``question`` also counts the question).

    A role with a quota holds its usage row locked until the transaction ends, so that a
    second session of the role waits here and then sees this one's count.

    Args:
        kind: ``QUESTION`` or ``TOKENS``.

    Returns:
        ``{"role", "limited", "counted", "replica"}``: ``counted`` when the question was
        counted here (a role with a quota, on a primary).

    Raises:
        QuotaExceeded: over a limit (``message``); nothing is counted.
    """
    q = json.loads(spi.query(plpy, _TAKE, [kind], ["text"])[0]["q"])
    if q.get("refused"):
        raise QuotaExceeded(message(q))
    return q


def usage_of(replies: list[LLMReply], extra: list[dict] = ()) -> dict[str, Any]:
    """The tokens and cost of a call's model requests, in total and per model.

    Args:
        replies: the requests' replies (``tokens.account`` filled them).
        extra: further requests as dicts (``model``, ``prompt_tokens``, ``completion_tokens``,
            ``tokens_source``, ``cost_usd``): the repair rounds'.

    Returns:
        ``{"prompt", "completion" (reasoning included, as the providers count it), "reasoning",
        "total", "estimated" (tokens only estimated),
        "cost_usd" (None when no model has a price), "sources", "by_model": {name: {"calls",
        "prompt", "completion", "cost_usd"}}}``.
    """
    calls = [
        {
            "model": r.model,
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.completion_tokens,
            "tokens_source": r.tokens_source,
            "cost_usd": r.cost_usd,
            "reasoning_tokens": r.reasoning_tokens,
        }
        for r in replies
    ] + list(extra)
    out: dict[str, Any] = {
        "prompt": 0,
        "completion": 0,
        "reasoning": 0,
        "estimated": 0,
        "cost_usd": None,
    }
    by_model: dict[str, dict[str, Any]] = {}
    sources = set()
    for c in calls:
        p, o = int(c["prompt_tokens"] or 0), int(c["completion_tokens"] or 0)
        m = by_model.setdefault(
            c["model"], {"calls": 0, "prompt": 0, "completion": 0, "cost_usd": None}
        )
        m["calls"] += 1
        m["prompt"] += p
        m["completion"] += o
        out["prompt"] += p
        out["completion"] += o
        out["reasoning"] += int(c.get("reasoning_tokens") or 0)
        if c.get("tokens_source") == "estimate":
            out["estimated"] += p + o
        if c.get("tokens_source"):
            sources.add(c["tokens_source"])
        if c.get("cost_usd") is not None:
            m["cost_usd"] = round((m["cost_usd"] or 0.0) + c["cost_usd"], 8)
            out["cost_usd"] = round((out["cost_usd"] or 0.0) + c["cost_usd"], 8)
    out["total"] = out["prompt"] + out["completion"]
    out["sources"] = sorted(sources)
    out["by_model"] = by_model
    return out


def record(plpy, questions: int, usage: dict[str, Any]) -> None:
    """Add a call's use to the calling role's day (nothing on a read replica).

    Args:
        questions: questions not yet counted by ``take`` (0 or 1).
        usage: ``usage_of``'s dict (its ``prompt``, ``completion``, ``estimated``,
            ``cost_usd``).

    Raises:
        plpy.SPIError: the write failed.
    """
    if not questions and not usage.get("total"):
        return
    spi.query(
        plpy,
        _ADD,
        [
            questions,
            usage["prompt"],
            usage["completion"],
            usage["estimated"],
            str(usage["cost_usd"] or 0),
        ],
        ["int4", "int8", "int8", "int8", "text"],
    )
