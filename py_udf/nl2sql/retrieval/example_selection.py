"""DAIL selection of few-shot examples (skeleton Jaccard ≥ τ with PreSQL's, then question
similarity). Source: DAIL-SQL (Gao et al. 2023) §3.3."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import TokenError

from ..core.errors import CandidateRefused
from ..core.types import Example
from .example_pool import sql_skeleton


@lru_cache(maxsize=4096)
def _skeleton_tokens(skeleton: str) -> frozenset[str]:
    """Upper-cased token texts of an SQL skeleton (split on whitespace where sqlglot refuses)."""
    try:
        toks = Postgres().tokenize(skeleton)
    except TokenError:
        return frozenset(skeleton.upper().split())
    return frozenset(t.text.upper() for t in toks)


def skeleton_jaccard(a: str, b: str) -> float:
    """Compute the Jaccard similarity of two SQL skeletons' token sets (DAIL-SQL §3.3).

    Args:
        a: an SQL skeleton.
        b: another SQL skeleton.

    Returns:
        float in [0, 1]: |A ∩ B| / |A ∪ B|; 0.0 when either token set is empty.
    """
    ta, tb = _skeleton_tokens(a), _skeleton_tokens(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


def presql_skeleton(presql: str | None) -> str | None:
    """Compute PreSQL's skeleton (``example_pool.sql_skeleton``).

    Args:
        presql: the PreSQL's text (PostgreSQL), or None / empty.

    Returns:
        The skeleton; None when there is no PreSQL or it does not parse (never raises for that).
    """
    if not presql:
        return None
    try:
        return sql_skeleton(presql)
    except CandidateRefused:
        return None


@dataclass
class Selection:
    """What DAIL selection chose: ``examples``, ``how`` (``dail``, ``dail + fallback``,
    ``question similarity``), ``passed`` (skeleton Jaccard ≥ ``tau``)."""

    examples: list[Example]
    how: str
    passed: int
    tau: float


def dail_select(
    candidates: list[Example],
    skeletons: dict[int, str],
    presql_skel: str | None,
    k: int,
    tau: float,
) -> Selection:
    """Select up to ``k`` few-shot examples by DAIL selection (DAIL-SQL §3.3).

    Args:
        candidates: Example list ordered by masked-question similarity, best first.
        skeletons: Example id -> its SQL skeleton (missing: Jaccard 0).
        presql_skel: PreSQL's skeleton (``presql_skeleton``), or None.
        k: int, how many examples to choose at most.
        tau: float in [0, 1], the skeleton Jaccard threshold τ.

    Returns:
        Selection with the chosen examples and how they were chosen.
    """
    if not presql_skel:
        return Selection(list(candidates[:k]), "question similarity", 0, tau)
    scored = []
    for e in candidates:
        j = skeleton_jaccard(skeletons.get(e.id) or "", presql_skel)
        e.skeleton_jaccard = round(j, 4)
        scored.append(e)
    passed = [e for e in scored if e.skeleton_jaccard >= tau]
    chosen = passed[:k]
    if len(chosen) < k:
        chosen += [e for e in scored if e.skeleton_jaccard < tau][: k - len(chosen)]
    how = "dail" if len(passed) >= k else "dail + fallback"
    return Selection(chosen, how, len(passed), tau)
