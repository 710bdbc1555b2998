"""Where a column of a statement comes from, for the SQLite rules."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from ...core.types import Schema, Table

__all__ = [
    "column_type",
    "resolve_column",
    "schema_table",
    "source_table",
    "tables_by_name",
    "type_kind",
]

_NUMERIC = (
    "smallint",
    "integer",
    "bigint",
    "numeric",
    "decimal",
    "real",
    "double precision",
    "int",
    "float",
)
_TEXT = ("text", "character varying", "varchar", "character", "char", "bpchar", "name", "citext")


def tables_by_name(schema: Schema) -> dict[str, Table]:
    """Index the schema's tables by every name a statement may use for them.

    Args:
        schema: the tables the statement may read.

    Returns:
        Lower-cased prompt name, table name and ``schema.table`` → the table.
    """
    out: dict[str, Table] = {}
    for t in schema.tables:
        out.setdefault(t.name.lower(), t)
        out.setdefault(t.table.lower(), t)
        out.setdefault(f"{t.schema}.{t.table}".lower(), t)
    return out


def schema_table(node: exp.Table, tables: dict[str, Table]) -> Table | None:
    """Look up the schema table a table reference names.

    Args:
        node: the table reference.
        tables: ``tables_by_name``'s index.

    Returns:
        The table, or None when it is not in the schema (a CTE, an unknown name).
    """
    key = f"{node.db}.{node.name}" if node.db else node.name
    return tables.get(key.lower())


def column_type(t: Table, name: str) -> str | None:
    """Look up a column's data type, case-insensitively.

    Args:
        t: the table.
        name: the column's name.

    Returns:
        The lower-cased data type, or None when the table has no such column.
    """
    for c in t.columns:
        if c.name.lower() == name.lower():
            return c.data_type.lower()
    return None


def type_kind(data_type: str | None) -> str | None:
    """Classify a data type for SQLite's comparison affinity.

    Args:
        data_type: a lower-cased PostgreSQL type name, or None.

    Returns:
        ``"number"``, ``"text"``, or None for any other type.
    """
    if data_type is None:
        return None
    if data_type.startswith(_NUMERIC):
        return "number"
    if data_type.startswith(_TEXT):
        return "text"
    return None


def resolve_column(
    scope: Scope, col: exp.Column, tables: dict[str, Table]
) -> tuple[str, Table | None] | None:
    """Find the source a column of ``scope`` reads, when certain.

    Args:
        scope: the column's scope (sqlglot's optimizer).
        col: the column reference.
        tables: ``tables_by_name``'s index.

    Returns:
        ``(alias, schema table)`` for a table, ``(alias, None)`` for a derived table or CTE;
        None when unknown or ambiguous.
    """
    if col.table:
        src = next((v for k, v in scope.sources.items() if k.lower() == col.table.lower()), None)
        if isinstance(src, exp.Table):
            t = schema_table(src, tables)
            return (col.table.lower(), t) if t is not None else None
        return (col.table.lower(), None) if isinstance(src, Scope) else None
    hits: list[tuple[str, Table | None]] = []
    for alias, src in scope.sources.items():
        if isinstance(src, exp.Table):
            t = schema_table(src, tables)
            if t is None:
                return None
            if column_type(t, col.name) is not None:
                hits.append((alias.lower(), t))
        elif isinstance(src, Scope) and col.name.lower() in {
            s.lower() for s in getattr(src.expression, "named_selects", [])
        }:
            hits.append((alias.lower(), None))
    return hits[0] if len(hits) == 1 else None


def source_table(
    scope: Scope, col: exp.Column, tables: dict[str, Table]
) -> tuple[str, Table] | None:
    """Find the schema table a column of ``scope`` reads, when certain.

    Args:
        scope: the column's scope.
        col: the column reference.
        tables: ``tables_by_name``'s index.

    Returns:
        ``(alias, schema table)``, or None when not certain or not a table.
    """
    hit = resolve_column(scope, col, tables)
    return hit if hit is not None and hit[1] is not None else None
