"""``outer_bound``: an ``IN (SELECT x FROM t …)`` whose ``x`` none of the subquery's own tables
has: SQL binds it to the outer query's ``x``, so the condition compares a value with itself and
holds wherever the subquery has a row (``template_id IN (SELECT template_id FROM
ref_template_types WHERE …)`` where ``ref_template_types`` has no ``template_id``). Said to the
model (names only); ``rehomed`` rewrites it where one related table has its columns.

Source: the 0.5B's "names of documents that use templates with the code BK" and the 1.5B's
"number of countries with more than 2 car makers" in bench/live.py's full runs
(docs/benchmarks.md); no Spider dev gold has such a subquery, 18 of the 13 recorded systems'
6,135 answers do.
"""

from __future__ import annotations

from sqlglot import exp

from ...core.types import Schema
from .._context import Context, Outcome
from .._sql import has_column, table_key, table_named

__all__ = ["run"]


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Say an ``IN`` subquery whose one output column none of its own tables has (an outer
    query's).

    Args:
        tree: the candidate's shared parse (read only), or None.
        ctx: the candidate (its schema's tables' columns).

    Returns:
        The sentence, or None when every IN subquery selects its own tables' columns, names a
        table the schema does not hold, or there is no schema or parse.
    """
    if ctx.schema is None or tree is None:
        return None
    bound = _outer_bound(tree, ctx.schema)
    if bound is None:
        return None
    column, tables = bound
    return Outcome(
        "outer_bound",
        sentence=(
            f"the IN subquery selects {column}, which none of its tables ({tables}) has, so it "
            "refers to the outer query's column and the condition holds wherever the subquery "
            "has a row; select a column of the subquery's own tables, or read the table that has it"
        ),
    )


def _outer_bound(tree: exp.Expression, schema: Schema) -> tuple[str, str] | None:
    """``(the column as written, the subquery's tables, comma-separated)`` of the first IN
    subquery whose one output column none of its own tables has; else None."""
    for node in tree.find_all(exp.In):
        sub = node.args.get("query")
        sub = sub.this if isinstance(sub, exp.Subquery) else sub
        if not isinstance(sub, exp.Select) or len(sub.expressions) != 1:
            continue
        column = sub.expressions[0]
        own = [t for t in sub.find_all(exp.Table) if t.find_ancestor(exp.Select) is sub]
        tables = [table_named(schema, table_key(t)) for t in own]
        if not isinstance(column, exp.Column) or not own or None in tables:
            continue
        aliases = {t.alias_or_name.lower() for t in own}
        if column.table:
            outer = column.table.lower() not in aliases
        else:
            outer = not any(has_column(t, column.name) for t in tables)
        if outer:
            return column.sql(dialect="postgres"), ", ".join(t.name for t in tables)
    return None
