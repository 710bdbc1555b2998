"""Scoring an evaluation: rows against the verified SQL's, miss categories, per-model first
candidates, totals. Source: execution accuracy (EX) of Spider (Yu et al. 2018), BIRD (Li et al.
2023); miss categories after Databricks Genie's benchmark assessment."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..core.types import Status

# The categories of a miss, each with what it means.
CATEGORIES = {
    "EMPTY_RESULT": "the chosen SQL returned no rows; the verified SQL returns some",
    "RESULT_MISSING_ROWS": "the chosen SQL's rows are some of the verified SQL's, not all",
    "RESULT_EXTRA_ROWS": "the chosen SQL returns every row of the verified SQL, and more",
    "COLUMNS_MISMATCH": "the chosen SQL returns another number of columns",
    "SINGLE_CELL_DIFFERENCE": "both return one value, and the values differ",
    "RESULT_MISMATCH": "same columns, but rows differ both ways (wrong values or filters)",
    "ERROR": "SQL was written but none executed (database error, refused by the check, "
    "timeout), the chosen SQL failed when fetched, or the call failed",
    "NO_SQL": "no model wrote SQL (every model failed or answered without SQL)",
    "ABSTAINED": "the vote's confidence was below abstain_below: no answer was given",
}


@dataclass
class Judged:
    """One evaluated verified question: ``right`` None when the verified SQL failed;
    ``category`` of ``CATEGORIES``; ``per_model``: model -> first candidate right; ``ms``."""

    verified_query_id: int
    question: str
    expected_sql: str
    chosen_sql: str | None = None
    right: bool | None = None
    category: str | None = None
    detail: str | None = None
    per_model: dict[str, bool] = field(default_factory=dict)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    level: str | None = None
    log_id: int | None = None
    ms: float = 0.0


def classify_rows(gold: list[tuple], got: list[tuple]) -> tuple[str | None, str]:
    """Classify a chosen SQL's rows against the verified SQL's rows, compared as multisets of
    value tuples (as the result signature compares them); categories in ``CATEGORIES``.

    Args:
        gold: the verified SQL's rows.
        got: the chosen SQL's rows.

    Returns:
        (category, or None when the results are equal; the difference in words).
    """
    g, c = Counter(map(_key, gold)), Counter(map(_key, got))
    if g == c:
        return None, "the same rows"
    if not got:
        return "EMPTY_RESULT", f"no rows where the verified SQL returns {len(gold)}"
    if not gold:
        return "RESULT_EXTRA_ROWS", f"{len(got)} rows where the verified SQL returns none"
    gw, cw = {len(r) for r in gold}, {len(r) for r in got}
    if gw != cw:
        return "COLUMNS_MISMATCH", (f"{_widths(cw)} where the verified SQL returns {_widths(gw)}")
    if not c - g:
        return "RESULT_MISSING_ROWS", (
            f"{len(got)} of the verified SQL's {len(gold)} rows ({sum((g - c).values())} missing)"
        )
    if not g - c:
        return "RESULT_EXTRA_ROWS", (
            f"every row of the verified SQL's {len(gold)}, and {sum((c - g).values())} more"
        )
    if len(gold) == len(got) == 1 and gw == {1}:
        return (
            "SINGLE_CELL_DIFFERENCE",
            f"{_cell(got[0][0])} where the verified SQL has {_cell(gold[0][0])}",
        )
    return "RESULT_MISMATCH", (
        f"{sum((g - c).values())} of the verified SQL's {len(gold)} rows "
        f"missing, {sum((c - g).values())} other rows"
    )


def _key(row: tuple) -> str:
    return json.dumps(row, default=str)


def _widths(ws: set[int]) -> str:
    return " or ".join(f"{w} column{'s' if w != 1 else ''}" for w in sorted(ws))


def _cell(v: Any) -> str:
    return json.dumps(v, default=str)[:80]


def classify_outcome(
    trace: dict[str, Any] | None, error: str | None = None
) -> tuple[str, str] | None:
    """Classify a call that chose no SQL (or failed); None when it chose one.

    Args:
        trace: the pipeline's trace, or None when the call raised.
        error: the call's error message when it raised.

    Returns:
        (``ABSTAINED`` | ``NO_SQL`` | ``ERROR``, the reason in words), or None when the trace has
        a chosen SQL (compare its rows with ``classify_rows``).
    """
    if trace is None:
        return "ERROR", (error or "the call failed")[:500]
    if trace.get("sql"):
        return None
    if trace.get("abstained"):
        return "ABSTAINED", (trace.get("error") or "abstained")[:500]
    if not any(c.get("sql") for c in trace.get("candidates") or []):
        return "NO_SQL", (trace.get("error") or "no model wrote SQL")[:500]
    return "ERROR", (trace.get("error") or "no candidate executed")[:500]


def chosen_hash(trace: dict[str, Any]) -> str | None:
    """The result signature of the trace's chosen SQL.

    Args:
        trace: the pipeline's trace.

    Returns:
        The ``result_hash`` of an executed candidate (else of the vote group) whose SQL is the
        chosen one, or None.
    """
    sql = trace.get("sql")
    if not sql:
        return None
    for c in trace.get("candidates") or []:
        if c.get("sql") == sql and c.get("status") == Status.OK and c.get("result_hash"):
            return c["result_hash"]
    for g in (trace.get("vote") or {}).get("groups") or []:
        if g.get("sql") == sql:
            return g.get("result_hash")
    return None


def model_rightness(trace: dict[str, Any], gold_hash: str) -> dict[str, bool]:
    """Per model: whether its first FinSQL candidate returned the verified SQL's result.

    Args:
        trace: the pipeline's trace (``candidates`` in call order).
        gold_hash: the verified SQL's ``result_hash``.

    Returns:
        model -> right, for every model that wrote a FinSQL candidate.
    """
    out: dict[str, bool] = {}
    for c in trace.get("candidates") or []:
        m = c.get("model")
        if m and m not in out and str(c.get("source", "")).startswith("finsql:"):
            out[m] = c.get("status") == Status.OK and c.get("result_hash") == gold_hash
    return out


def summarize(results: list[Judged]) -> dict[str, Any]:
    """The totals of a run.

    Args:
        results: the evaluated questions.

    Returns:
        ``{"questions", "judged", "right", "ex", "per_model": {model: {"questions", "right",
        "ex"}}, "categories": {category: count}}``; ``ex`` = right / judged (4 places), None when
        nothing was judged.
    """
    judged = [r for r in results if r.right is not None]
    right = sum(1 for r in judged if r.right)
    per: dict[str, dict[str, Any]] = {}
    for r in judged:
        for m, ok in r.per_model.items():
            d = per.setdefault(m, {"questions": 0, "right": 0})
            d["questions"] += 1
            d["right"] += ok
    for d in per.values():
        d["ex"] = round(d["right"] / d["questions"], 4)
    cats = Counter(r.category for r in judged if r.category)
    return {
        "questions": len(results),
        "judged": len(judged),
        "right": right,
        "ex": round(right / len(judged), 4) if judged else None,
        "per_model": dict(sorted(per.items())),
        "categories": dict(sorted(cats.items())),
    }
