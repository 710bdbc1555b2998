"""The vote's rule beyond plain majority: equal answers vote together, near answers share
weight, degenerate results weigh less, and a weak consensus is decided by the result's shape
against the question (docs/benchmarks.md "Equal answers, near answers, weak consensus": the
three parameters, how they were fitted). Sources: Spider's evaluator (Yu et al. 2018);
MCS-SQL (Lee et al. 2024) §4.6; SQLens (2025); DeepEye-SQL (2025) (a judge only below a
share of the candidates)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import answers
from ..core.types import Candidate, Status

# Aggregate outputs and unnamed expressions: a question asks for them without naming them.
_NEUTRAL_NAMES = frozenset({"count", "sum", "avg", "max", "min", "?column?", "round", "coalesce"})
# Aggregate outputs as a question words them (a column named ``avg`` is asked as "average").
_ALIASES = {
    "avg": ("average", "mean"),
    "max": ("maximum", "max", "most", "highest", "largest"),
    "min": ("minimum", "min", "least", "lowest", "smallest"),
    "count": ("number", "many", "count"),
    "sum": ("total", "sum"),
}
_ONE_VALUE = ("how many", "number of", "count ", "average", "total ", "maximum", "minimum", "sum ")
_MANY = (" each ", " every ", " per ", " for all ", " by ", " different ", " respectively")


@dataclass(frozen=True)
class VoteRule:
    """The parameters of the vote (fitted on the visible Spider databases, leave-one-database-
    out; docs/benchmarks.md)."""

    degenerate_weight: float = 0.1  # weight of an empty, all-NULL or all-zero result's vote
    near_share: float = 0.5  # share of a near group's votes a group adds to its own
    contender_ratio: float = 0.5  # weak consensus: groups with this share of the top compete


def answer_key(c: Candidate) -> str | None:
    """The key a candidate's answer votes under: ``answer["key"]``, else its ``result_hash``
    (a candidate described before answers were).

    Args:
        c: an executed candidate.

    Returns:
        The key, or None when it has no result.
    """
    return (c.answer or {}).get("key") or c.result_hash


def is_degenerate(c: Candidate) -> bool:
    """Whether a candidate's result is empty, all NULL or all zero.

    Args:
        c: an executed candidate.

    Returns:
        True when degenerate (``answers.degenerate_kind``); an undescribed one: when empty.
    """
    if c.answer is not None:
        return c.answer.get("degenerate") is not None
    return c.row_count == 0


def held_by_majority(
    cands: list[Candidate],
    weights: dict[str, float] | None = None,
    settled: Callable[[Candidate], bool] | None = None,
) -> str | None:
    """The answer that more than half of the candidates' vote weight already holds, counting
    every candidate (failed, refused and empty ones too, as if each could still join another
    answer). Repairing the others cannot outvote it: a repaired group, near it or not, weighs
    less than it does (``near_share`` < 1). Source: self-consistency's majority vote (Wang et
    al. 2023); docs/internals/generation.md "Repair".

    Args:
        cands: the question's candidates, executed.
        weights: model name -> vote weight (learned reliability), or None: each weighs 1.
        settled: whether a candidate's answer is final (repair would not touch it), or None:
            every executed one is.

    Returns:
        The answer key (``answer_key``) of an executed, not degenerate, settled answer holding
        a strict majority of the weight, or None.
    """

    def weight(c: Candidate) -> float:
        return (weights or {}).get(c.model, 1.0)

    held: dict[str, float] = {}
    for c in cands:
        ok = c.status == Status.OK and not is_degenerate(c) and (settled is None or settled(c))
        key = answer_key(c) if ok else None
        if key:
            held[key] = held.get(key, 0.0) + weight(c)
    best = max(held, key=held.__getitem__, default=None)
    total = sum(weight(c) for c in cands)
    return best if best is not None and held[best] * 2 > total else None


def are_near(a: dict[str, Any] | None, b: dict[str, Any] | None, rows: tuple[int, int]) -> bool:
    """Whether two answers are near without being equal: one a column subset of the other, or
    equal once fractional numbers are rounded.

    Args:
        a: an answer (``answers.describe``), or None.
        b: another, or None.
        rows: their row counts.

    Returns:
        True when near; False when either is None or they are equal.
    """
    if not a or not b or a["key"] == b["key"]:
        return False
    if a["rounded"] == b["rounded"]:
        return True
    return answers.is_column_subset(a, b, rows) or answers.is_column_subset(b, a, rows[::-1])


def voter_weight(
    weights: dict[str, float] | None, rule: VoteRule, ok: list[Candidate]
) -> Callable[[Candidate], float]:
    """The weight of each candidate's vote: its model's (learned reliability, else 1), times
    ``rule.degenerate_weight`` for a degenerate result while another candidate's is not, unless
    a result that is not degenerate bears it out (holds its NULL or zero column: ``are_near``).
    A ``degenerate_weight`` of 0 is the rule before: ``select`` sets empty results aside while
    others returned rows, and NULL or zero results weigh as any other.

    Args:
        weights: model name -> weight, or None.
        rule: the vote's parameters.
        ok: the executed candidates that vote.

    Returns:
        A function of a candidate to its weight.
    """
    sound = [(c.answer, c.row_count or 0) for c in ok if not is_degenerate(c)]

    def borne_out(c: Candidate) -> bool:
        return any(are_near(c.answer, a, (c.row_count or 0, n)) for a, n in sound)

    def weigh(c: Candidate) -> float:
        w = (weights or {}).get(c.model, 1.0)
        lowered = rule.degenerate_weight > 0 and sound and is_degenerate(c) and not borne_out(c)
        return w * rule.degenerate_weight if lowered else w

    return weigh


def form_members(
    members: list[Candidate], weigh: Callable[[Candidate], float], question: str | None = None
) -> list[Candidate]:
    """The members of an answer group whose exact result (column order, text as written) the
    group answers with: the columns in the order the question names them
    (``question_order``), then the form holding the most weight.

    Args:
        members: candidates with the same ``answer_key``, non-empty.
        weigh: a candidate's vote weight.
        question: the question, or None.

    Returns:
        The members sharing that ``result_hash`` (ties: the form listed first).
    """
    by_form: dict[str, list[Candidate]] = {}
    for c in members:
        by_form.setdefault(c.result_hash, []).append(c)
    if len(by_form) == 1:
        return members
    words = _words(question)

    def rank(ms: list[Candidate]) -> tuple[int, float]:
        names = (ms[0].answer or {}).get("names") or []
        return question_order(names, words), sum(weigh(c) for c in ms)

    return max(by_form.values(), key=rank)


def _words(question: str | None) -> list[str]:
    return re.findall(r"[a-z0-9]+", (question or "").lower())


def _position(name: str, words: list[str]) -> int | None:
    """Where the question first names a column (any part of its name, at ``_``, beginning a
    word by its first four letters; an aggregate's by its words), or None."""
    found = []
    for p in (x for x in name.lower().split("_") if x):
        stems = _ALIASES.get(p, (p[:4],))
        found += [i for i, w in enumerate(words) if any(w.startswith(s) for s in stems)][:1]
    return min(found) if found else None


def question_order(names: list[str], words: list[str]) -> int:
    """How far a result's columns follow the order the question names them in.

    Args:
        names: the result's column names, in order.
        words: the question's words, lower case.

    Returns:
        The pairs of named columns in the question's order minus those out of it; a count is
        not placed ("how many X for each Y" lists Y first as often as not).
    """
    named = (_position(n, words) for n in names if n.lower() != "count")  # "how many … each"
    pos = [p for p in named if p is not None]
    return sum((a < b) - (a > b) for i, a in enumerate(pos) for b in pos[i + 1 :])


def share_near(groups: list[dict[str, Any]], rule: VoteRule) -> None:
    """Add to each group's ``score`` ``rule.near_share`` of the own score of every group near it
    (``are_near``); ``own_score`` keeps its own, ``near`` the keys of the groups near it.

    Args:
        groups: the vote's groups (``answer``, ``row_count``, ``score``), changed in place.
        rule: the vote's parameters.
    """
    for g in groups:
        g["own_score"], g["near"] = g["score"], []
    if rule.near_share <= 0:
        return
    for g in groups:
        for h in groups:
            if h is not g and are_near(g["answer"], h["answer"], (g["row_count"], h["row_count"])):
                g["near"].append(h["answer_key"])
                g["score"] = round(g["score"] + rule.near_share * h["own_score"], 6)


def expects_one_row(question: str | None) -> bool:
    """Whether a question asks for one value (``how many``, ``the average``, …, not ``for
    each``).

    Args:
        question: the question, or None.

    Returns:
        True when it reads as a single-value question.
    """
    q = f" {(question or '').lower().strip()} "
    return any(w in q for w in _ONE_VALUE) and not any(w in q for w in _MANY)


def _asked(name: str, words: list[str]) -> bool:
    """Whether the question names a column (``_position``: a part of its name), or the name is
    an aggregate's."""
    if name.lower() in _NEUTRAL_NAMES:
        return True
    return _position(name, words) is not None


def shape_fit(question: str | None, answer: dict[str, Any] | None, rows: int) -> tuple[int, int]:
    """How well a result's shape fits a question, compared as a tuple (higher is better).

    Args:
        question: the question, or None.
        answer: the result's answer (``answers.describe``: ``names``), or None.
        rows: its row count.

    Returns:
        (1 when the question does not ask one value or the result has one row, else 0; minus
        the number of its columns the question does not ask for).
    """
    words = _words(question)
    names = (answer or {}).get("names") or []
    one = 0 if expects_one_row(question) and rows != 1 else 1
    return one, -sum(1 for n in names if not _asked(n, words))


def weigh_evidence(
    kept: list[dict[str, Any]],
    total: float,
    question: str | None,
    rule: VoteRule,
    misses: Callable[[list[dict[str, Any]]], list[int]] | None = None,
) -> str:
    """Where the top group holds less than a majority of the votes (its own), let the groups within
    ``rule.contender_ratio`` of its score compete: fewest string literals missing from the value
    index first (``misses``, when given), then ``shape_fit``; the best goes first (equal: the
    order of the vote).

    Args:
        kept: the vote's groups, best first (``score``, ``own_score``, ``answer``,
            ``row_count``, ``sql``); reordered.
        total: the summed own score of every group that voted.
        question: the question, or None (no evidence: nothing changes).
        rule: the vote's parameters.
        misses: the contenders' counts of missing literals (``literals.literal_misses``), or
            None for no literal evidence.

    Returns:
        The note the vote's reason ends with ("" when the order stands).
    """
    if not kept or question is None or total <= 0 or kept[0]["own_score"] * 2 > total:
        return ""
    bar = rule.contender_ratio * kept[0]["score"]
    contenders = [g for g in kept if g["score"] + 1e-9 >= bar]
    if len(contenders) < 2:
        return ""
    fits = [shape_fit(question, g["answer"], g["row_count"] or 0) for g in contenders]
    lost = misses(contenders) if misses is not None else [0] * len(contenders)
    best = max(range(len(contenders)), key=lambda i: (-lost[i], fits[i], -i))
    if best == 0:
        return ""
    win = contenders[best]
    kept.remove(win)
    kept.insert(0, win)
    why = f"fewer literals missing from the value index ({lost[best]} against {lost[0]})"
    if lost[best] == lost[0]:
        why = f"the result's shape fits the question better (rows, columns asked: {fits[best]} "
        why += f"against {fits[0]})"
    return f"; weak consensus (the top group {contenders[0]['score']:g} of {total:g}): {why}"
