"""DAIL selection of few-shot examples (DAIL-SQL, Gao et al. 2023, §3.3).

After PreSQL, the candidates retrieved by masked-question similarity are re-ranked: only
examples whose SQL skeleton is similar to PreSQL's skeleton (Jaccard similarity of their token
sets ≥ τ) are kept, in masked-question-similarity order; when fewer than k pass, the rest is
filled with the most question-similar examples (question-similarity fallback).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import TokenError

from ..core.errors import CandidateRefused
from ..core.types import Example
from .example_pool import sql_skeleton


@lru_cache(maxsize=4096)
def skeleton_tokens(skeleton: str) -> frozenset[str]:
    """Split an SQL skeleton into its set of tokens, by sqlglot's PostgreSQL tokenizer.

    Token texts are upper-cased; in a skeleton of ``examples.sql_skeleton`` ``_`` stands for every
    identifier and ``%s`` for every literal (tokenized as ``%`` and ``S``). Text the tokenizer
    rejects is split on whitespace instead. Cached per process (4096 skeletons): the pool's
    skeletons are compared with every PreSQL.

    Source: DAIL-SQL (Gao et al. 2023) §3.3, skeleton similarity.

    Args:
        skeleton: an SQL skeleton (``examples.sql_skeleton``), or any SQL text.

    Returns:
        frozenset[str] of upper-cased token texts; empty for empty text.
    """
    try:
        toks = Postgres().tokenize(skeleton)
    except TokenError:
        return frozenset(skeleton.upper().split())
    return frozenset(t.text.upper() for t in toks)


def skeleton_jaccard(a: str, b: str) -> float:
    """Compute the Jaccard similarity of two SQL skeletons' token sets (``skeleton_tokens``).

    Source: DAIL-SQL (Gao et al. 2023) §3.3, skeleton similarity.

    Args:
        a: an SQL skeleton.
        b: another SQL skeleton.

    Returns:
        float in [0, 1]: |A ∩ B| / |A ∪ B|; 0.0 when either token set is empty.
    """
    ta, tb = skeleton_tokens(a), skeleton_tokens(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


def presql_skeleton(presql: str | None) -> str | None:
    """Compute PreSQL's skeleton (``examples.sql_skeleton``), or None when there is none.

    Args:
        presql: the PreSQL's text (PostgreSQL), or None / empty when there is no PreSQL.

    Returns:
        The skeleton text; None when ``presql`` is empty or does not parse as one statement
        (never raises for that).
    """
    if not presql:
        return None
    try:
        return sql_skeleton(presql)
    except CandidateRefused:
        return None


@dataclass
class Selection:
    """What DAIL selection chose, and how.

    Attributes:
        examples: list[Example], the chosen examples, at most k, best first.
        how: str, ``dail`` (at least k candidates passed τ), ``dail + fallback`` (fewer than k
            passed; the rest, if any candidates remain, filled by question similarity) or
            ``question similarity`` (no PreSQL skeleton: no skeleton filter).
        passed: int, how many candidates' skeleton Jaccard was ≥ τ (0 without a PreSQL
            skeleton).
        tau: float, the Jaccard threshold τ used, in [0, 1].
    """

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
    """Select up to ``k`` few-shot examples by DAIL selection.

    Candidates whose skeleton has Jaccard similarity ≥ ``tau`` with PreSQL's skeleton are kept,
    in question-similarity order; when fewer than ``k`` pass, the rest is filled with the best
    candidates below ``tau``. Every candidate gets ``skeleton_jaccard`` set (rounded to 4
    digits; the Example objects are changed in place). Without a PreSQL skeleton the first ``k``
    candidates are returned (question similarity only) and none is changed.

    Source: DAIL-SQL (Gao et al. 2023) §3.3, DAIL selection (masked-question similarity, then
    query-skeleton similarity above a threshold).

    Args:
        candidates: Example list ordered by masked-question similarity, best first.
        skeletons: Example id -> that example's SQL skeleton (a missing id counts as an empty
            skeleton: Jaccard 0).
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
