"""A result's shape as a chart reads it: each column's kind (``quantitative``, ``temporal``,
``nominal``), its NULLs and the values that do not fit its kind (a column of mixed types)."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

QUANTITATIVE = "quantitative"
TEMPORAL = "temporal"
NOMINAL = "nominal"
ORDINAL = "ordinal"

_DATE = re.compile(
    r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}(:?\d{2})?|Z)?)?$"
)
_MEASURE_WORDS = re.compile(r"(count|sum|avg|mean|total|number|num|amount|max|min|price|age)")


@dataclass(frozen=True)
class Column:
    """One result column: its ``name``, ``kind``, ``nulls``, ``misfits`` (non-NULL values not of
    its kind), ``distinct`` values, whether its integers look like years (``years``) and whether
    its dates carry a time of day (``timed``), and on how many calendar days they fall
    (``days``)."""

    name: str
    kind: str
    nulls: int
    misfits: int
    distinct: int
    years: bool = False
    timed: bool = False
    days: int = 0

    @property
    def measure_named(self) -> bool:
        """Whether the name reads as an aggregate or a measure (``count``, ``avg_price``)."""
        return bool(_MEASURE_WORDS.search(self.name.lower()))


def is_number(v: Any) -> bool:
    """Whether a JSON value is a number (not a boolean).

    Args:
        v: the value.

    Returns:
        True for an int or float.
    """
    return isinstance(v, int | float) and not isinstance(v, bool)


def is_date(v: Any) -> bool:
    """Whether a JSON value is an ISO date or timestamp as ``row_to_json`` writes it.

    Args:
        v: the value.

    Returns:
        True for such a text.
    """
    if not (isinstance(v, str) and _DATE.match(v)):
        return False
    try:
        dt.date.fromisoformat(v[:10])
    except ValueError:  # 2018-13-45: a text that only looks like a date
        return False
    return True


def parse_rows(rows: list[str] | list[dict[str, Any]]) -> tuple[list[str], list[dict], int]:
    """Rows as ``row_to_json`` texts (or dicts), read.

    Args:
        rows: the rows.

    Returns:
        The column names in order, the rows as dicts, and how many column names were given
        twice (the later value kept).
    """
    out: list[dict[str, Any]] = []
    names: list[str] = []
    dup = 0
    for i, r in enumerate(rows):
        pairs = json.loads(r, object_pairs_hook=list) if isinstance(r, str) else list(r.items())
        if i == 0:
            counts = Counter(k for k, _ in pairs)
            dup = sum(n - 1 for n in counts.values())
            names = list(dict.fromkeys(k for k, _ in pairs))
        out.append({k: _scalar(v) for k, v in pairs})
    return names, out, dup


def _scalar(v: Any) -> Any:
    """A JSON object or array cell (a json, array or composite column) as its text."""
    return json.dumps(v, sort_keys=True, default=str) if isinstance(v, dict | list) else v


def _kind(values: list[Any]) -> tuple[str, int]:
    """The kind most non-NULL values have, and how many do not have it."""
    n = len(values)
    nums = sum(1 for v in values if is_number(v))
    dates = sum(1 for v in values if is_date(v))
    if n and nums * 2 > n:
        return QUANTITATIVE, n - nums
    if n and dates * 2 > n:
        return TEMPORAL, n - dates
    return NOMINAL, 0


def column(name: str, rows: list[dict[str, Any]]) -> Column:
    """The shape of one column.

    Args:
        name: the column. rows: the rows (dicts).

    Returns:
        Its ``Column``.
    """
    values = [r.get(name) for r in rows]
    present = [v for v in values if v is not None]
    kind, misfits = _kind(present)
    distinct = len({json.dumps(v, sort_keys=True, default=str) for v in present})
    years = kind == QUANTITATIVE and all(
        isinstance(v, int) and 1000 <= v <= 2999 for v in present if is_number(v)
    )
    timed = kind == TEMPORAL and any(is_date(v) and len(v) > 10 for v in present)
    days = len({v[:10] for v in present if is_date(v)}) if kind == TEMPORAL else 0
    nulls = len(values) - len(present)
    return Column(name, kind, nulls, misfits, distinct, years and bool(present), timed, days)


def columns(names: list[str], rows: list[dict[str, Any]]) -> list[Column]:
    """Every column's shape, in the result's order.

    Args:
        names: the column names. rows: the rows (dicts).

    Returns:
        The ``Column`` of each.
    """
    return [column(n, rows) for n in names]
