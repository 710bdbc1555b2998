"""Selection among executed candidates (docs/internals/selection.md). Sources: MCS-SQL (Lee et
al. 2024) §3.3; OpenSearch-SQL (Xie et al. 2024) §3.6; PET-SQL (Li et al. 2024) §3.4."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from ..core.errors import ConfigError
from ..core.types import Candidate, Status, Vote
from ..model.prompts import QUESTION_MARKER, shown_sql
from . import consensus
from .consensus import VoteRule

TIE_BREAKS = ("fastest", "priority")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def same_speed_ms(ms: float) -> float:
    """The margin within which tied groups count as equally fast (``tie_break='fastest'``):
    max(0.5 ms, 10 % of ``ms``), the run-to-run noise measured on this project's machine.

    Args:
        ms: execution time of the fastest tied group, ms (``math.inf`` when unknown).

    Returns:
        Milliseconds a group may be slower than ``ms`` and still tie; 0.0 when ``ms`` is infinite.
    """
    return max(0.5, 0.1 * ms) if ms != math.inf else 0.0


def _ms(c: Candidate) -> float:
    return c.exec_ms if c.exec_ms is not None else math.inf


def representative(members: list[Candidate], weights: dict[str, float] | None = None) -> Candidate:
    """Choose the member whose SQL answers for a result group: the fastest of the row order most
    members (by weight) agree on, else the fastest.

    Source: PET-SQL (Li et al. 2024) §3.4; OpenSearch-SQL (Xie et al. 2024) §3.6.

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


def _check_arguments(threshold: float, tie_break: str) -> None:
    """Raise ConfigError when ``select``'s ``threshold`` is outside [0, 1] or its ``tie_break``
    is unknown."""
    if not 0.0 <= threshold <= 1.0:
        raise ConfigError(f"confidence threshold must be between 0 and 1, got {threshold}")
    if tie_break not in TIE_BREAKS:
        raise ConfigError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, got {tie_break!r}")


def _keep_confident(
    groups: list[dict], threshold: float, total: float | None = None
) -> tuple[list, list, str]:
    """The groups ``select`` keeps (confidence at least ``threshold``; all when none does), those
    it drops, and the note its reason ends with. With ``total`` (under a ``VoteRule``) a group's
    confidence here is its share of the votes as weighed, ``own_score / total``: a degenerate
    result weighing less does not push a group with rows below the threshold."""

    def share(g: dict) -> float:
        return g["own_score"] / total if total else g["confidence"]

    kept = [g for g in groups if share(g) + 1e-12 >= threshold]
    dropped = [g for g in groups if g not in kept]
    if not kept:
        return groups, [], f"; no group reaches confidence {threshold:g}, none dropped"
    if dropped:
        return kept, dropped, f"; {len(dropped)} group(s) below confidence {threshold:g} dropped"
    return kept, dropped, ""


def _majority_reason(
    win: dict, n_top: int, how: str, n_ok: int, n_aside: int, executed: int
) -> str:
    """``select``'s reason for the winning group ``win``: a tie broken (``how``), or the majority
    among the ``n_ok`` candidates with rows; the caller adds the rest."""
    if n_top > 1:
        reason = f"tie between {n_top} groups of {win['size']}: {how}"
    elif n_aside:
        reason = (
            f"majority: {win['size']} of {n_ok} candidates with rows agree "
            f"({win['size']} of {executed} executed: confidence {win['confidence']:.2f})"
        )
    else:
        reason = f"majority: {win['size']} of {n_ok} executed candidates agree"
    return reason


def select(
    candidates: list[Candidate],
    threshold: float = 0.2,
    tie_break: str = "fastest",
    priority: list[str] | None = None,
    weights: dict[str, float] | None = None,
    empty_results_vote: bool = False,
    rule: VoteRule | None = None,
    question: str | None = None,
    misses: Callable[[list[dict[str, Any]]], list[int]] | None = None,
) -> Vote:
    """Select among executed candidates: filter, group by result, drop weak groups, vote. Source:
    MCS-SQL (Lee et al. 2024) §3.3; OpenSearch-SQL (Xie et al. 2024) §3.6; PET-SQL (Li et al. 2024)
    §3.4.

    Args:
        candidates: the candidates of one question, executed or not.
        threshold: minimum confidence of a group, in [0, 1] (MCS-SQL uses 0.2).
        tie_break: ``fastest`` or ``priority`` (``TIE_BREAKS``).
        priority: model names, most trusted first (ties, stable order); None for none.
        weights: model name -> weight of its vote (learned reliability; unlisted: 1); the highest
            summed weight wins. None: plain majority.
        empty_results_vote: True: an empty result votes like any other (the rule before empty
            results were set aside; the replay compares both).
        rule: the vote beyond plain majority (``consensus.VoteRule``: equal answers vote
            together, near answers share weight, degenerate results weigh less, a weak
            consensus decided by the result's shape); None: groups by ``result_hash``, empty
            results set aside while others returned rows.
        question: the question (the shape evidence of ``rule``), or None.
        misses: the literal evidence of ``rule``'s weak consensus (``literals.literal_misses``:
            per contending group, its literals missing from the value index), or None.

    Returns:
        ``Vote`` (``method`` ``majority``): ``sql`` of the winner's representative (None when
        nothing executed), ``winner_hash``, ``confidence`` (0..1: the winner's share of every
        candidate that executed, an empty result set aside included), ``groups`` (kept, best
        first: result_hash, size, confidence, vote_share (the share of the voters), sources,
        fastest_ms, fastest_source, sql, row_count, best_priority, score), ``dropped`` (same
        form), ``set_aside`` (the groups of empty results set aside while others returned
        rows: same form, ``vote_share`` None) and ``reason``.

    Raises:
        ConfigError: ``threshold`` is outside [0, 1] or ``tie_break`` is unknown.
    """
    _check_arguments(threshold, tie_break)
    weighed = rule is not None and rule.degenerate_weight > 0
    ok, failed, aside = _voters(candidates, empty_results_vote or weighed)
    if not ok:
        return Vote(
            sql=None,
            winner_hash=None,
            confidence=0.0,
            groups=[],
            reason="no candidate executed successfully",
        )
    executed = len(ok) + len(aside)
    groups = _groups(ok, priority, weights, executed, len(ok), rule, question)
    total = sum(g["score"] for g in groups)
    if rule is not None:
        consensus.share_near(groups, rule)
    kept, dropped, note = _keep_confident(groups, threshold, total if rule is not None else None)
    kept.sort(key=_order(tie_break))
    dropped.sort(key=_order(tie_break))
    how, n_top = _break_tie(kept, tie_break)
    if rule is not None:
        note = consensus.weigh_evidence(kept, total, question, rule, misses) + note
    win = kept[0]
    reason = _majority_reason(win, n_top, how, len(ok), len(aside), executed)
    reason += _reason_notes(win, weights, failed, len(aside))
    set_aside = _groups(aside, priority, weights, executed, None)
    for g in [*kept, *dropped, *set_aside]:
        g.pop("answer", None)
    set_aside.sort(key=lambda g: -g["size"])
    return Vote(
        sql=win["sql"],
        winner_hash=win["result_hash"],
        confidence=win["confidence"],
        groups=kept,
        reason=reason + note,
        dropped=dropped,
        method="majority",
        set_aside=set_aside,
    )


def _reason_notes(win: dict, weights: dict | None, failed: int, n_aside: int) -> str:
    """What ``select``'s reason adds after the majority: weights, failures, results set aside."""
    out = f" (votes weighted by learned reliability: score {win['score']:g})" if weights else ""
    if failed:
        out += f"; {failed} candidate(s) refused, failed or timed out"
    if n_aside:
        out += f"; {n_aside} candidate(s) with an empty result set aside (others returned rows)"
    return out


def _voters(
    candidates: list[Candidate], empty_results_vote: bool
) -> tuple[list[Candidate], int, list[Candidate]]:
    """The candidates that vote, how many were refused or failed, and the executed ones set
    aside (an empty result while another candidate returned rows)."""
    ok = [c for c in candidates if c.status == Status.OK and c.result_hash is not None]
    failed = len(candidates) - len(ok)
    aside: list[Candidate] = []
    if not empty_results_vote and any((c.row_count or 0) > 0 for c in ok):
        aside = [c for c in ok if c.row_count == 0]
        ok = [c for c in ok if c.row_count != 0]
    return ok, failed, aside


def _groups(
    members_of: list[Candidate],
    priority: list[str] | None,
    weights: dict[str, float] | None,
    executed: int,
    voters: int | None,
    rule: VoteRule | None = None,
    question: str | None = None,
) -> list[dict[str, Any]]:
    """One group per result hash of ``members_of`` (per answer key under a ``rule``: the dict
    form ``select`` documents, with ``answer_key`` and the representative's ``answer``):
    ``confidence`` is the group's share of the ``executed`` candidates, ``vote_share`` its
    share of the ``voters`` (None for a group set aside)."""
    rank = {m: i for i, m in enumerate(priority or [])}
    if rule is None:
        weigh, key = (lambda c: (weights or {}).get(c.model, 1.0)), (lambda c: c.result_hash)
    else:
        weigh, key = consensus.voter_weight(weights, rule, members_of), consensus.answer_key
    by_key: dict[str, list[Candidate]] = {}
    for c in members_of:
        by_key.setdefault(key(c), []).append(c)
    groups: list[dict[str, Any]] = []
    for k, members in by_key.items():
        form = members if rule is None else consensus.form_members(members, weigh, question)
        fastest = representative(form, weights)
        groups.append(
            {
                "result_hash": fastest.result_hash,
                "answer_key": k,
                "answer": fastest.answer,
                "size": len(members),
                "confidence": len(members) / executed,
                "vote_share": len(members) / voters if voters else None,
                "sources": [c.source for c in members],
                "fastest_ms": min(members, key=_ms).exec_ms,
                "fastest_source": fastest.source,
                "sql": fastest.sql,
                "row_count": fastest.row_count,
                "best_priority": min(rank.get(c.model, len(rank)) for c in members),
                "score": round(sum(weigh(c) for c in members), 6),
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
    """Put the winner of the top score first in ``kept``; return how the tie was decided and how
    many groups shared the top score (equal speed within ``same_speed_ms``: priority decides)."""
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
    """Build the user message of the multiple-choice selection (options A, B, … best first). Source:
    MCS-SQL (Lee et al. 2024) §3.3.

    Args:
        question: the question (natural language).
        groups: ``Vote.groups`` of ``select``, best first (at most 26 shown); each ``sql`` as
            the gate's SQL path shows it (``Gate.sql``).
        schema_text: the schema as the prompts show it.
        rows: result hash → the group's row texts as the gate let them through; None for none.
        evidence: BIRD-style external knowledge for the question, or None.
        notes: result hash → what the gate withheld from that option's rows; None for none.

    Returns:
        The user message text.
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
            shown_sql(g["sql"]) + ";",
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
    """Read the option a model's answer names (``Option B``, ``B``, ``(b)``, ``Answer: B``, ``B)``).

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
    """Apply the multiple-choice answer to a vote, in place. Source: MCS-SQL (Lee et al. 2024) §3.3.

    Args:
        v: the majority ``Vote`` of ``select``.
        choice: 0-based index into ``v.groups`` (``parse_choice``), or None.
        model: name of the model that chose, for the reason.
        answer: the model's raw answer (for the reason when unusable), or None.

    Returns:
        ``v``: the chosen group first with its own confidence (``method`` ``multiple_choice``), or
        the majority kept with the reason (``majority (multiple choice unusable)``).
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
