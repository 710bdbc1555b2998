"""Every SQL statement of the package, through SPI, on the main thread only: kept plans
(``query``), one-off statements (``run``), ``cancel_point``, ``quote_literal``
(docs/internals/core.md "SPI")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_PLANS: dict[tuple[str, tuple[str, ...]], Any] = {}


def plan(plpy, sql: str, types: Sequence[str] = ()) -> Any:
    """Get the kept plan of a statement, prepared on first use in this backend.

    Args:
        sql: the statement's text, with parameters ``$1``, ``$2``, ….
        types: PostgreSQL type names of the parameters, one per ``$n``, in order.

    Returns:
        The plan ``plpy.prepare`` returned, kept for the session.

    Raises:
        plpy.SPIError: the statement does not prepare.
    """
    key = (sql, tuple(types))
    p = _PLANS.get(key)
    if p is None:
        p = _PLANS[key] = plpy.prepare(sql, list(types))
    return p


def query(plpy, sql: str, args: Sequence[Any] = (), types: Sequence[str] = ()) -> Any:
    """Run a statement through its kept plan (``plan``).

    Args:
        sql: the statement's text, with parameters ``$1``, ``$2``, ….
        args: the parameter values, one per entry of ``types``.
        types: PostgreSQL type names of the parameters, in order.

    Returns:
        PL/Python's result: a sequence of rows, each a dict of column name → value.

    Raises:
        plpy.SPIError: the statement does not prepare or fails.
    """
    return plpy.execute(plan(plpy, sql, types), list(args))


def execute(plpy, kept: Any, args: Sequence[Any] = ()) -> Any:
    """Run a plan from ``plan`` with ``args`` (for loops that fetch the plan once).

    Args:
        plpy: PL/Python's module. kept: ``plan``'s result. args: one value per parameter.

    Returns:
        PL/Python's result (rows as dicts).

    Raises:
        plpy.SPIError: as plpy.execute does.
    """
    return plpy.execute(kept, list(args))


def run(plpy, sql: str, args: Sequence[Any] = (), types: Sequence[str] = ()) -> Any:
    """Run ``sql`` once without keeping its plan (text built per relation, never reused).

    Args:
        plpy: PL/Python's module. sql: the statement. args, types: its parameters, if any.

    Returns:
        PL/Python's result (rows as dicts).

    Raises:
        plpy.SPIError: as plpy.execute does.
    """
    if not types:
        return plpy.execute(sql)
    return plpy.execute(plpy.prepare(sql, list(types)), list(args))


def cancel_point(plpy) -> None:
    """Run a trivial statement so that a pending cancel (Ctrl-C, the watchdog's SIGINT) lands
    now: PostgreSQL checks for interrupts only inside statements.

    Args:
        plpy: PL/Python's module.

    Raises:
        plpy.SPIError: QueryCanceled when a cancel was pending.
    """
    query(plpy, "SELECT 1")


def quote_literal(value: str) -> str:
    """``value`` as an SQL string literal (``'it''s'``), for text shown to a model, never for
    building statements (those bind parameters).

    Args:
        value: the text.

    Returns:
        The quoted literal.
    """
    return "'" + value.replace("'", "''") + "'"
