"""``grouped_by_key``: a one-table query that counts over groups of the table's primary key:
every group is one row, so every count is 1 ("for each continent, how many countries it has"
answered from the continents table alone). Said to the model, with the foreign keys that refer
to the table; and where exactly one table refers to it (one single-column foreign key) and every
aggregate is a plain COUNT, rewritten: that table joined on its key, so each count counts the
related rows (the one reading a count per row of a table has; Spider's gold queries join so).

Source: seen with Qwen2.5-Coder-0.5B-Instruct in bench/live.py (docs/benchmarks.md); the
rewrite after the 1.5B on all 472 Spider dev questions (2026-12-08): told three rounds, the model
kept its query. The rule is the SQL's and the schema's keys, never one database's.
"""

from __future__ import annotations

from sqlglot import exp

from ...core.types import ForeignKey, Schema, Table
from .._context import Context, Outcome
from .._sql import has_column, identifier, table_named
from ._tree import at_top

__all__ = ["run"]


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Say a SELECT of one table that counts over groups holding the table's whole primary key:
    each group is one row, so each count is 1 (or 0).

    Args:
        tree: the candidate's shared parse (read only), or None.
        ctx: the candidate (its schema's primary keys, ``Column.is_primary_key``).

    Returns:
        The sentence (the table, the GROUP BY's columns, the keys referring to the table) and,
        where one table refers to it, the rewrite joining that table (``_joined``); or None when the SQL counts nothing at its top level, reads more than one table, does not
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
    joined = _joined(tree, t, table, schema)
    return Outcome(
        "grouped_by_key",
        sql=joined[0] if joined else None,
        changes=(joined[1],) if joined else (),
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


def _joined(tree: exp.Select, t: exp.Table, table: Table, schema: Schema) -> tuple[str, str] | None:
    """The query with the one table that refers to ``table`` joined on its foreign key (its
    unqualified columns of ``table`` qualified first), and the change in words; None when no
    table or more than one refers to it, the key has more than one column, or an aggregate at
    the top is other than a plain COUNT."""
    refs = [
        fk
        for fk in schema.foreign_keys
        if fk.ref_table == table.name and fk.table != table.name and len(fk.columns) == 1
    ]
    if len(refs) != 1 or not all(_plain_count(a, tree) for a in tree.find_all(exp.AggFunc)):
        return None
    fk: ForeignKey = refs[0]
    base = t.alias_or_name
    out = tree.copy()
    for col in out.find_all(exp.Column):
        if not col.table and col.find_ancestor(exp.Select) is out and has_column(table, col.name):
            col.set("table", identifier(base))
    alias = _fresh(out, fk.table)
    on = exp.column(identifier(fk.columns[0]), table=identifier(alias)).eq(
        exp.column(identifier(fk.ref_columns[0]), table=identifier(base))
    )
    joined = exp.to_table(fk.table)
    if alias != fk.table.split(".")[-1]:
        joined = exp.alias_(joined, identifier(alias), table=True)
    out = out.join(joined, on=on)
    return out.sql(dialect="postgres"), f"{fk.table} joined on {fk.table}.{fk.columns[0]}"


def _plain_count(agg: exp.Expression, top: exp.Select) -> bool:
    """A COUNT without DISTINCT, or an aggregate inside a subquery (not the top's)."""
    if agg.find_ancestor(exp.Select) is not top:
        return True
    return isinstance(agg, exp.Count) and not agg.find(exp.Distinct)


def _fresh(tree: exp.Expression, name: str) -> str:
    """``name``, or ``name_2``, …: no table of ``tree`` is called so."""
    used = {x.alias_or_name.lower() for x in tree.find_all(exp.Table)}
    alias, n = name.split(".")[-1], 1
    while alias.lower() in used:
        n += 1
        alias = f"{name.split('.')[-1]}_{n}"
    return alias
