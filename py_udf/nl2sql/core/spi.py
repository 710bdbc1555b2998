"""Kept SPI plans: every statement the pipeline runs is prepared once per backend.

``plpy.execute("<text>")`` parses, analyses and rewrites its statement on every call; for the
privilege-filtered views (``nl2sql.visible_*``) that alone took 1–3 ms per statement, more than
running them (measured on superhero: the schema's three view reads 7.0 ms as text, 1.8 ms kept).
A kept plan (``plpy.prepare``, which PL/Python saves for the session) skips that work; the
pipeline's entry functions set ``plan_cache_mode = force_custom_plan``, so each execution is
still planned with its own parameter values, and privilege checks (``has_*_privilege`` of
``current_user``) run at execution, as the calling role. PostgreSQL invalidates a kept plan
itself when an object it uses changes (e.g. an extension update replacing a view).

Every SQL statement of the package goes through this module: ``query`` (kept plan; ``plan`` and
``execute`` for a loop that fetches the plan once), ``run``
(statements whose text differs per relation, e.g. ``count(*)`` of each indexed table or
``ANALYZE``: prepared for the one call and not kept, so a catalog of thousands of tables does
not fill the backend with plans) and ``cancel_point`` (the trivial statement that lets a
pending cancel land). ``quote_literal`` is the package's one SQL string-literal quoting.

All functions run on the backend's main thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_PLANS: dict[tuple[str, tuple[str, ...]], Any] = {}


def plan(plpy, sql: str, types: Sequence[str] = ()) -> Any:
    """Get the kept plan of a statement, prepared on first use in this backend.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
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
        plpy: the PL/Python module of the calling backend (SPI access).
        sql: the statement's text, with parameters ``$1``, ``$2``, ….
        args: the parameter values, one per entry of ``types``.
        types: PostgreSQL type names of the parameters, in order.

    Returns:
        PL/Python's result object: a sequence of rows, each a dict of column name → value.

    Raises:
        plpy.SPIError: the statement does not prepare or fails, as ``plpy.execute`` raises.
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
    """Run ``sql`` once without keeping its plan: for statements whose text is built per
    relation (identifiers quoted with ``plpy.quote_ident``), which a kept plan would not be
    reused for.

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
    """Run a trivial statement so that a pending cancel (``pg_cancel_backend``, psql's Ctrl-C,
    or the candidate watchdog's SIGINT) is acted on now: PostgreSQL checks for interrupts only
    inside statements, and Python waiting on model replies runs none.

    Args:
        plpy: PL/Python's module.

    Returns:
        None.

    Raises:
        plpy.SPIError: QueryCanceled when a cancel was pending.
    """
    query(plpy, "SELECT 1")


def quote_literal(value: str) -> str:
    """``value`` as an SQL string literal (``'it''s'``), as PostgreSQL's quote_literal writes a
    value without backslashes; for text shown to a model (PET-SQL §3.1 cell-value references
    in prompts, ReBoost §3.3 values in repair prompts), never for building statements (those
    bind parameters).

    Args:
        value: the text.

    Returns:
        The quoted literal.

    Raises:
        Nothing.
    """
    return "'" + value.replace("'", "''") + "'"
