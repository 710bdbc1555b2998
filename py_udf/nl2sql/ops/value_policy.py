"""The cell-value policy: which cell values may be indexed and sent to a model
(docs/internals/ops.md "The value policy"; SQL function ``nl2sql._value_rule``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core import spi
from ..core.types import Schema


def value_columns(plpy, schema: str, table: str) -> dict[str, bool]:
    """Say for each column of a table whether its cell values may be indexed and sent (the
    rules above, through SQL function ``nl2sql._values_allowed``).

    Args:
        schema: the table's schema name.
        table: the table's name.

    Returns:
        Column name → whether its values may be indexed and sent (empty for an unknown table).
    """
    rows = spi.query(
        plpy,
        "SELECT a.attname::text AS col, "
        "nl2sql._values_allowed(n.nspname, r.relname, a.attname, r.relrowsecurity) AS ok "
        "FROM pg_catalog.pg_class r JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace "
        "JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 "
        "AND NOT a.attisdropped WHERE n.nspname = $1 AND r.relname = $2",
        [schema, table],
        ["name", "name"],
    )
    return {r["col"]: bool(r["ok"]) for r in rows}


def partial_columns(schema: Schema) -> set[tuple[str, str, str]]:
    """Find the columns whose value index is partial for the role (``Column.values_complete``
    False, or a table whose row security applies to the role: the index holds rows it cannot
    read): a literal missing from their index may still be a cell value, and a literal is not
    aligned to their indexed values.

    Args:
        schema: ``catalog.load_schema``'s result (what the calling role may read).

    Returns:
        ``(schema, table, column)`` names.
    """
    check = schema.row_check
    return {
        (t.schema, t.table, c.name)
        for t in schema.tables
        for c in t.columns
        if c.values_complete is False or (check is not None and check.applies(t.schema, t.table))
    }


def partial_value_columns(schema: Schema, limit: int = 50) -> dict[str, Any]:
    """Report the partially indexed columns for the trace (``explain``'s ``values_partial``).

    Args:
        schema: ``catalog.load_schema``'s result (what the calling role may read).
        limit: most column names listed.

    Returns:
        ``{"count": n, "columns": ["schema.table.column", ...]}`` (sorted, at most ``limit``).
    """
    names = sorted(".".join(c) for c in partial_columns(schema))
    return {"count": len(names), "columns": names[:limit]}


def _store_policy(plpy, tbl: str, send_values: bool, column_name: str | None) -> dict[str, Any]:
    """Insert or update the ``nl2sql.value_policy`` row; returns the resolved ``schema`` and
    ``table``, ``column`` as passed, ``send_values`` and ``indexed`` (in the schema index)."""
    if send_values is None:
        plpy.error(
            "nl2sql.set_value_policy: send_values must be true or false",
            hint="false keeps the values out of the index and prompts; true opts in",
        )
    r = spi.query(
        plpy,
        "SELECT n.nspname::text AS s, c.relname::text AS t FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1::regclass",
        [tbl],
        ["text"],
    )[0]
    col = column_name or ""
    if col and col not in value_columns(plpy, r["s"], r["t"]):
        plpy.error(
            f"nl2sql.set_value_policy: table {r['s']}.{r['t']} has no column {col!r}",
            hint="pass column_name => NULL for the whole table",
        )
    spi.query(
        plpy,
        "INSERT INTO nl2sql.value_policy (schema_name, table_name, column_name, send_values) "
        "VALUES ($1, $2, $3, $4) ON CONFLICT (schema_name, table_name, column_name) "
        "DO UPDATE SET send_values = EXCLUDED.send_values",
        [r["s"], r["t"], col, send_values],
        ["name", "name", "name", "bool"],
    )
    indexed = spi.query(
        plpy,
        "SELECT 1 FROM nl2sql.schema_table WHERE schema_name = $1 AND table_name = $2",
        [r["s"], r["t"]],
        ["name", "name"],
    )
    return {
        "schema": r["s"],
        "table": r["t"],
        "column": column_name,
        "send_values": send_values,
        "indexed": bool(indexed),
    }


def set_value_policy(
    plpy,
    tbl: str,
    send_values: bool,
    column_name: str | None,
    reindex_table: Callable[[str, str], Any],
) -> dict[str, Any]:
    """Store a cell-value policy; re-index the table (when indexed) so its values follow it.

    Args:
        tbl: the table, as ``regclass`` text (resolved on the caller's search_path).
        send_values: true opts the table's (or column's) values in, false keeps them out.
        column_name: one column of ``tbl``, or None for the whole table.
        reindex_table: ``reindex_table(schema, table)`` rewrites the table's index rows.

    Returns:
        ``{"table": "schema.table", "column", "send_values", "reindexed"}``.

    Raises:
        plpy.Error: (through ``plpy.error``) a null ``send_values`` or an unknown column.
        plpy.SPIError: ``tbl`` names no relation.
    """
    p = _store_policy(plpy, tbl, send_values, column_name)
    if p["indexed"]:
        reindex_table(p["schema"], p["table"])
    return {
        "table": f"{p['schema']}.{p['table']}",
        "column": p["column"],
        "send_values": p["send_values"],
        "reindexed": p["indexed"],
    }
