"""The chart for a result, by rule (docs/charts.md, "How the chart is chosen"): the chart the
question names first, then the result's shape; the date binning the question asks for."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .shape import NOMINAL, QUANTITATIVE, TEMPORAL, Column

BAR, PIE, LINE, SCATTER = "bar", "pie", "line", "scatter"
STACKED_BAR, GROUPED_LINE, NONE = "stacked bar", "grouped line", "none"

_NAMED: list[tuple[str, re.Pattern]] = [
    (STACKED_BAR, re.compile(r"\bstack(ed)?\b")),
    (GROUPED_LINE, re.compile(r"\bgroup(ed|ing)? (a )?line\b|\bmulti-?line\b")),
    (PIE, re.compile(r"\bpie\b|\bdonut\b|\bproportions?\b|\bshare of\b|\bpercentages? of\b")),
    (SCATTER, re.compile(r"\bscatter|\bcorrelation\b|\brelationship between\b")),
    (LINE, re.compile(r"\bline\b|\btrends?\b|\btendenc(y|ies)\b|\bover time\b|\btime series\b")),
    (BAR, re.compile(r"\bbars?\b|\bhistogram\b|\bcolumn chart\b")),
]
_BINS: list[tuple[str, re.Pattern]] = [
    ("weekday", re.compile(r"\bweekdays?\b|\bday of( the)? week\b|\bby weekday\b")),
    ("month", re.compile(r"\b(by|per|each|every|in each) month\b|\bmonthly\b|\bby month\b")),
    ("year", re.compile(r"\b(by|per|each|every|in each) year\b|\byearly\b|\bannual(ly)?\b")),
    ("day", re.compile(r"\b(by|per|each|every|in each) day\b|\bdaily\b")),
]
_BIN_INTERVAL = re.compile(r"\bby (year|month|weekday|day)\b( interval)?")
_FINER_THAN_DAY = re.compile(r"\b(hours?|hourly|minutes?|seconds?|times? of day)\b")
_ADDS_UP = re.compile(r"^(count|sum|total|num|number|max|min)")
"""A measure whose values of one day combine exactly (counted, summed, extremes kept)."""


@dataclass(frozen=True)
class Layout:
    """The chosen ``chart``, the columns on ``x`` (or the pie's category), ``y`` (the measure,
    None: rows counted) and ``color``, the date ``binning`` unit, and ``reason``."""

    chart: str
    x: Column | None
    y: Column | None
    color: Column | None
    binning: str | None
    reason: str


def named_chart(question: str) -> str | None:
    """The chart type the question names ("as a pie chart", "the trend").

    Args:
        question: the question as asked.

    Returns:
        One of the chart names, or None.
    """
    q = question.lower()
    for chart, pattern in _NAMED:
        if pattern.search(q):
            return chart
    return None


def asked_binning(question: str) -> str | None:
    """The date unit the question groups by ("by year", "per weekday").

    Args:
        question: the question as asked.

    Returns:
        ``year``, ``month``, ``weekday``, ``day``, or None.
    """
    q = question.lower()
    m = _BIN_INTERVAL.search(q)
    if m:
        return m.group(1)
    for unit, pattern in _BINS:
        if pattern.search(q):
            return unit
    return None


def _binnable(col: Column | None, unit: str | None, n_rows: int) -> bool:
    """Whether the SQL left ``col`` for the chart to bin by ``unit``: dates, or years given
    more than once by year."""
    if col is None or unit is None:
        return False
    if col.kind == TEMPORAL:
        return unit != "day" or col.timed
    return col.years and unit == "year" and col.distinct < n_rows


def _per_timestamp(question: str, x: Column | None, y: Column | None) -> bool:
    """Whether a measure was counted (or summed) per timestamp where a day holds several: a
    chart of one bar or point per second reads as noise, so it is drawn by day (nvBench's
    charts cut such timestamps to dates too) unless the question asks for a finer grain."""
    if x is None or y is None or x.kind != TEMPORAL or not x.timed or x.days >= x.distinct:
        return False
    return bool(_ADDS_UP.match(y.name.lower())) and not _FINER_THAN_DAY.search(question.lower())


def _roles(cols: list[Column]) -> tuple[Column | None, Column | None, Column | None]:
    """x, measure, colour from the columns: the first date or category on x (else the first
    column), the first other number as the measure, a further category as the colour."""
    dims = [c for c in cols if c.kind in (NOMINAL, TEMPORAL) or c.years]
    nums = [c for c in cols if c.kind == QUANTITATIVE and not c.years]
    if not nums and len(dims) > 1 and dims[-1].years:
        nums = [dims.pop()]
    x = next((c for c in dims if c.kind == TEMPORAL), dims[0] if dims else None)
    if x is None and len(nums) > 1:
        x = nums[0]
    y = next((c for c in nums if c is not x), None)
    color = next((c for c in dims if c is not x and c is not y), None)
    return x, y, color


def _by_shape(x: Column | None, y: Column | None, color: Column | None, binning) -> str:
    """The chart the result's shape calls for (no chart named)."""
    if x is None:
        return NONE
    if y is None and not binning:
        return NONE
    if x.kind == QUANTITATIVE and not x.years:
        return SCATTER
    if x.kind == TEMPORAL:
        return GROUPED_LINE if color else LINE if binning in (None, "year", "day") else BAR
    return STACKED_BAR if color else BAR


def choose(question: str, cols: list[Column], n_rows: int) -> Layout:
    """The chart for a result: the chart the question names, else the result's shape.

    Args:
        question: the question. cols: the result's columns. n_rows: its row count.

    Returns:
        The ``Layout`` (chart ``none`` with why when no chart fits).
    """
    if n_rows == 0:
        return Layout(NONE, None, None, None, None, "the query returned no rows")
    x, y, color = _roles(cols)
    unit = asked_binning(question)
    binning = unit if _binnable(x, unit, n_rows) else None
    if unit is None and _per_timestamp(question, x, y):
        binning = "day"
    named = named_chart(question)
    if x is None or (y is None and not binning):
        why = "one value" if n_rows == 1 and len(cols) == 1 else "no column holds numbers"
        return Layout(NONE, x, y, color, None, f"no chart fits: {why}")
    nums = [c for c in cols if c.kind == QUANTITATIVE and not c.years]
    if len(nums) >= 2 and (named == SCATTER or (not named and x.kind == QUANTITATIVE)):
        dim = next((c for c in cols if c.kind != QUANTITATIVE or c.years), None)
        why = f"the question names a {SCATTER} chart" if named else "two measures"
        return Layout(SCATTER, nums[0], nums[1], dim, None, why)
    if named:
        return _named_layout(named, x, y, color, binning)
    return Layout(_by_shape(x, y, color, binning), x, y, color, binning, "the result's shape")


def _named_layout(named: str, x: Column, y, color, binning) -> Layout:
    """The layout of the chart the question names, its colour dropped or kept as it needs."""
    reason = f"the question names a {named} chart"
    if named == PIE:
        return Layout(PIE, x, y, None, binning, reason)
    if named in (BAR, LINE) and color is not None:
        named = STACKED_BAR if named == BAR else GROUPED_LINE
    return Layout(named, x, y, color, binning, reason)
