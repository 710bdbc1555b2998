"""Per-role quotas and usage: the check before a question and before its first model request,
and what a call used, added to the role's day (``nl2sql._usage_add``); docs/guardrails.md
"Quotas".

Sessions of one role with a quota check against the usage committed plus the shared process's
ledger of questions in flight (``Ledger``), so no row stays locked while models answer; without
that process they lock the role's row of the day (``nl2sql._quota_take``)."""

from __future__ import annotations

import json
import time
from typing import Any

from ..core import spi
from ..core.errors import ConfigError, QuotaExceeded
from ..core.types import LLMReply
from .config import RELAYS

__all__ = [
    "QUESTION",
    "TOKENS",
    "Ledger",
    "add_usage",
    "failed_call",
    "message",
    "record",
    "take",
    "usage_of",
]

QUESTION = "question"  # the questions_per_minute check; the question is counted
TOKENS = "tokens"  # the tokens_per_day check, before the first model request

_TAKE = "SELECT nl2sql._quota_take(current_user, $1)::text AS q"
_STATE = "SELECT nl2sql._quota_state(current_user, $1)::text AS q, current_database() AS db"
_LIMIT = {QUESTION: "questions_per_minute", TOKENS: "tokens_per_day"}
_USED = {QUESTION: "minute_questions", TOKENS: "tokens_used"}
_RESETS = {QUESTION: "resets_minute", TOKENS: "resets_day"}
LEDGER_TTL_S = 86400.0  # an entry no session settled (its role never asked again) is dropped
_IN_FLIGHT: dict[str, Any] = {}  # this backend's ledger entry: database, role, xid
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

    With the shared process: the usage committed (``nl2sql._quota_state``, no lock) plus the
    questions and tokens of the role's other transactions still in flight (``Ledger``); the
    question is counted in the ledger now and in the role's row when it ends (``record``).
    Without it: ``nl2sql._quota_take`` locks the role's row until the transaction ends.

    Args:
        kind: ``QUESTION`` or ``TOKENS``.

    Returns:
        ``{"role", "limited", "counted", "replica"}``: ``counted`` when the row lock counted the
        question here (a role with a quota, on a primary, without the shared process).

    Raises:
        QuotaExceeded: over a limit (``message``); nothing is counted.
    """
    if kind == QUESTION:
        _IN_FLIGHT.clear()  # a new question: its transaction's entry is made below, if any
    q = _take_in_ledger(plpy, kind)
    if q is None:
        q = json.loads(spi.query(plpy, _TAKE, [kind], ["text"])[0]["q"])
    if q.get("refused"):
        raise QuotaExceeded(message(q))
    return q


def _relay_quota(payload: dict) -> dict | None:
    """The shared process's ledger's answer (``embedding.client.relay_quota``), or None when no
    process answers (or none is registered): the caller counts with the row lock instead."""
    relay = RELAYS["quota"]
    return relay(payload) if relay else None


def _take_in_ledger(plpy, kind: str) -> dict[str, Any] | None:
    """``take`` through the shared process's ledger; None when it cannot answer."""
    pending = _relay_quota({"op": "pending", "db": _IN_FLIGHT.get("db"), "role": None})
    if pending is None:
        return None
    row = spi.query(plpy, _STATE, [pending.get("xids") or []], ["int8[]"])[0]
    state = json.loads(row["q"])
    if not state["limited"] or state["replica"]:
        return {
            "role": state["role"],
            "limited": state["limited"],
            "counted": False,
            "replica": state["replica"],
        }
    got = _relay_quota({"op": "take", "db": row["db"], "kind": kind, "state": state})
    if got is None:
        return None
    _IN_FLIGHT.update(db=row["db"], role=state["role"], xid=state["xid"])
    return got


class Ledger:
    """The shared process's count of questions and tokens not yet committed, per database and
    role, keyed by transaction id (``txid_current``): what a session's committed read cannot
    see. A session's ``take`` sends the ids its snapshot settled (committed before it, or
    aborted; ``nl2sql._quota_state``), which leave the ledger, and is answered against the
    committed usage plus every other transaction's entry. Requests are applied one at a time
    (the process's event loop), so two sessions cannot both take the last slot."""

    def __init__(self, ttl_s: float = LEDGER_TTL_S):
        self._rows: dict[tuple[str, str], dict[int, list[float]]] = {}
        self._ttl_s = ttl_s

    def apply(self, req: dict[str, Any]) -> dict[str, Any]:
        """Answer one request.

        Args:
            req: ``{"op": "pending"}`` (every transaction id in flight, of every role: a session
                does not know its acting role before its SQL answers), ``{"op": "take", "db",
                "kind", "state"}`` (``nl2sql._quota_state``'s answer) or ``{"op": "add", "db",
                "role", "xid", "tokens"}``.

        Returns:
            ``pending``: ``{"xids": [...]}``; ``take``: ``take``'s dict (``refused`` over a
            limit); ``add``: ``{"ok": true}``.

        Raises:
            KeyError, ValueError, TypeError: a malformed request (the endpoint answers 400).
        """
        now = time.monotonic()
        if req["op"] == "pending":
            self._expire(now)
            return {"xids": sorted({x for rows in self._rows.values() for x in rows})}
        if req["op"] == "add":
            entry = self._entry(str(req["db"]), str(req["role"]), int(req["xid"]), now)
            entry[1] += max(0, int(req["tokens"]))
            return {"ok": True}
        if req["op"] == "take":
            return self._take(str(req["db"]), req["kind"], req["state"], now)
        raise ConfigError(f"unknown ledger op {req['op']!r}")

    def _entry(self, db: str, role: str, xid: int, now: float) -> list[float]:
        entry = self._rows.setdefault((db, role), {}).setdefault(xid, [0, 0, now])
        entry[2] = now
        return entry

    def _expire(self, now: float) -> None:
        for key, rows in list(self._rows.items()):
            for xid in [x for x, e in rows.items() if now - e[2] > self._ttl_s]:
                del rows[xid]
            if not rows:
                del self._rows[key]

    def _take(self, db: str, kind: str, state: dict[str, Any], now: float) -> dict[str, Any]:
        role, own = str(state["role"]), int(state["xid"])
        rows = self._rows.setdefault((db, role), {})
        for xid in state.get("settled") or []:
            rows.pop(int(xid), None)
        field = 0 if kind == QUESTION else 1
        used = int(state[_USED[kind]]) + sum(e[field] for x, e in rows.items() if x != own)
        limit = state.get(_LIMIT[kind])
        if limit is not None and used >= int(limit):
            return {
                "role": role,
                "limited": True,
                "refused": _LIMIT[kind],
                "limit": limit,
                "used": used,
                "quota_of": state.get("quota_of"),
                "resets_at": state[_RESETS[kind]],
            }
        if kind == QUESTION:
            self._entry(db, role, own, now)[0] += 1
        return {"role": role, "limited": True, "counted": False, "replica": False, "ledger": True}


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
        _add_call(out, by_model, c)
        if c.get("tokens_source"):
            sources.add(c["tokens_source"])
    out["total"] = out["prompt"] + out["completion"]
    out["sources"] = sorted(sources)
    out["by_model"] = by_model
    return out


def _add_call(out: dict[str, Any], by_model: dict[str, dict[str, Any]], c: dict) -> None:
    """Add one call's tokens and cost to ``usage_of``'s totals ``out`` and its model's."""
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
    if c.get("cost_usd") is not None:
        m["cost_usd"] = round((m["cost_usd"] or 0.0) + c["cost_usd"], 8)
        out["cost_usd"] = round((out["cost_usd"] or 0.0) + c["cost_usd"], 8)


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
    if _IN_FLIGHT.get("xid") is not None and usage.get("total"):
        # other sessions of the role see these tokens in the ledger until this one commits
        _relay_quota({"op": "add", "tokens": usage["total"], **_IN_FLIGHT})
    add_usage(plpy, questions, usage)


def add_usage(plpy, questions: int, usage: dict[str, Any]) -> None:
    """Add amounts to the calling role's day (``nl2sql._usage_add``), in the caller's
    transaction: ``record`` without the ledger.

    Args:
        questions: questions to count (0 or 1).
        usage: ``usage_of``'s dict (its ``prompt``, ``completion``, ``estimated``,
            ``cost_usd``).

    Raises:
        plpy.SPIError: the write failed.
    """
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


def failed_call(tokens: dict[str, Any] | None) -> dict[str, Any]:
    """What a call that raised had added to its role's day (``record``, rolled back with the
    error), for a write that the error cannot undo: the question, counted once (the quota
    check's count rolled back too), and its tokens and cost.

    Args:
        tokens: the trace's ``tokens`` (``usage_of``'s dict), or None (no model was called).

    Returns:
        ``{"questions": 1, "prompt", "completion", "estimated", "cost_usd"}`` (numbers).
    """
    tokens = tokens or {}
    return {
        "questions": 1,
        "prompt": int(tokens.get("prompt") or 0),
        "completion": int(tokens.get("completion") or 0),
        "estimated": int(tokens.get("estimated") or 0),
        "cost_usd": tokens.get("cost_usd"),
    }
