"""Whether a demo answer's rows are its reference answer's, by Spider's official rule: the same
rows (as a multiset; in order where the reference orders them), columns matched in any order
(test-suite-sql-eval's ``result_eq``); numbers compared to 4 decimals."""

from __future__ import annotations

import itertools
from collections import Counter
from decimal import Decimal

from nl2sql.core.sqlcheck import CandidateRefused, has_top_level_order

__all__ = ["same_result"]

MAX_PERMUTED = 6  # columns beyond which only the given order is tried (720 permutations)


def _value(v):
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float, Decimal)):
        return round(float(v), 4)
    return str(v)


def _ordered(gold: str) -> bool:
    try:
        return has_top_level_order(gold)
    except CandidateRefused:
        return False


def same_result(gold_rows: list, rows: list, gold: str) -> bool:
    """Whether ``rows`` answer as ``gold_rows`` do.

    Args:
        gold_rows: the reference query's rows. rows: the answer's rows (tuples or lists).
        gold: the reference SQL (its top-level ORDER BY makes row order count).

    Returns:
        True when some order of the answer's columns gives the reference's rows.
    """
    g = [tuple(_value(v) for v in r) for r in gold_rows]
    p = [tuple(_value(v) for v in r) for r in rows]
    if len(g) != len(p):
        return False
    width = len(g[0]) if g else 0
    if p and len(p[0]) != width:
        return False
    orders = (
        itertools.permutations(range(width)) if width <= MAX_PERMUTED else [tuple(range(width))]
    )
    ordered = _ordered(gold)
    for perm in orders:
        q = [tuple(r[i] for i in perm) for r in p]
        if (q == g) if ordered else (Counter(q) == Counter(g)):
            return True
    return False
