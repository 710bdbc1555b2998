"""The vote weighted by learned per-model reliability (docs/internals/selection.md "Learned
reliability"). Sources: PET-SQL (Li et al. 2024) §3.4; Nitzan & Paroush (1982)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ALL",
    "LEVELS",
    "MIN_LEVEL_QUESTIONS",
    "MIN_WEIGHT",
    "MODES",
    "SHRINK",
    "Reliability",
    "calibrate_questions",
    "cross_validate",
    "from_rows",
    "group_scores",
    "learn",
    "significant",
    "weighted_choice",
]

LEVELS = ("easy", "medium", "hard", "extra")
ALL = "all"
SHRINK = 10.0
MIN_WEIGHT = 0.05
MIN_LEVEL_QUESTIONS = 20


@dataclass
class Reliability:
    """What calibration learned: counts, weights and voter sets (levels: ``LEVELS`` or ``"all"``)."""

    # (model, level) -> (judged, right)
    counts: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    weights: dict[tuple[str, str], float] = field(default_factory=dict)  # (model, level) -> > 0
    voters: dict[str, list[str]] = field(default_factory=dict)  # level -> voters (absent: all)
    questions: int = 0  # judged questions learned from

    def weight(self, model: str, level: str | None) -> float:
        """The weight of ``model``'s vote for a PreSQL of hardness ``level``.

        Args:
            model: the model's name.
            level: the PreSQL's hardness, or None when unknown.

        Returns:
            The weight at that level, else the model's overall weight, else 1.0 (never judged).
        """
        if level and (model, level) in self.weights:
            return self.weights[(model, level)]
        return self.weights.get((model, ALL), 1.0)

    def empty(self) -> bool:
        """Whether nothing was learned.

        Returns:
            True when there are no weights.
        """
        return not self.weights

    def rows(self) -> list[dict[str, Any]]:
        """One dict per (model, level): the rows of ``nl2sql.model_reliability``.

        Returns:
            ``{"model", "level", "judged", "right", "weight", "voter"}`` dicts sorted by model, level;
            ``voter`` None for ``all`` and for levels without a learned set.
        """
        out = []
        for (m, lv), (n, r) in sorted(self.counts.items()):
            vs = self.voters.get(lv)
            out.append(
                {
                    "model": m,
                    "level": lv,
                    "judged": n,
                    "right": r,
                    "weight": round(self.weights.get((m, lv), 1.0), 6),
                    "voter": (m in vs) if vs is not None else None,
                }
            )
        return out


def from_rows(rows: list[dict[str, Any]]) -> Reliability:
    """Rebuild a Reliability from ``nl2sql.model_reliability`` rows.

    Args:
        rows: dicts with ``model``, ``level``, ``judged``, ``right``, ``weight``, ``voter``.

    Returns:
        The Reliability (``questions`` left 0: the table does not keep it).
    """
    rel = Reliability()
    for r in rows:
        key = (r["model"], r["level"])
        rel.counts[key] = (int(r["judged"]), int(r["right"]))
        rel.weights[key] = float(r["weight"])
        if r.get("voter") is not None:
            vs = rel.voters.setdefault(r["level"], [])
            if r["voter"]:
                vs.append(r["model"])
    rel.voters = {lv: vs for lv, vs in rel.voters.items() if vs}
    return rel


def _log_odds(right: float, judged: float) -> float:
    p = (right + 1.0) / (judged + 2.0)
    return max(MIN_WEIGHT, math.log(p / (1.0 - p)))


def _count(questions: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[int, int]]:
    counts: dict[tuple[str, str], list[int]] = {}
    for q in questions:
        for c in q.get("candidates") or []:
            for lv in (ALL, q.get("level")):
                if lv:
                    n = counts.setdefault((c["model"], lv), [0, 0])
                    n[0] += 1
                    n[1] += bool(c.get("right"))
    return {k: (v[0], v[1]) for k, v in counts.items()}


def learn(questions: list[dict[str, Any]]) -> Reliability:
    """Learn weights and voter sets from judged questions. Source: PET-SQL (Li et al. 2024) §3.4;
    Nitzan & Paroush (1982), log-odds weights.

    Args:
        questions: judged questions, each ``{"level": easy|medium|hard|extra|None,
            "candidates": [{"model": str, "group": hashable result id, "right": bool}]}``
            (executed candidates only).

    Returns:
        Reliability; empty (plain majority) for no judged candidate.
    """
    rel = Reliability(counts=_count(questions), questions=len(questions))
    for (m, lv), (n, r) in rel.counts.items():
        if lv == ALL:
            rel.weights[(m, lv)] = _log_odds(r, n)
    for (m, lv), (n, r) in rel.counts.items():
        if lv != ALL:
            an, ar = rel.counts[(m, ALL)]
            p_all = (ar + 1.0) / (an + 2.0)
            rel.weights[(m, lv)] = _log_odds(r + SHRINK * p_all, n + SHRINK)
    for lv in LEVELS:
        qs = [q for q in questions if q.get("level") == lv]
        if len(qs) >= MIN_LEVEL_QUESTIONS:
            rel.voters[lv] = _best_voters(qs, rel, lv)
    return rel


def _best_voters(qs: list[dict[str, Any]], rel: Reliability, lv: str) -> list[str]:
    """The k most reliable models at ``lv``, k maximising the vote's accuracy on ``qs``."""
    models = sorted(
        {c["model"] for q in qs for c in q["candidates"]}, key=lambda m: (-rel.weight(m, lv), m)
    )
    best, best_ok = models, -1
    for k in range(len(models), 0, -1):
        chosen = set(models[:k])
        ok = sum(weighted_choice(q, rel, chosen) for q in qs)
        if ok > best_ok:
            best, best_ok = models[:k], ok
    return best


def group_scores(
    candidates: list[dict[str, Any]],
    rel: Reliability,
    level: str | None,
    voters: set[str] | None = None,
) -> dict[Any, float]:
    """Score each result group: the sum of its members' weights.

    Args:
        candidates: ``{"model", "group"}`` dicts (executed candidates).
        rel: the learned reliability (empty: every weight 1, a plain majority).
        level: the PreSQL's hardness, or None.
        voters: the models that vote (None: every model).

    Returns:
        group -> score, groups in first-seen order.
    """
    out: dict[Any, float] = {}
    for c in candidates:
        if voters is not None and c["model"] not in voters:
            continue
        out[c["group"]] = out.get(c["group"], 0.0) + rel.weight(c["model"], level)
    return out


def weighted_choice(q: dict[str, Any], rel: Reliability, voters: set[str] | None = None) -> bool:
    """Whether the learned vote picks a right group for judged question ``q`` (offline check).

    Args:
        q: a judged question (``learn``'s form).
        rel: the learned reliability.
        voters: models that vote, or None.

    Returns:
        True when the chosen group's candidates are right.
    """
    cands = q.get("candidates") or []
    if not cands:
        return False
    lv = q.get("level")
    vs = voters if voters is not None else (set(rel.voters[lv]) if lv in rel.voters else None)
    scores = group_scores(cands, rel, lv, vs) or group_scores(cands, rel, lv)
    win = max(scores, key=lambda g: scores[g])  # max keeps the first of equal scores
    return any(c["right"] for c in cands if c["group"] == win)


MODES = ("majority", "weights", "weights+voters")


def _mode_choice(q: dict[str, Any], rel: Reliability, mode: str) -> bool:
    if mode == "majority":
        return weighted_choice(q, Reliability(), set())  # empty voters: everyone, weight 1
    if mode == "weights":
        return weighted_choice(q, rel, {c["model"] for c in q.get("candidates") or []})
    return weighted_choice(q, rel)


def cross_validate(questions: list[dict[str, Any]], folds: int = 5) -> dict[str, dict[str, int]]:
    """Score each vote mode on held-out judged questions (k-fold, question i in fold i mod k).

    Args:
        questions: judged questions (``learn``'s form).
        folds: int >= 2, the number of folds.

    Returns:
        mode (``MODES``) -> ``{"right", "won", "lost"}``: held-out questions right, right where the
        plain majority is wrong, wrong where it is right.
    """
    out = {m: {"right": 0, "won": 0, "lost": 0} for m in MODES}
    for k in range(folds):
        train = [q for i, q in enumerate(questions) if i % folds != k]
        test = [q for i, q in enumerate(questions) if i % folds == k]
        rel = learn(train)
        for q in test:
            base = _mode_choice(q, rel, "majority")
            for m in MODES:
                ok = _mode_choice(q, rel, m)
                out[m]["right"] += ok
                out[m]["won"] += ok and not base
                out[m]["lost"] += base and not ok
    return out


def significant(won: int, lost: int, z: float = 2.0) -> bool:
    """Whether a mode beats the majority by more than chance: a sign test (McNemar's, no continuity
    correction) on the discordant questions, ``won - lost >= z * sqrt(won + lost)``.

    Args:
        won: held-out questions the mode gets right and the majority wrong.
        lost: held-out questions the mode gets wrong and the majority right.
        z: the normal quantile to clear (2: about 95 % one-sided).

    Returns:
        True when the difference is significant (and positive).
    """
    return won > lost and (won - lost) >= z * math.sqrt(won + lost)


def calibrate_questions(
    questions: list[dict[str, Any]], folds: int = 5
) -> tuple[Reliability, str, dict[str, int]]:
    """Learn from judged questions and choose the vote mode that held out best (a learned mode
    only when ``significant`` over the majority).

    Source: PET-SQL (Li et al. 2024) §3.4.

    Args:
        questions: judged questions (``learn``'s form).
        folds: the folds of the held-out check.

    Returns:
        (Reliability learned on every question, voter sets cleared unless the mode uses them;
        the mode, one of ``MODES``; ``cross_validate``'s figures per mode).
    """
    rel = learn(questions)
    if len(questions) >= folds:
        cv = cross_validate(questions, folds)
    else:
        cv = {m: {"right": 0, "won": 0, "lost": 0} for m in MODES}
    mode = "majority"
    for m in MODES[1:]:
        if significant(cv[m]["won"], cv[m]["lost"]) and (
            mode == "majority" or cv[m]["right"] > cv[mode]["right"]
        ):
            mode = m
    if mode != "weights+voters":
        rel.voters = {}
    return rel, mode, cv
