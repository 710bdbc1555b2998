"""Kept SPI plans: every statement the pipeline runs is prepared once per backend.

``plpy.execute("<text>")`` parses, analyses and rewrites its statement on every call; for the
privilege-filtered views (``nl2sql.visible_*``) that alone took 1–3 ms per statement, more than
running them (measured on superhero: the schema's three view reads 7.0 ms as text, 1.8 ms kept).
A kept plan (``plpy.prepare``, which PL/Python saves for the session) skips that work; the
pipeline's entry functions set ``plan_cache_mode = force_custom_plan``, so each execution is
still planned with its own parameter values, and privilege checks (``has_*_privilege`` of
``current_user``) run at execution, as the calling role. PostgreSQL invalidates a kept plan
itself when an object it uses changes (e.g. an extension update replacing a view).

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
