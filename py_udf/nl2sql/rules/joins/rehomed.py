"""``rehomed``: an IN subquery that selects the outer query's column (``outer_bound``), where one
other table related to the subquery's by a foreign key holds every column the subquery names
(``templates``: ``template_id`` and ``template_type_code``) and is none of the outer query's:
round 0 reads the subquery from it (final).

Source: the 0.5B's "names of documents that use templates with the code BK" in bench/live.py's
full runs (docs/benchmarks.md); no Spider dev gold has such a subquery.
"""

from __future__ import annotations

from sqlglot import exp

from ...core.types import Schema
from .._context import Context, Outcome
from .._sql import has_column, identifier, table_key, table_named

__all__ = ["run"]


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Read an IN subquery that selects the outer query's column from the one table that has
    every column it names: related to the subquery's table by a foreign key, and none of the
    outer SELECT's tables (there the IN would compare a table with itself).

    Args:
        tree: the candidate's shared parse (copied before it is changed), or None.
        ctx: the candidate (its schema).

    Returns:
        The rewrite (``FROM a → b (IN subquery)``, final), or None where no IN subquery of one
        table selects an outer column, or no one such table (or more) holds its columns.
    """
    schema = ctx.schema
    if tree is None or schema is None:
        return None
    tree = tree.copy()
    for node in tree.find_all(exp.In):
        sub = node.args.get("query")
        sub = sub.this if isinstance(sub, exp.Subquery) else sub
        own = (
            [t for t in sub.find_all(exp.Table) if t.find_ancestor(exp.Select) is sub]
            if isinstance(sub, exp.Select)
            else []
        )
        if len(own) != 1 or sub.args.get("joins") or not _outer_column(sub, own, schema):
            continue
        home = _home(sub, own[0], node.find_ancestor(exp.Select), schema)
        if home is not None:
            old = own[0].name
            own[0].set("this", identifier(home.table))
            own[0].set("db", identifier(home.schema) if home.name != home.table else None)
            change = f"FROM {old} → {home.name} (IN subquery)"
            return Outcome("rehomed", tree.sql(dialect="postgres"), (change,), final=True)
    return None


def _outer_column(sub: exp.Select, own: list[exp.Table], schema: Schema) -> bool:
    """Whether ``sub``'s one output is a column none of ``own`` (all the schema's) has."""
    tables = [table_named(schema, table_key(t)) for t in own]
    column = sub.expressions[0] if len(sub.expressions) == 1 else None
    if not isinstance(column, exp.Column) or None in tables:
        return False
    if column.table:
        return column.table.lower() not in {t.alias_or_name.lower() for t in own}
    return not any(has_column(t, column.name) for t in tables)


def _home(sub: exp.Select, table: exp.Table, outer: exp.Select | None, schema: Schema):
    """The one table related to ``table``'s by a foreign key, of none of ``outer``'s tables,
    that has every column ``sub`` names (unqualified, or with ``table``'s name); else None."""
    mine = table_named(schema, table_key(table))
    names = set()
    for c in sub.find_all(exp.Column):
        if c.find_ancestor(exp.Select) is not sub:
            continue
        if c.table and c.table.lower() != table.alias_or_name.lower():
            return None
        names.add(c.name)
    theirs = [
        table_named(schema, table_key(t))
        for t in (outer.find_all(exp.Table) if outer is not None else ())
        if t.find_ancestor(exp.Select) is outer
    ]
    related = {k.ref_table for k in schema.foreign_keys if k.table == mine.name}
    related |= {k.table for k in schema.foreign_keys if k.ref_table == mine.name}
    homes = [
        t
        for t in schema.tables
        if t.name in related
        and t is not mine
        and t not in theirs
        and all(has_column(t, n) for n in names)
    ]
    return homes[0] if len(homes) == 1 else None
