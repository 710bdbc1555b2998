"""What a result says, for the vote: a key equal for equal answers (column order, numeric
representation, text case and padding free), the columns as value bags (one result a column
subset of another), a coarser key (answers that differ only in rounding), and whether the
result is degenerate (empty, all NULL, all zero). Sources: Spider's evaluator (Yu et al. 2018:
rows as an unordered bag, columns matched whatever their order); MCS-SQL (Lee et al. 2024)
§4.6 (presentation-only differences); SQLens (2025) (empty, NULL and zero results flag a
wrong query)."""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from typing import Any


def canonical_value(v: Any) -> Any:
    """One cell as the answer's equality sees it.

    Args:
        v: a cell value as ``execute.normalize_value`` leaves it (float, str, bool, None).

    Returns:
        Text without surrounding blanks and case-folded; text that spells a finite number as
        that number (6 significant digits, as every number is); the rest unchanged.
    """
    if not isinstance(v, str):
        return v
    t = v.strip()
    try:
        f = float(t)
    except ValueError:
        return t.casefold()
    return float(f"{f:.6g}") if math.isfinite(f) and t[:1] not in ("+", ".") else t.casefold()


def rounded_value(v: Any) -> Any:
    """One cell as the coarser key sees it: a number that is not whole to 3 significant digits
    (``3.14159`` and ``3.14`` meet, ``78.33`` and ``78`` do not).

    Args:
        v: a value as ``canonical_value`` returns it.

    Returns:
        The value, a fractional float rounded to 3 significant digits.
    """
    if isinstance(v, float) and math.isfinite(v) and v != int(v):
        return float(f"{v:.3g}")
    return v


def _digest(texts: list[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode() + b"\n")
    return h.hexdigest()[:32]


def _bag_key(columns: list[list[Any]], n_rows: int) -> tuple[str, list[str]]:
    """The column-order-free key of a result given as columns, and each column's bag hash: the
    columns in the order of their bag hashes (the cells of columns with equal bags sorted within
    each row, so swapping them changes nothing), the rows as a sorted multiset."""
    col_hashes = [_digest(sorted(map(repr, col))) for col in columns]
    order = sorted(range(len(columns)), key=lambda j: col_hashes[j])
    if len(set(col_hashes)) == len(col_hashes):
        rows = [repr(r) for r in zip(*(columns[j] for j in order))] if columns else [""] * n_rows
    else:
        ties = [[j for j in order if col_hashes[j] == h] for h in dict.fromkeys(sorted(col_hashes))]
        rows = [repr([sorted(repr(columns[j][i]) for j in t) for t in ties]) for i in range(n_rows)]
    return _digest(sorted(rows)), col_hashes


def degenerate_kind(rows: list[tuple]) -> str | None:
    """Whether a result is degenerate.

    Args:
        rows: the result's rows (values normalised).

    Returns:
        ``empty`` (no row), ``null`` (every cell NULL), ``zero`` (every cell 0 or NULL, one at
        least 0), or None.
    """
    if not rows:
        return "empty"
    cells = [v for r in rows for v in r]
    if all(v is None for v in cells):
        return "null"
    numeric = all(v is None or (isinstance(v, float) and not isinstance(v, bool)) for v in cells)
    if numeric and all(v is None or v == 0 for v in cells):
        return "zero"
    return None


def column_names(first_row: str | None) -> list[str]:
    """The column names of a result, read from its first ``row_to_json`` text.

    Args:
        first_row: the first row's JSON text, or None (no row, or not at hand).

    Returns:
        The names in column order (duplicates kept); empty when there is no row or it does not
        parse (a row cut short).
    """
    if not first_row:
        return []
    try:
        return [k for k, _ in json.loads(first_row, object_pairs_hook=lambda kv: kv)]
    except (ValueError, TypeError):
        return []


def describe(rows: list[tuple], first_row: str | None = None) -> dict[str, Any]:
    """Describe a result for the vote (stored as ``Candidate.answer``).

    Args:
        rows: the result's rows, values normalised (``execute.row_from_json``); every row has
            the same length.
        first_row: the first row's ``row_to_json`` text (the column names), or None.

    Returns:
        ``{"key", "rounded", "cols", "ncols", "names", "degenerate"}``: ``key`` equal for
        results equal as bags of rows whatever their column order, text case and padding;
        ``rounded`` the same key with fractional numbers at 3 significant digits; ``cols``
        each column's bag hash (in column order); ``ncols`` the column count (0 for no row);
        ``names`` the column names (``column_names``); ``degenerate`` as ``degenerate_kind``.
    """
    n_cols = len(rows[0]) if rows else 0
    columns = [[canonical_value(r[j]) for r in rows] for j in range(n_cols)]
    key, cols = _bag_key(columns, len(rows))
    coarse = [[rounded_value(v) for v in col] for col in columns]
    rounded = key if coarse == columns else _bag_key(coarse, len(rows))[0]
    return {
        "key": key,
        "rounded": rounded,
        "cols": cols,
        "ncols": n_cols,
        "names": column_names(first_row),
        "degenerate": degenerate_kind(rows),
    }


def is_column_subset(small: dict[str, Any], big: dict[str, Any], rows: tuple[int, int]) -> bool:
    """Whether one answer's columns are a strict subset of another's, as bags of values, with as
    many rows (a question asking for names, a candidate adding ids).

    Args:
        small: the narrower answer (``describe``'s dict).
        big: the wider answer.
        rows: the two results' row counts (small, big).

    Returns:
        True when ``small`` has fewer columns, at least one, and each of its column bags is one
        of ``big``'s (as many times).
    """
    if rows[0] != rows[1] or not 0 < small["ncols"] < big["ncols"]:
        return False
    return not Counter(small["cols"]) - Counter(big["cols"])
