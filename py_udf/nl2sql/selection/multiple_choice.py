"""Selection among executed candidates: MCS-SQL's filtering and confidence, majority with ties
to the fastest, and the optional multiple-choice selection by a model.

1. drop candidates that were refused, failed or timed out; when some candidate returned rows,
   drop the candidates whose result is empty too (an empty result answers only when every
   candidate that ran returned nothing);
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
§3.6 and PET-SQL (Li et al. 2024) §3.4 (vote by result, ties to the shortest execution time);
empty results as a failure signal: execution-guided decoding (Wang et al. 2018, "Robust
Text-to-SQL Generation with Execution-Guided Decoding", §3) discards candidates whose execution
returns nothing, MAC-SQL (Wang et al. 2024) §3.4 sends them to its refiner; the rule here, that
they take no part in the vote while another candidate returned rows, came from reading the
Spider replay's misses (car_1, cre_Doc_Template_Mgt: a majority of candidates agreeing on no
rows — a join through the wrong table, a misspelt value — against a right group with rows).
"""

from __future__ import annotations

import math
import re
from typing import Any

from ..core.errors import ConfigError
from ..core.types import Candidate, Status, Vote
from ..model.prompts import QUESTION_MARKER

TIE_BREAKS = ("fastest", "priority")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def same_speed_ms(ms: float) -> float:
    """Give the margin within which tied groups count as equally fast (``tie_break='fastest'``).

    On this project's machine the same candidate's time varies by that much between runs
    (measured: 0.88–1.10 ms for one query over four runs of bench/replay.py's question 829).

    Args:
        ms: execution time of the fastest tied group, milliseconds (``math.inf`` when
            unknown).

    Returns:
        Milliseconds a group may be slower than ``ms`` and still count as equally fast:
        max(0.5 ms, 10 % of ``ms``); 0.0 when ``ms`` is infinite.
    """
    return max(0.5, 0.1 * ms) if ms != math.inf else 0.0


def _ms(c: Candidate) -> float:
    return c.exec_ms if c.exec_ms is not None else math.inf


def representative(members: list[Candidate], weights: dict[str, float] | None = None) -> Candidate:
    """Choose the member of a result group whose SQL answers for the group.

    Members agree on the rows as a multiset; when some order their rows (a top-level ORDER
    BY: ``Candidate.order_hash``), the representative is the fastest member of the row order
    most of them (by weight) agree on, so that an odd member sorting the other way does not
    speak for the group; otherwise the fastest member.

    Source: PET-SQL (Li et al. 2024) §3.4 and OpenSearch-SQL (Xie et al. 2024) §3.6 (the
    fastest of the agreeing candidates); the agreement on row order is this project's rule,
    from reading the replay's misses (Spider concert_singer).

    Args:
        members: the group's candidates (same ``result_hash``), non-empty.
        weights: model name -> weight of its vote, or None (every vote weighs 1).

    Returns:
        The chosen member.
    """
    ordered = [c for c in members if c.order_hash is not None]
    if not ordered:
        return min(members, key=_ms)
    weight: dict[str, float] = {}
    for c in ordered:
        weight[c.order_hash] = weight.get(c.order_hash, 0.0) + (weights or {}).get(c.model, 1.0)
    best = max(weight.values())
    return min((c for c in ordered if weight[c.order_hash] == best), key=_ms)


def select(
    candidates: list[Candidate],
    threshold: float = 0.2,
    tie_break: str = "fastest",
    priority: list[str] | None = None,
    weights: dict[str, float] | None = None,
    empty_results_vote: bool = False,
) -> Vote:
    """Select among executed candidates: steps 1–5 of the module docstring.

    Candidates with status ``ok`` and a result hash take part; the others are counted in the
    reason as refused, failed or timed out. When at least one candidate returned rows, those
    whose result is empty (``row_count`` 0) take no part either and the reason counts them
    (``empty_results_vote`` keeps them in).

    Args:
        candidates: the candidates of one question, executed or not.
        threshold: minimum confidence of a group, in [0, 1] (MCS-SQL uses 0.2).
        tie_break: ``fastest`` (ties to the fastest group; within ``same_speed_ms`` priority
            decides) or ``priority`` (ties to the group holding the highest-priority model).
        priority: model names, most trusted first (used for ties and as a stable order);
            None for none.
        weights: model name -> weight of its vote (``reliability``, learned from judged
            answers); a group's ``score`` is the sum of its members' weights (a model not
            listed weighs 1) and the highest score wins instead of the largest size. None:
            every vote weighs 1 (plain majority).

    Returns:
        ``Vote`` with ``method`` ``majority``: ``sql`` of the winner's fastest member (None
        when nothing executed), ``winner_hash``, ``confidence`` of the winning group (0..1),
        ``groups`` (kept, best first; each a dict of result_hash, size, confidence, sources,
        fastest_ms, fastest_source, sql, row_count, best_priority), ``dropped`` (groups below
        the threshold, same form) and ``reason``.

    Raises:
        ConfigError: ``threshold`` is outside [0, 1] or ``tie_break`` is not one of
            ``TIE_BREAKS``.

    Source: MCS-SQL (Lee et al. 2024) §3.3, candidate filtering and confidence threshold;
    OpenSearch-SQL (Xie et al. 2024) §3.6 and PET-SQL (Li et al. 2024) §3.4, vote by result
    with ties to the shortest execution time.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ConfigError(f"confidence threshold must be between 0 and 1, got {threshold}")
    if tie_break not in TIE_BREAKS:
        raise ConfigError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, got {tie_break!r}")
    ok, failed, empty = _voters(candidates, empty_results_vote)
    if not ok:
        return Vote(
            sql=None,
            winner_hash=None,
            confidence=0.0,
            groups=[],
            reason="no candidate executed successfully",
        )
    groups = _groups(ok, priority, weights)
    kept = [g for g in groups if g["confidence"] + 1e-12 >= threshold]
    dropped = [g for g in groups if g not in kept]
    note = ""
    if not kept:
        kept, dropped = groups, []
        note = f"; no group reaches confidence {threshold:g}, none dropped"
    elif dropped:
        note = f"; {len(dropped)} group(s) below confidence {threshold:g} dropped"
    kept.sort(key=_order(tie_break))
    dropped.sort(key=_order(tie_break))
    how, n_top = _break_tie(kept, tie_break)
    win = kept[0]
    if n_top > 1:
        reason = f"tie between {n_top} groups of {win['size']}: {how}"
    else:
        reason = f"majority: {win['size']} of {len(ok)} executed candidates agree"
    if weights:
        reason += f" (votes weighted by learned reliability: score {win['score']:g})"
    if failed:
        reason += f"; {failed} candidate(s) refused, failed or timed out"
    if empty:
        reason += f"; {empty} candidate(s) with an empty result set aside (others returned rows)"
    return Vote(
        sql=win["sql"],
        winner_hash=win["result_hash"],
        confidence=win["confidence"],
        groups=kept,
        reason=reason + note,
        dropped=dropped,
        method="majority",
    )


def _voters(
    candidates: list[Candidate], empty_results_vote: bool
) -> tuple[list[Candidate], int, int]:
    """The candidates that vote, and how many were left out: (voters, refused or failed, empty).

    Executed candidates with a result vote; when any returned rows, those with an empty result
    do not (unless ``empty_results_vote``).
    """
    ok = [c for c in candidates if c.status == Status.OK and c.result_hash is not None]
    failed = len(candidates) - len(ok)
    empty = 0
    if not empty_results_vote and any((c.row_count or 0) > 0 for c in ok):
        empty = sum(1 for c in ok if c.row_count == 0)
        ok = [c for c in ok if c.row_count != 0]
    return ok, failed, empty


def _groups(
    ok: list[Candidate], priority: list[str] | None, weights: dict[str, float] | None
) -> list[dict[str, Any]]:
    """One group per result hash of the voters (the dict form ``select`` documents)."""
    rank = {m: i for i, m in enumerate(priority or [])}
    by_hash: dict[str, list[Candidate]] = {}
    for c in ok:
        by_hash.setdefault(c.result_hash, []).append(c)
    groups: list[dict[str, Any]] = []
    for h, members in by_hash.items():
        fastest = representative(members, weights)
        groups.append(
            {
                "result_hash": h,
                "size": len(members),
                "confidence": len(members) / len(ok),
                "sources": [c.source for c in members],
                "fastest_ms": min(members, key=_ms).exec_ms,
                "fastest_source": fastest.source,
                "sql": fastest.sql,
                "row_count": fastest.row_count,
                "best_priority": min(rank.get(c.model, len(rank)) for c in members),
                "score": round(sum((weights or {}).get(c.model, 1.0) for c in members), 6),
            }
        )
    return groups


def _speed(g: dict[str, Any]) -> float:
    return g["fastest_ms"] if g["fastest_ms"] is not None else math.inf


def _order(tie_break: str):
    """Sort key of groups, best first: score, then speed or priority as ``tie_break`` says."""
    if tie_break == "priority":
        return lambda g: (-g["score"], g["best_priority"], _speed(g))
    return lambda g: (-g["score"], _speed(g), g["best_priority"])


def _break_tie(kept: list[dict[str, Any]], tie_break: str) -> tuple[str, int]:
    """Put the winner of the top score first in ``kept`` (sorted by ``_order``); return how the
    tie was decided and how many groups shared the top score.

    Times within ``same_speed_ms`` of the fastest are measurement noise (the same query's time
    varies by more from one run to the next), not less work: then priority decides, as with
    ``tie_break='priority'``, so that the same candidates always give the same answer.
    """
    top = [g for g in kept if g["score"] == kept[0]["score"]]
    how = (
        "the group holding the highest-priority model wins"
        if tie_break == "priority"
        else "fastest execution wins"
    )
    if tie_break == "fastest" and len(top) > 1:
        fastest = _speed(top[0])
        close = [g for g in top if _speed(g) <= fastest + same_speed_ms(fastest)]
        if len(close) > 1:
            win = min(close, key=lambda g: (g["best_priority"], g["fastest_ms"]))
            kept.remove(win)
            kept.insert(0, win)
            how = (
                f"{len(close)} groups equally fast (within {same_speed_ms(fastest):.2g} ms): "
                f"the group holding the highest-priority model wins"
            )
    return how, len(top)


def multiple_choice_prompt(
    question: str,
    groups: list[dict[str, Any]],
    schema_text: str,
    rows: dict[str, list[str]] | None = None,
    evidence: str | None = None,
    notes: dict[str, str] | None = None,
) -> str:
    """Build the user message of the multiple-choice selection.

    The message holds the schema, the hint (evidence), one option per group (letters A, B, …
    in the given order, i.e. descending confidence; at most 26) with its confidence, row count,
    SQL and up to 3 result rows (each cut at 200 characters), and the question last. The model
    is asked to answer with one letter.

    Args:
        question: the question (natural language).
        groups: ``Vote.groups`` of ``select``, best first.
        schema_text: the schema as the prompts show it.
        rows: result hash → the group's row texts (``row_to_json`` text) as the gate let them
            through (``gate.Gate.rows``); None for no rows.
        evidence: BIRD-style external knowledge for the question, or None.
        notes: result hash → what the gate withheld from that option's rows (shown as a
            comment line); None for none.

    Returns:
        The user message text.

    Source: MCS-SQL (Lee et al. 2024) §3.3, multiple-choice selection with options ordered by
    confidence.
    """
    parts = ["/* Given the following database schema: */", schema_text]
    if evidence:
        parts.append(f"/* Hint: {evidence.strip()} */")
    parts.append(
        "/* Candidate SQL queries, most agreed-on first. Pick the one that answers the "
        "question correctly. Answer with the option letter only. */"
    )
    for i, g in enumerate(groups[: len(_LETTERS)]):
        lines = [
            f"-- Option {_LETTERS[i]} (confidence {g['confidence']:.2f}, {g['row_count']} rows)",
            g["sql"] + ";",
        ]
        for r in (rows or {}).get(g["result_hash"], [])[:3]:
            lines.append(f"--   row: {r[:200]}")
        if (notes or {}).get(g["result_hash"]):
            lines.append(f"--   ({notes[g['result_hash']]})")
        parts.append("\n".join(lines))
    parts.append("/* Answer with one letter: which option answers the question? */")
    parts.append(f"{QUESTION_MARKER}{question.strip()} */")
    return "\n\n".join(parts)


def parse_choice(text: str | None, n_options: int) -> int | None:
    """Read the option a model's multiple-choice answer names.

    Understood forms, case-insensitive: ``Option B`` anywhere, a lone letter (``B``,
    ``(b)``), ``Answer: B`` / ``answer is B``, and a leading ``B)``, ``B.`` or ``B:``.

    Args:
        text: the model's answer, or None.
        n_options: number of options offered.

    Returns:
        0-based option index (A = 0), or None when the answer names no option in range.
    """
    if not text:
        return None
    t = text.strip()
    m = (
        re.search(r"\boption\s+([A-Za-z])\b", t, re.IGNORECASE)
        or re.match(r"^\W*([A-Za-z])\W*$", t)
        or re.search(r"\banswer\s*(?:is)?\s*:?\s*\(?([A-Za-z])\)?(?:\W|$)", t, re.IGNORECASE)
        or re.match(r"^\(?([A-Za-z])[).:]", t)
    )
    if not m:
        return None
    i = _LETTERS.find(m.group(1).upper())
    return i if 0 <= i < n_options else None


def apply_choice(v: Vote, choice: int | None, model: str, answer: str | None) -> Vote:
    """Apply the multiple-choice answer to a vote, in place.

    Args:
        v: the majority ``Vote`` of ``select``.
        choice: 0-based index into ``v.groups`` (``parse_choice``), or None when the answer
            named no option.
        model: name of the model that chose, for the reason.
        answer: the model's raw answer (for the reason when unusable), or None.

    Returns:
        ``v`` itself: with a choice, the chosen group moved first and winning with its own
        confidence (``method`` ``multiple_choice``); without one, the majority kept and the
        reason saying why (``method`` ``majority (multiple choice unusable)``).

    Source: MCS-SQL (Lee et al. 2024) §3.3, multiple-choice selection.
    """
    if choice is None or not v.groups:
        v.reason += (
            f"; multiple choice by {model}: answer {str(answer)[:60]!r} names no option, "
            "majority kept"
        )
        v.method = "majority (multiple choice unusable)"
        return v
    g = v.groups[choice]
    v.groups = [g] + [x for i, x in enumerate(v.groups) if i != choice]
    v.sql, v.winner_hash, v.confidence = g["sql"], g["result_hash"], g["confidence"]
    v.reason += f"; multiple choice by {model}: option {_LETTERS[choice]}"
    v.method = "multiple_choice"
    return v
