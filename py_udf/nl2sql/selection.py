"""Selection among executed candidates: MCS-SQL's filtering and confidence, majority with ties
to the fastest, and the optional multiple-choice selection by a model.

1. drop candidates that were refused, failed or timed out;
2. group the rest by execution result (multiset of rows); keep the fastest member per group;
3. confidence of a group = its size / the number of candidates that executed;
4. drop groups whose confidence is below ``threshold`` (MCS-SQL uses 0.2); when that would
   drop every group, nothing is dropped (the trace says so);
5. majority: the largest remaining group wins; a tie goes to the group whose fastest member
   ran fastest (``tie_break='fastest'``; groups within ``same_speed_ms`` of the fastest count
   as equally fast, and among those priority decides) or, with ``tie_break='priority'``, to
   the group holding the candidate of the highest-priority model (the PreSQL writer first);
6. optional multiple-choice selection: a model is shown the remaining groups as options A, B,
   … in descending confidence (the fastest SQL of each and a few of its rows) and answers with
   one letter; an answer that names no option falls back to the majority.

Sources: MCS-SQL (Lee et al. 2024) §3.3 (candidate filtering, confidence threshold 0.2,
multiple-choice selection with options ordered by confidence); OpenSearch-SQL (Xie et al. 2024)
§3.6 and PET-SQL (Li et al. 2024) §3.4 (vote by result, ties to the shortest execution time).
"""
from __future__ import annotations

import math
import re
from typing import Any

from .types import Candidate, Status, Vote

TIE_BREAKS = ("fastest", "priority")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def same_speed_ms(ms: float) -> float:
    """How much slower than ``ms`` (the fastest tied group's time, ms) a group may be and
    still count as equally fast for ``tie_break='fastest'``: max(0.5 ms, 10 %). On this
    project's machine the same candidate's time varies by that much between runs (measured:
    0.88–1.10 ms for one query over four runs of bench/replay.py's question 829)."""
    return max(0.5, 0.1 * ms) if ms != math.inf else 0.0


def _ms(c: Candidate) -> float:
    return c.exec_ms if c.exec_ms is not None else math.inf


def select(candidates: list[Candidate], threshold: float = 0.2, tie_break: str = "fastest",
           priority: list[str] | None = None) -> Vote:
    """Steps 1–5 of the module docstring over ``candidates`` (status ``ok`` with a result hash
    take part).

    ``threshold``: minimum confidence in [0, 1]; ``tie_break``: ``fastest`` or ``priority``;
    ``priority``: model names, most trusted first (used by ``priority`` and as a stable order).
    Returns Vote: ``sql`` of the winner's fastest member (None when nothing executed),
    ``confidence`` of the winning group, ``groups`` (kept, best first: size, confidence,
    sources, fastest_ms, fastest_source, sql, row_count), ``dropped`` (groups below the
    threshold), ``reason``. Raises ValueError for a threshold outside [0, 1] or an unknown
    tie_break.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"confidence threshold must be between 0 and 1, got {threshold}")
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, got {tie_break!r}")
    ok = [c for c in candidates if c.status == Status.OK and c.result_hash is not None]
    failed = len(candidates) - len(ok)
    if not ok:
        return Vote(sql=None, winner_hash=None, confidence=0.0, groups=[],
                    reason="no candidate executed successfully")
    rank = {m: i for i, m in enumerate(priority or [])}
    by_hash: dict[str, list[Candidate]] = {}
    for c in ok:
        by_hash.setdefault(c.result_hash, []).append(c)
    groups: list[dict[str, Any]] = []
    for h, members in by_hash.items():
        fastest = min(members, key=_ms)
        groups.append({
            "result_hash": h,
            "size": len(members),
            "confidence": len(members) / len(ok),
            "sources": [c.source for c in members],
            "fastest_ms": fastest.exec_ms,
            "fastest_source": fastest.source,
            "sql": fastest.sql,
            "row_count": fastest.row_count,
            "best_priority": min(rank.get(c.model, len(rank)) for c in members),
        })
    kept = [g for g in groups if g["confidence"] + 1e-12 >= threshold]
    dropped = [g for g in groups if g not in kept]
    note = ""
    if not kept:
        kept, dropped = groups, []
        note = f"; no group reaches confidence {threshold:g}, none dropped"
    elif dropped:
        note = f"; {len(dropped)} group(s) below confidence {threshold:g} dropped"

    def key(g: dict[str, Any]):
        speed = g["fastest_ms"] if g["fastest_ms"] is not None else math.inf
        if tie_break == "priority":
            return (-g["size"], g["best_priority"], speed)
        return (-g["size"], speed, g["best_priority"])

    kept.sort(key=key)
    dropped.sort(key=key)
    win = kept[0]
    top = [g for g in kept if g["size"] == win["size"]]
    n_top = len(top)
    how = ("the group holding the highest-priority model wins" if tie_break == "priority"
           else "fastest execution wins")
    if tie_break == "fastest" and n_top > 1:
        # times this close are measurement noise (the same query's time varies by more from
        # one run to the next), not less work: then priority decides, as it would with
        # tie_break='priority', so that the same candidates always give the same answer
        speed = [g["fastest_ms"] if g["fastest_ms"] is not None else math.inf for g in top]
        close = [g for g, v in zip(top, speed) if v <= speed[0] + same_speed_ms(speed[0])]
        if len(close) > 1:
            win = min(close, key=lambda g: (g["best_priority"], g["fastest_ms"]))
            kept.remove(win)
            kept.insert(0, win)
            how = (f"{len(close)} groups equally fast (within "
                   f"{same_speed_ms(speed[0]):.2g} ms): the group holding the highest-priority "
                   f"model wins")
    if n_top > 1:
        reason = f"tie between {n_top} groups of {win['size']}: {how}"
    else:
        reason = f"majority: {win['size']} of {len(ok)} executed candidates agree"
    if failed:
        reason += f"; {failed} candidate(s) refused, failed or timed out"
    return Vote(sql=win["sql"], winner_hash=win["result_hash"], confidence=win["confidence"],
                groups=kept, reason=reason + note, dropped=dropped, method="majority")


def multiple_choice_prompt(question: str, groups: list[dict[str, Any]], schema_text: str,
                           rows: dict[str, list[str]] | None = None,
                           evidence: str | None = None) -> str:
    """The user message of MCS-SQL's multiple-choice selection: schema, question, and one
    option per group (in the given order, i.e. descending confidence) with its SQL and up to 3
    result rows (``rows`` maps result hash → row texts). The model is asked for one letter."""
    from .loopback_marker import QUESTION_MARKER

    parts = ["/* Given the following database schema: */", schema_text]
    if evidence:
        parts.append(f"/* Hint: {evidence.strip()} */")
    parts.append("/* Candidate SQL queries, most agreed-on first. Pick the one that answers the "
                 "question correctly. Answer with the option letter only. */")
    for i, g in enumerate(groups[:len(_LETTERS)]):
        lines = [f"-- Option {_LETTERS[i]} (confidence {g['confidence']:.2f}, "
                 f"{g['row_count']} rows)", g["sql"] + ";"]
        for r in (rows or {}).get(g["result_hash"], [])[:3]:
            lines.append(f"--   row: {r[:200]}")
        parts.append("\n".join(lines))
    parts.append("/* Answer with one letter: which option answers the question? */")
    parts.append(f"{QUESTION_MARKER}{question.strip()} */")
    return "\n\n".join(parts)


def parse_choice(text: str | None, n_options: int) -> int | None:
    """The option index a model's answer names (``B``, ``Option B``, ``(b)``, ``Answer: B.``),
    or None when it names no option in range. The first standalone letter wins."""
    if not text:
        return None
    t = text.strip()
    m = re.search(r"\boption\s+([A-Za-z])\b", t, re.IGNORECASE) \
        or re.match(r"^\W*([A-Za-z])\W*$", t) \
        or re.search(r"\banswer\s*(?:is)?\s*:?\s*\(?([A-Za-z])\)?(?:\W|$)", t, re.IGNORECASE) \
        or re.match(r"^\(?([A-Za-z])[).:]", t)
    if not m:
        return None
    i = _LETTERS.find(m.group(1).upper())
    return i if 0 <= i < n_options else None


def apply_choice(v: Vote, choice: int | None, model: str, answer: str | None) -> Vote:
    """The vote after the multiple-choice answer: the chosen group (index into ``v.groups``)
    wins with its own confidence; None keeps the majority, saying why."""
    if choice is None or not v.groups:
        v.reason += (f"; multiple choice by {model}: answer {str(answer)[:60]!r} names no option, "
                     "majority kept")
        v.method = "majority (multiple choice unusable)"
        return v
    g = v.groups[choice]
    v.groups = [g] + [x for i, x in enumerate(v.groups) if i != choice]
    v.sql, v.winner_hash, v.confidence = g["sql"], g["result_hash"], g["confidence"]
    v.reason += f"; multiple choice by {model}: option {_LETTERS[choice]}"
    v.method = "multiple_choice"
    return v
