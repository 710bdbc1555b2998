"""What the join rules share: the single-column foreign key of a column, the one schema table a
column reference belongs to, and the column pairs a query compares."""

from __future__ import annotations

from sqlglot import exp

from ...core.types import ForeignKey, Schema, Table
from .._sql import has_column, table_named

__all__ = ["compared", "owner", "refers"]


def refers(schema: Schema, table: Table, column: str) -> ForeignKey | None:
    """The single-column foreign key of ``table.column``.

    Args:
        schema: the schema (its foreign keys).
        table: one of its tables.
        column: a column's name (case folded).

    Returns:
        The key, or None when the column is no single-column key's.
    """
    for k in schema.foreign_keys:
        if k.table == table.name and len(k.columns) == 1 and k.columns[0].lower() == column.lower():
            return k
    return None


def compared(tree: exp.Expression) -> list[tuple[exp.Column, exp.Column]]:
    """Column pairs ``tree`` compares: ``a = b`` and ``a IN (SELECT b …)``.

    Args:
        tree: a query.

    Returns:
        The pairs, the ``=``'s first.
    """
    pairs = [
        (e.this, e.expression)
        for e in tree.find_all(exp.EQ)
        if isinstance(e.this, exp.Column) and isinstance(e.expression, exp.Column)
    ]
    for node in tree.find_all(exp.In):
        sub = node.args.get("query")
        sub = sub.this if isinstance(sub, exp.Subquery) else sub
        if isinstance(sub, exp.Select) and len(sub.expressions) == 1:
            if isinstance(node.this, exp.Column) and isinstance(sub.expressions[0], exp.Column):
                pairs.append((node.this, sub.expressions[0]))
    return pairs


def owner(column: exp.Column, names, schema: Schema) -> Table | None:
    """The one schema table that holds ``column`` among those it may belong to.

    Args:
        column: a column reference of the query.
        names: the query's names resolved (``core.names.resolve``).
        schema: the schema.

    Returns:
        The table, or None when none or several may hold it.
    """
    tables = [table_named(schema, r.key) for r in names.column_relations(column)]
    holders = {id(t): t for t in tables if t is not None and has_column(t, column.name)}
    return next(iter(holders.values())) if len(holders) == 1 else None
