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

from .examples import sql_skeleton
from .errors import CandidateRefused
from .types import Example


@lru_cache(maxsize=4096)
def skeleton_tokens(skeleton: str) -> frozenset[str]:
    """The token set of an SQL skeleton, by sqlglot's PostgreSQL tokenizer (keywords
    upper-cased; ``_`` stands for every identifier and ``?`` for every literal). Cached per
    process: the pool's skeletons are compared with every PreSQL."""
    try:
        toks = Postgres().tokenize(skeleton)
    except TokenError:
        return frozenset(skeleton.upper().split())
    return frozenset(t.text.upper() for t in toks)


def skeleton_jaccard(a: str, b: str) -> float:
    """Jaccard similarity (0..1) of two SQL skeletons' token sets; 0 when either is empty."""
    ta, tb = skeleton_tokens(a), skeleton_tokens(b)
    if not ta or not tb:
        return 0.0
    return len(ta & tb) / len(ta | tb)


def presql_skeleton(presql: str | None) -> str | None:
    """PreSQL's skeleton, or None when there is no PreSQL or it does not parse."""
    if not presql:
        return None
    try:
        return sql_skeleton(presql)
    except CandidateRefused:
        return None


@dataclass
class Selection:
    """What DAIL selection chose: the examples, and how (``dail`` = all passed τ, ``dail +
    fallback`` = some filled by question similarity, ``question similarity`` = no PreSQL
    skeleton)."""

    examples: list[Example]
    how: str
    passed: int
    tau: float


def dail_select(candidates: list[Example], skeletons: dict[int, str], presql_skel: str | None,
                k: int, tau: float) -> Selection:
    """DAIL selection among ``candidates`` (ordered by masked-question similarity, best first):
    keep those whose skeleton (``skeletons[example.id]``) has Jaccard ≥ ``tau`` with
    ``presql_skel``, in that order; fill up to ``k`` with the best remaining candidates. Each
    chosen Example gets ``skeleton_jaccard`` set. Without a PreSQL skeleton the first ``k``
    candidates are returned (question similarity only)."""
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
        chosen += [e for e in scored if e.skeleton_jaccard < tau][:k - len(chosen)]
    how = "dail" if len(passed) >= k else "dail + fallback"
    return Selection(chosen, how, len(passed), tau)
