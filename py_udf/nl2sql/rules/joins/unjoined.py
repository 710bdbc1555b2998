"""``unjoined``: a failed query joining two tables on a column one of them lacks, everything else
it names held by one of the two (``SELECT T2.role_code, T2.city FROM professionals AS T1 JOIN
owners AS T2 ON T1.owner_id = T2.owner_id``, where professionals has no owner_id and owners no
role_code): the join was never needed; round 0 reads that one table alone (before names are
snapped: snapping its ON would only join more).

Source: bench/live.py's answers of Qwen2.5-Coder-0.5B and 1.5B-Instruct on Spider dev
(docs/benchmarks.md); nothing per database: the schema's columns.
"""

from __future__ import annotations

from sqlglot import exp

from ...core.types import Table
from .._context import Context, Outcome
from .._sql import has_column, table_key, table_named

__all__ = ["run"]

_NONE = Table("", "", "", [])  # a qualifier that names neither table: no column of its own


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Drop a join that cannot run and was not needed: a SELECT of two tables joined ``ON`` a
    column (qualified) that its table lacks, where exactly one of the two tables holds every
    other column the query names; that table is read alone, the qualifiers made its own.

    Args:
        tree: the failed candidate's shared parse (copied before it is changed), or None.
        ctx: the candidate (its schema's tables' columns).

    Returns:
        The rewrite (``JOIN t dropped``), or None where the query is not a SELECT of two tables
        and one join ON, has a subquery, aggregates or groups (the join's rows may be what it
        counts), names a table the schema lacks, joins on columns both tables have, or where no
        one table (or both) holds the other columns.
    """
    schema = ctx.schema
    if not isinstance(tree, exp.Select) or len(tree.args.get("joins") or []) != 1:
        return None
    if schema is None:
        return None
    tree = tree.copy()
    join, source = tree.args["joins"][0], tree.args.get("from_")
    nodes = [source.this if source else None, join.this]
    tables = {n.alias_or_name.lower(): table_named(schema, table_key(n)) for n in nodes if n}
    on = join.args.get("on")
    if on is None or len(tables) != 2 or None in tables.values() or tree.find(exp.Subquery):
        return None
    if tree.find(exp.AggFunc) or tree.args.get("group"):
        return None  # what it counts or groups may be the join's rows: the join was meant
    lacking = [
        c
        for c in on.find_all(exp.Column)
        if not has_column(tables.get(c.table.lower(), _NONE), c.name)
    ]
    rest = [c for c in tree.find_all(exp.Column) if c.find_ancestor(exp.Join) is None]
    holders = [a for a, t in tables.items() if all(has_column(t, c.name) for c in rest)]
    if not lacking or len(holders) != 1:
        return None
    kept = next(n for n in nodes if n.alias_or_name.lower() == holders[0])
    dropped = next(n for n in nodes if n is not kept)
    tree.set("joins", None)
    tree.set("from_", exp.From(this=kept))
    for c in rest:
        if c.table:
            c.set("table", exp.to_identifier(kept.alias_or_name))
    return Outcome("unjoined", tree.sql(dialect="postgres"), (f"JOIN {dropped.name} dropped",))
