"""Result signatures and cross-consistency voting over executed candidates.

Source: PET-SQL (Li et al. 2024) §3.4 — cross-consistency: candidates from several models are
grouped by execution result and the majority wins; MCS-SQL (Lee et al. 2024) §3.3 and
OpenSearch-SQL (Xie et al. 2024) §3.6 — among agreeing candidates keep the fastest, and break
ties between groups by the shortest execution time.
"""
from __future__ import annotations

import hashlib
import json
import math
from decimal import Decimal
from typing import Any

from .types import Candidate, Status, Vote


def normalize_value(v: Any) -> Any:
    """A cell value made comparable across candidates: numbers as floats rounded to 6
    significant digits (``1``, ``1.0`` and ``1.000000`` agree), strings as is, null as None."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float, Decimal)):
        f = float(v)
        if math.isnan(f) or math.isinf(f):
            return str(f)
        return float(f"{f:.6g}")
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True, default=str)
    return v


def row_from_json(text: str) -> tuple:
    """A row from ``row_to_json(...)::text``: its values in column order (duplicate column names
    kept), normalized."""
    pairs = json.loads(text, object_pairs_hook=lambda kv: kv, parse_float=Decimal)
    return tuple(normalize_value(v) for _, v in pairs)


def result_signature(rows: list[tuple], ordered: bool = False) -> str:
    """SHA-256 hex of a result: the multiset of rows (sorted), or the sequence when ``ordered``."""
    keyed = [json.dumps(r, default=str) for r in rows]
    if not ordered:
        keyed.sort()
    h = hashlib.sha256()
    for k in keyed:
        h.update(k.encode())
        h.update(b"\n")
    return h.hexdigest()


def vote(candidates: list[Candidate]) -> Vote:
    """Group successfully executed candidates by result; the largest group wins; a tie between
    groups goes to the group with the fastest candidate; the winner's SQL is its fastest member.

    Confidence = winning group size / number of candidates that executed. Candidates with any
    other status (refused, error, timeout) do not vote. Returns Vote with ``sql`` None when no
    candidate executed.
    """
    ok = [c for c in candidates if c.status == Status.OK and c.result_hash is not None]
    if not ok:
        return Vote(sql=None, winner_hash=None, confidence=0.0, groups=[],
                    reason="no candidate executed successfully")
    groups: dict[str, list[Candidate]] = {}
    for c in ok:
        groups.setdefault(c.result_hash, []).append(c)
    summary = []
    for h, members in groups.items():
        fastest = min(members, key=lambda c: c.exec_ms if c.exec_ms is not None else math.inf)
        summary.append({
            "result_hash": h,
            "size": len(members),
            "confidence": len(members) / len(ok),
            "sources": [c.source for c in members],
            "fastest_ms": fastest.exec_ms,
            "fastest_source": fastest.source,
            "sql": fastest.sql,
            "row_count": fastest.row_count,
        })
    summary.sort(key=lambda g: (-g["size"], g["fastest_ms"] if g["fastest_ms"] is not None else math.inf))
    win = summary[0]
    tied = len(summary) > 1 and summary[1]["size"] == win["size"]
    reason = (f"tie between {sum(1 for g in summary if g['size'] == win['size'])} groups of "
              f"{win['size']}: fastest execution wins" if tied
              else f"majority: {win['size']} of {len(ok)} executed candidates agree")
    return Vote(sql=win["sql"], winner_hash=win["result_hash"], confidence=win["confidence"],
                groups=summary, reason=reason)
