"""Result signatures the vote groups candidates by. Source: PET-SQL (Li et al. 2024) §3.4."""

from __future__ import annotations

import hashlib
import json
import math
from decimal import Decimal
from typing import Any


def normalize_value(v: Any) -> Any:
    """Make a cell value comparable across candidates.

    Args:
        v: a cell value as decoded from JSON (str, int, float, Decimal, bool, None, list, dict).

    Returns:
        Numbers as floats rounded to 6 significant digits, NaN and infinities as text, lists and
        dicts as JSON text with sorted keys; the rest as it is.
    """
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float, Decimal)):
        f = float(v)
        if math.isnan(f) or math.isinf(f):
            return str(f)
        return float(f"{f:.6g}")
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True, default=str)
    return v


def row_from_json(text: str) -> tuple:
    """Decode one row of ``row_to_json(...)::text`` (numbers read as Decimal, then normalised).

    Args:
        text: a JSON object text as PostgreSQL's ``row_to_json`` writes it.

    Returns:
        The row's values in column order (duplicate names kept), through ``normalize_value``.
    """
    pairs = json.loads(text, object_pairs_hook=lambda kv: kv, parse_float=Decimal)
    return tuple(normalize_value(v) for _, v in pairs)


def result_signature(rows: list[tuple], ordered: bool = False) -> str:
    """Compute the signature of a query result, equal for equal results.

    Args:
        rows: the result's rows, values normalised (``row_from_json``).
        ordered: when True the row order counts; else the rows are a multiset (sorted first).

    Returns:
        SHA-256 of the rows' JSON texts, 64 lower-case hex characters.
    """
    keyed = [json.dumps(r, default=str) for r in rows]
    if not ordered:
        keyed.sort()
    h = hashlib.sha256()
    for k in keyed:
        h.update(k.encode())
        h.update(b"\n")
    return h.hexdigest()
