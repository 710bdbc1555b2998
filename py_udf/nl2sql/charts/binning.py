"""Rows regrouped for a chart: dates binned by year, month, weekday or day (the measure
aggregated as its name says: counts and sums summed, averages averaged, extremes kept), and a
long tail of categories folded into "other"."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from .shape import Column

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
BAR_CATEGORIES = 30
"""Most bars (or bar groups) drawn; the smallest beyond them are summed into "other"."""
PIE_SLICES = 8
"""Most pie slices drawn; the smallest beyond them are summed into "other"."""
OTHER = "other"


def unit_order(unit: str) -> list[str]:
    """The labels of a month or weekday bin in calendar order (the axis's sort).

    Args:
        unit: ``month`` or ``weekday``.

    Returns:
        The labels, January or Monday first.
    """
    return MONTHS if unit == "month" else WEEKDAYS


def _bin_label(v: Any, unit: str) -> str:
    """A date (ISO text) or a year (int) as its bin's label."""
    if isinstance(v, int):
        return str(v)
    d = dt.date.fromisoformat(v[:10])
    if unit == "year":
        return str(d.year)
    if unit == "month":
        return MONTHS[d.month - 1]
    if unit == "weekday":
        return WEEKDAYS[d.weekday()]
    return d.isoformat()


def _op(measure: str | None):
    """How a measure's values in one bin combine, read from its name."""
    name = (measure or "count").lower()
    if name.startswith(("avg", "mean", "average")):
        return lambda xs: sum(xs) / len(xs)
    if name.startswith("max"):
        return max
    if name.startswith("min"):
        return min
    return sum


def bin_rows(
    rows: list[dict], x: str, measure: str | None, color: Column | None, unit: str
) -> list[dict]:
    """Rows grouped by ``x``'s bin (and the colour); the measure combined, or rows counted
    (field ``count``) when there is none.

    Args:
        rows: the rows (dicts). x: the date column. measure: the measure column, or None.
        color: the colour column, or None. unit: ``year``, ``month``, ``weekday`` or ``day``.

    Returns:
        One row per bin (and colour), in order of the bins' first dates.
    """
    groups: dict[tuple, list] = defaultdict(list)
    for r in sorted(rows, key=lambda r: str(r[x])):
        key = (_bin_label(r[x], unit), r[color.name] if color else None)
        groups[key].append(r[measure] if measure else 1)
    op = _op(measure)
    out = []
    for (label, c), vals in groups.items():
        row = {x: label, measure or "count": op(vals)}
        if color is not None:
            row[color.name] = c
        out.append(row)
    return out


def fold_tail(rows: list[dict], x: str, y: str, pie: bool) -> tuple[list[dict], int]:
    """Rows of more categories of ``x`` than drawn: the largest kept (in their order), the rest
    summed into one ``other`` category.

    Args:
        rows: the rows. x: the category column. y: the measure. pie: a pie's limit, not a bar's.

    Returns:
        The rows, and how many categories were folded.
    """
    limit = PIE_SLICES if pie else BAR_CATEGORIES
    totals: dict[Any, float] = defaultdict(float)
    for r in rows:
        totals[r[x]] += abs(r[y])
    if len(totals) <= limit:
        return rows, 0
    keep = set(sorted(totals, key=lambda k: -totals[k])[: limit - 1])
    kept = [r for r in rows if r[x] in keep]
    rest: dict[tuple, dict] = {}
    for r in rows:
        if r[x] in keep:
            continue
        key = tuple((k, v) for k, v in r.items() if k not in (x, y))
        agg = rest.setdefault(key, {**r, x: OTHER, y: 0})
        agg[y] += r[y]
    return kept + list(rest.values()), len(totals) - len(keep)
