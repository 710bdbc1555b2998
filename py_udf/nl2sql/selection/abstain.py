"""Clarify or abstain below ``abstain_below`` confidence. Sources: MCS-SQL (Lee et al. 2024)
§3.3; "Know what I don't know" (Chen et al. 2023)."""

from __future__ import annotations

import json
from typing import Any

from ..core.types import Candidate, Status, Vote
from ..model.gate import Gate


def readings(vote: Vote, cands: list[Candidate], gate: Gate, n: int) -> list[dict[str, Any]]:
    """The competing readings of a question: the chosen result group, then the others (kept,
    dropped, and empty results set aside while others returned rows) by confidence.

    Args:
        vote: the vote's outcome (``groups`` best first, ``dropped``, ``set_aside``).
        cands: the candidates (their ``sample_rows`` give each group's first rows).
        gate: the call's gate (applied to the rows: ``Gate.rows``).
        n: most readings listed.

    Returns:
        Up to ``n`` dicts ``{sql, candidates, confidence, row_count, rows, rows_withheld}``
        (``rows``: at most 3, as dicts); ``confidence`` is the group's share of every candidate
        that executed.
    """
    rows_of = {c.result_hash: c.sample_rows for c in cands if c.status == Status.OK}
    others = sorted(
        [*vote.groups[1:], *vote.dropped, *vote.set_aside], key=lambda g: -g["confidence"]
    )
    out = []
    for g in [*vote.groups[:1], *others][:n]:
        kept, note = gate.rows("abstain", g["sql"], rows_of.get(g["result_hash"], []))
        out.append(
            {
                "sql": g["sql"],
                "candidates": g["size"],
                "confidence": round(g["confidence"], 3),
                "row_count": g.get("row_count"),
                "rows": [_row(r) for r in kept],
                "rows_withheld": note,
            }
        )
    return out


def _row(text: str) -> Any:
    """A ``row_to_json`` text as a dict (the text itself when it was cut short)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def message(confidence: float, threshold: float, found: list[dict[str, Any]]) -> str:
    """The abstention's error message: why, and each reading with its SQL and first rows.

    Args:
        confidence: the winner's confidence, 0..1.
        threshold: setting ``abstain_below``.
        found: ``readings``' result.

    Returns:
        The message (several lines).
    """
    lines = [
        f"nl2sql: the question has {len(found)} competing readings and none is convincing "
        f"(confidence {confidence:.2f} < abstain_below {threshold:g}); rephrase the "
        f"question to pick one, or run the SQL of the reading you mean:"
    ]
    for i, r in enumerate(found, 1):
        lines.append(
            f"  reading {i} ({r['candidates']} candidate(s), confidence "
            f"{r['confidence']:.2f}): {' '.join(r['sql'].split())}"
        )
        shown = [
            json.dumps(x, default=str, ensure_ascii=False) if isinstance(x, dict) else str(x)
            for x in r["rows"]
        ]
        if shown:
            lines.append(f"    first rows: {'; '.join(shown)}")
        elif r["row_count"] == 0:
            lines.append("    no rows")
        if r["rows_withheld"]:
            lines.append(f"    withheld by the value policy: {r['rows_withheld']}")
    return "\n".join(lines)


def should_abstain(vote: Vote, threshold: float) -> bool:
    """Whether to abstain: an SQL was chosen with a confidence below a threshold > 0.

    Args:
        vote: the vote's outcome.
        threshold: setting ``abstain_below`` (0 = never).

    Returns:
        True to abstain.
    """
    return threshold > 0 and vote.sql is not None and vote.confidence + 1e-12 < threshold
