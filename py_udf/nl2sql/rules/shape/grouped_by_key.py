"""``grouped_by_key``: a one-table query that counts over groups of the table's primary key:
every group is one row, so every count is 1 ("for each continent, how many countries it has"
answered from the continents table alone). Said to the model, with the foreign keys that refer
to the table.

Source: seen with Qwen2.5-Coder-0.5B-Instruct in bench/live.py (docs/benchmarks.md); the rule is
the SQL's and the schema's primary keys, never one database's.
"""

from __future__ import annotations

from sqlglot import exp

from ...core.types import Schema
from .._context import Context, Outcome
from .._sql import table_named
from ._tree import at_top

__all__ = ["run"]


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Say a SELECT of one table that counts over groups holding the table's whole primary key:
    each group is one row, so each count is 1 (or 0).

    Args:
        tree: the candidate's shared parse (read only), or None.
        ctx: the candidate (its schema's primary keys, ``Column.is_primary_key``).

    Returns:
        The sentence (the table, the GROUP BY's columns, the keys referring to the table), or
        None when the SQL counts nothing at its top level, reads more than one table, does not
        group by a whole primary key, names a table the schema does not hold, or does not parse
        (or there is no schema).
    """
    schema = ctx.schema
    if schema is None or not isinstance(tree, exp.Select):
        return None
    if tree.args.get("joins") or not tree.args.get("group"):
        return None
    froms = [v for v in tree.args.values() if isinstance(v, exp.From)]
    if len(froms) != 1 or not isinstance(froms[0].this, exp.Table):
        return None
    if not any(at_top(e, tree, exp.Count) for e in tree.expressions):
        return None
    t = froms[0].this
    table = table_named(schema, ".".join(i.name for i in (t.args.get("db"), t.this) if i))
    key = {c.name.lower() for c in table.columns if c.is_primary_key} if table else set()
    grouped = [g for g in tree.args["group"].expressions if isinstance(g, exp.Column)]
    if not key or not key <= {g.name.lower() for g in grouped}:
        return None
    # the grouped columns only: another GROUP BY expression may hold a literal (a cell value)
    by = ", ".join(g.sql(dialect="postgres") for g in grouped)
    return Outcome(
        "grouped_by_key",
        sentence=(
            f"GROUP BY {by} groups {table.name} by its primary key, so every group is one "
            f"row and every count is 1; to count the rows related to each {table.name} row, join "
            f"the table that refers to it{_referring(schema, table.name)}"
        ),
    )


def _referring(schema: Schema, table: str) -> str:
    """`` (a.x refers to t.y; …)``: the schema's foreign keys into ``table`` (names only), or
    '' for none."""
    refs = [
        f"{fk.table}.{', '.join(fk.columns)} refers to {table}.{', '.join(fk.ref_columns)}"
        for fk in schema.foreign_keys
        if fk.ref_table == table and fk.table != table
    ]
    return f" ({'; '.join(refs[:3])})" if refs else ""
