"""When a prediction's result equals the gold's: the three rules the benchmarks report.

* ``strict``: the same rows (as a multiset; as a sequence where the gold has a top-level
  ORDER BY), each row's columns in the gold's order. nl2sql's own rule until issue 68.
* ``spider`` (Spider's official rule, the one papers report on Spider): as ``strict``, but the
  prediction's columns may come in any order — a port of test-suite-sql-eval's ``result_eq``
  (Zhong, Yu and Klein 2020, "Semantic Evaluation for Text-to-SQL with Distilled Test Suites";
  github.com/taoyds/test-suite-sql-eval, ``exec_eval.py``): two empty results are equal; else
  the same number of rows and of columns, a quick rejection on each row's values sorted, then
  some permutation of the prediction's columns under which the rows are equal (as a multiset, or
  in order). Where the original samples 20 random rows of the prediction to narrow the
  permutations of more than 3 columns, this port reads every row (the same answer, no chance).
* ``bird`` (BIRD's rule, ``evaluation.py`` of the BIRD benchmark): the *sets* of rows are equal —
  duplicates and row order never count, columns in the gold's order.

Values are compared as the caller normalized them (``common.normalize_row``).
"""

from __future__ import annotations

from collections import Counter
from itertools import product
from typing import Any

__all__ = ["RULES", "bird_eq", "spider_eq", "strict_eq"]


def strict_eq(gold: list[tuple], pred: list[tuple], ordered: bool) -> bool:
    """Same rows, columns in the gold's order.

    Args:
        gold: the gold query's rows. pred: the prediction's rows.
        ordered: compare as sequences (the gold has a top-level ORDER BY), else as multisets.

    Returns:
        True when equal.
    """
    if ordered:
        return gold == pred
    return len(gold) == len(pred) and Counter(gold) == Counter(pred)


def _unorder_row(row: tuple) -> tuple:
    return tuple(sorted(row, key=lambda x: str(x) + str(type(x))))


def _quick_reject(gold: list[tuple], pred: list[tuple], ordered: bool) -> bool:
    """False when no column order can make the results equal (each row's values as a sorted
    tuple differ), as test-suite-sql-eval's ``quick_rej``."""
    a = [_unorder_row(r) for r in gold]
    b = [_unorder_row(r) for r in pred]
    return a == b if ordered else set(a) == set(b)


def _permutations(gold: list[tuple], pred: list[tuple]) -> Any:
    """The column permutations worth trying: prediction column j may stand for gold column i
    only when every value of j is among column i's values."""
    width = len(pred[0])
    allowed = [set(range(width)) for _ in range(width)]
    if width > 3:
        gold_cols = [{row[i] for row in gold} for i in range(width)]
        for row in pred:
            for i in range(width):
                allowed[i] = {j for j in allowed[i] if row[j] in gold_cols[i]}
    return product(*allowed)


def spider_eq(gold: list[tuple], pred: list[tuple], ordered: bool) -> bool:
    """Spider's official rule: equal under some order of the prediction's columns.

    Args:
        gold: the gold query's rows. pred: the prediction's rows (tuples of hashable values).
        ordered: row order counts (the gold has a top-level ORDER BY).

    Returns:
        True when some permutation of the prediction's columns gives the gold's rows.
    """
    if not gold and not pred:
        return True
    if len(gold) != len(pred) or len(gold[0]) != len(pred[0]):
        return False
    if not _quick_reject(gold, pred, ordered):
        return False
    for perm in _permutations(gold, pred):
        if len(set(perm)) != len(perm):
            continue
        permuted = [tuple(row[j] for j in perm) for row in pred]
        if ordered and permuted == gold:
            return True
        if not ordered and set(permuted) == set(gold) and Counter(permuted) == Counter(gold):
            return True
    return False


def bird_eq(gold: list[tuple], pred: list[tuple], ordered: bool = False) -> bool:
    """BIRD's rule: the same set of rows (``set(predicted) == set(ground_truth)``).

    Args:
        gold: the gold query's rows. pred: the prediction's rows.
        ordered: ignored (BIRD never counts row order); kept for one signature.

    Returns:
        True when the sets of rows are equal.
    """
    return set(gold) == set(pred)


# rule name -> its function; ``common.score`` reports "strict" and the data's official one
RULES = {"strict": strict_eq, "spider": spider_eq, "bird": bird_eq}
