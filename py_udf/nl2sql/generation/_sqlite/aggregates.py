"""SQLite's bare columns of aggregate queries (``sqlite:group_by_dependent``; those beside a
lone ``max``/``min``, ``sqlite:minmax_row``, are ``rules.shape.fix_by_sqlstate.minmax_rows``,
which repair's round 0 reads for SQLSTATE 42803 too). Sources: SQLite "Bare columns in an
aggregate query"; SQL:1999 T301."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from ...core.types import Schema, Table
from ...rules.shape.fix_by_sqlstate import outside_aggregates
from .scope import resolve_column, tables_by_name

__all__ = ["group_by_dependent"]


def _conjuncts(cond: exp.Expression | None) -> list[exp.Expression]:
    if cond is None:
        return []
    cond = cond.unnest()
    if isinstance(cond, exp.And):
        return _conjuncts(cond.left) + _conjuncts(cond.right)
    return [cond]


def _group_by_scope(scope: Scope, tables: dict[str, Table]) -> tuple[bool, str | None]:
    """Add dependent bare columns of one grouped SELECT to its GROUP BY; the reason when a bare
    column is not dependent."""
    sel = scope.expression
    group = sel.args.get("group")
    if not isinstance(sel, exp.Select) or group is None or not group.expressions:
        return False, None
    closure = _grouped_closure(scope, sel, tables)
    added, seen = False, set()
    for col in _bare_columns(sel):
        k = _column_key(scope, col, tables)
        if k is None or k in closure or k in seen:
            continue
        if not _dependent(scope, col, tables, closure):
            by = ", ".join(g.sql() for g in group.expressions)
            return added, (
                f"bare column {col.sql()} in a grouped SELECT is not functionally "
                f"dependent on GROUP BY {by} (SQLite returns an arbitrary row's "
                "value); group by it or aggregate it"
            )
        group.append("expressions", col.copy())
        seen.add(k)
        added = True
    return added, None


def _column_key(scope: Scope, col: exp.Column, tables: dict[str, Table]) -> tuple[str, str] | None:
    """``(source alias, column name)`` of a column of ``scope``, None when its source is
    uncertain (``resolve_column``)."""
    hit = resolve_column(scope, col, tables)
    return (hit[0], col.name.lower()) if hit else None


def _grouped_closure(
    scope: Scope, sel: exp.Select, tables: dict[str, Table]
) -> set[tuple[str, str]]:
    """The grouped columns and every column equal to one through the join and WHERE equalities."""
    closure = {
        k
        for g in sel.args["group"].expressions
        if isinstance(g, exp.Column) and (k := _column_key(scope, g, tables))
    }
    conds = [j.args.get("on") for j in sel.args.get("joins") or []]
    conds.append(sel.args["where"].this if sel.args.get("where") else None)
    edges = [
        (_column_key(scope, c.left, tables), _column_key(scope, c.right, tables))
        for cond in conds
        for c in _conjuncts(cond)
        if isinstance(c, exp.EQ)
        and isinstance(c.left, exp.Column)
        and isinstance(c.right, exp.Column)
    ]
    grew = True
    while grew:
        grew = False
        for a, b in edges:
            if a and b and (a in closure) != (b in closure):
                closure |= {a, b}
                grew = True
    return closure


def _bare_columns(sel: exp.Select) -> list[exp.Column]:
    """Select-list and ORDER BY columns outside aggregates, not grouped (as written) nor aliases."""
    grouped_sql = {g.sql().lower() for g in sel.args["group"].expressions}
    aliases = {e.alias.lower() for e in sel.expressions if isinstance(e, exp.Alias)}
    exprs = list(sel.expressions) + [
        o.this for o in (sel.args.get("order") or exp.Order()).expressions
    ]
    return [
        col
        for e in exprs
        for col in outside_aggregates(e, sel)
        if not (col.sql().lower() in grouped_sql or (not col.table and col.name.lower() in aliases))
    ]


def _dependent(
    scope: Scope, col: exp.Column, tables: dict[str, Table], closure: set[tuple[str, str]]
) -> bool:
    """Whether a bare column is functionally dependent on the grouped key: its table's primary
    key is all in ``closure``."""
    alias, t = resolve_column(scope, col, tables)
    pk = {c.name.lower() for c in t.columns if c.is_primary_key} if t else set()
    return bool(pk) and all((alias, p) in closure for p in pk)


def group_by_dependent(
    tree: exp.Expression, schema: Schema
) -> tuple[exp.Expression, bool, str | None]:
    """Add bare columns of grouped SELECTs to the GROUP BY when their table's primary key is
    grouped (directly or through join/WHERE equalities); otherwise the reason to refuse.

    Args:
        tree: a statement tree; changed in place.
        schema: the tables the statement may read (primary keys).

    Returns:
        ``(tree, changed, reason)``; ``reason`` is None unless a bare column is not dependent.
    """
    tables = tables_by_name(schema)
    try:
        scopes = traverse_scope(tree)
    except (SqlglotError, KeyError, ValueError):
        return tree, False, None
    changed = False
    for scope in scopes:
        added, reason = _group_by_scope(scope, tables)
        changed = changed or added
        if reason:
            return tree, changed, reason
    return tree, changed, None
