"""``fix_by_sqlstate``: a failed PostgreSQL candidate's SQL that SQLite, the dialect most
text-to-SQL training data is written in, runs and PostgreSQL refuses, rewritten in round 0 where
the error has one reading (after ``unjoined`` and ``linking.names.snap_names``):

- ``21000`` "more than one row returned by a subquery used as an expression": ``x = (SELECT …)``
  → ``x IN (SELECT …)`` (``<>`` → ``NOT … IN``); SQLite takes the subquery's first row, an
  arbitrary one, where the question asks for each.
- ``42803`` "must appear in the GROUP BY clause": a lone ``max``/``min`` beside bare columns →
  the row holding it (``minmax_rows``, also the SQLite rule ``sqlite:minmax_row``); else a SELECT
  with aggregates grouped by its select list's expressions that hold none, added to its GROUP BY
  when it has one (``SELECT format FROM t ORDER BY count(*)`` → ``… GROUP BY format``).

Source: PostgreSQL's SQLSTATEs 21000 (cardinality_violation) and 42803 (grouping_error); seen
with Qwen2.5-Coder-0.5B/1.5B-Instruct in bench/live.py (docs/internals/generation.md "Repair").
"""

from __future__ import annotations

from sqlglot import exp

from ...core.sqlcheck import to_sql
from .._context import Context, Outcome

__all__ = ["CARDINALITY", "GROUPING", "minmax_rows", "outside_aggregates", "run"]

CARDINALITY = "21000"  # cardinality_violation
GROUPING = "42803"  # grouping_error


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """The failing query rewritten by its error's one reading.

    Args:
        tree: the candidate's shared parse (copied before it is changed), or None.
        ctx: the candidate (the SQLSTATE its execution failed with).

    Returns:
        The rewrite (what changed), or None when the error has no rule here, the query does not
        parse, or nothing in it fits the rule.
    """
    rule = _RULES.get(ctx.sqlstate or "")
    if rule is None or tree is None:
        return None
    tree = tree.copy()
    changes = rule(tree)
    return Outcome("fix_by_sqlstate", to_sql(tree), tuple(changes)) if changes else None


def outside_aggregates(expr: exp.Expression, select: exp.Select) -> list[exp.Column]:
    """Columns of ``expr`` that are not inside an aggregate or a subquery of ``select``.

    Args:
        expr: one of ``select``'s expressions.
        select: a SELECT.

    Returns:
        Those columns, in order.
    """
    out = []
    for col in expr.find_all(exp.Column):
        node, inside = col.parent, False
        while node is not None and node is not select:
            if isinstance(node, (exp.AggFunc, exp.Select, exp.Window)):
                inside = True
                break
            node = node.parent
        if not inside:
            out.append(col)
    return out


def minmax_rows(tree: exp.Expression) -> tuple[exp.Expression, bool]:
    """Bare columns beside a lone ``max``/``min`` of an ungrouped SELECT: taken from the row
    holding the extreme (``ORDER BY x DESC NULLS LAST LIMIT 1``).

    Args:
        tree: a statement tree; changed in place.

    Returns:
        ``(tree, changed)``.
    """
    changed = False
    for sel in list(tree.find_all(exp.Select)):
        changed = _minmax_select(sel) or changed
    return tree, changed


def _minmax_select(sel: exp.Select) -> bool:
    """Rewrite one ungrouped SELECT of ``minmax_rows`` in place; True when rewritten."""
    if (
        sel.args.get("group")
        or sel.args.get("having")
        or sel.args.get("order")
        or sel.args.get("limit")
        or sel.args.get("offset")
        or sel.args.get("distinct")
    ):
        return False
    aggs = [
        a
        for e in sel.expressions
        for a in e.find_all(exp.AggFunc, exp.Window)
        if a.find_ancestor(exp.Select) is sel
    ]
    if (
        len(aggs) != 1
        or not isinstance(aggs[0], (exp.Max, exp.Min))
        or aggs[0].expressions
        or isinstance(aggs[0].this, exp.Distinct)
    ):
        return False
    if not any(outside_aggregates(e, sel) for e in sel.expressions):
        return False
    agg = aggs[0]
    key = agg.this.copy()
    agg.replace(agg.this.copy())
    sel.order_by(
        exp.Ordered(this=key, desc=isinstance(agg, exp.Max), nulls_first=False), copy=False
    )
    sel.limit(1, copy=False)
    return True


def _subquery_in(tree: exp.Expression) -> list[str]:
    """``x = (SELECT …)`` → ``x IN (SELECT …)``, ``x <> (SELECT …)`` → ``NOT x IN (SELECT …)``."""
    changes = []
    for cmp in list(tree.find_all(exp.EQ, exp.NEQ)):
        left, right = cmp.this, cmp.expression
        if isinstance(left, exp.Subquery) and not isinstance(right, exp.Subquery):
            left, right = right, left
        if not isinstance(right, exp.Subquery) or isinstance(left, exp.Subquery):
            continue
        new: exp.Expression = exp.In(this=left.copy(), query=right.copy())
        if isinstance(cmp, exp.NEQ):
            new = exp.Not(this=new)
        cmp.replace(new)
        changes.append(f"{'<>' if isinstance(cmp, exp.NEQ) else '='} (subquery) → IN")
    return changes


def _grouped(tree: exp.Expression) -> list[str]:
    """A lone max/min's row (``minmax_rows``), else each SELECT with aggregates grouped by its
    select list's expressions that hold no aggregate (added to a GROUP BY it has: what the
    error asks), and a grouped SELECT's ORDER BY column that is neither grouped nor aggregated
    ordered by its groups' ``max`` (descending) or ``min`` (ascending)."""
    _, changed = minmax_rows(tree)
    if changed:
        return ["max/min beside bare columns → the row holding it"]
    changes = []
    for sel in list(tree.find_all(exp.Select)):
        keys = _group_keys(sel)
        if keys:
            sel.group_by(*keys, copy=False)
            changes.append(f"GROUP BY {', '.join(k.sql() for k in keys)} added")
        changes += _order_by_groups(sel)
    return changes


def _order_by_groups(sel: exp.Select) -> list[str]:
    """A grouped SELECT's ORDER BY columns that are neither grouped nor selected by name, each
    put in its groups' ``max`` where descending, ``min`` where ascending: every group stands
    where its first row would in the rows so ordered (``ORDER BY year DESC`` of record
    companies: the company of the latest year first)."""
    group, order = sel.args.get("group"), sel.args.get("order")
    if not group or not order:
        return []
    grouped = {g.sql().lower() for g in group.expressions}
    grouped |= {g.name.lower() for g in group.expressions if isinstance(g, exp.Column)}
    named = {e.alias_or_name.lower() for e in sel.expressions}
    changes = []
    for term in order.expressions:
        col = term.this
        if not isinstance(col, exp.Column) or isinstance(col.this, exp.Star):
            continue
        if col.sql().lower() in grouped or col.name.lower() in grouped:
            continue
        if not col.table and col.name.lower() in named:  # an output column's name
            continue
        agg = exp.Max if term.args.get("desc") else exp.Min
        col.replace(agg(this=col.copy()))
        changes.append(f"ORDER BY {col.sql()} → {agg.key.upper()}({col.sql()})")
    return changes


def _group_keys(sel: exp.Select) -> list[exp.Expression]:
    """The expressions a SELECT with aggregates is to be grouped by as well: those of its select
    list that hold a column and no aggregate and are not in its GROUP BY; [] when it has no
    aggregate (a window's is none)."""
    aggregates = [a for a in sel.find_all(exp.AggFunc) if a.find_ancestor(exp.Select) is sel]
    if not any(not isinstance(a.parent, exp.Window) for a in aggregates):
        return []
    group = sel.args.get("group")
    grouped = {g.sql().lower() for g in group.expressions} if group else set()
    keys = []
    for e in sel.expressions:
        e = e.this if isinstance(e, exp.Alias) else e
        if e.sql().lower() in grouped or not _own_in(e, sel, exp.Column):
            continue
        if not _own_in(e, sel, exp.AggFunc, exp.Window):
            keys.append(e.copy())
            grouped.add(e.sql().lower())
    return keys


def _own_in(node: exp.Expression, sel: exp.Select, *kinds) -> bool:
    """``node`` holds a node of ``kinds`` whose nearest SELECT is ``sel``."""
    return any(
        n.find_ancestor(exp.Select) is sel
        and not (isinstance(n, exp.Column) and isinstance(n.this, exp.Star))
        for n in node.find_all(*kinds)
        if n is not sel
    )


_RULES = {CARDINALITY: _subquery_in, GROUPING: _grouped}
