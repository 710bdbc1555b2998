"""What the shape rules share: a literal's value, and whether an expression holds an aggregate
of a SELECT's own."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sqlglot import exp

__all__ = ["at_top", "literal_value"]


def literal_value(e: exp.Expression) -> object | None:
    """A literal's value.

    Args:
        e: an expression.

    Returns:
        ``("n", Decimal)`` for a number (negated ones too), ``("s", text)`` for a string; None
        for anything else.
    """
    negative = isinstance(e, exp.Neg)
    e = e.this if negative else e
    if not isinstance(e, exp.Literal):
        return None
    if e.is_string:
        return None if negative else ("s", e.this)
    try:
        n = Decimal(e.this)
    except InvalidOperation:
        return None
    return ("n", -n if negative else n)


def at_top(e: exp.Expression, top: exp.Select, kind: type) -> bool:
    """Whether ``e`` holds a ``kind`` of ``top``'s own (not of a subquery, not a window's).

    Args:
        e: one of ``top``'s expressions.
        top: a SELECT.
        kind: a node class (``exp.Count``, ``exp.AggFunc``).

    Returns:
        True when one such node's nearest SELECT (or window) is ``top``.
    """
    return any(f.find_ancestor(exp.Select, exp.Window) is top for f in e.find_all(kind))
