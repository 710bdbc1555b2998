"""An IN subquery that selects the outer query's column, which the schema's columns show
(repair, docs/internals/generation.md "Repair"):

- ``outer_bound``: an ``IN (SELECT x FROM t …)`` whose ``x`` none of the subquery's own tables
  has: SQL binds it to the outer query's ``x``, so the condition compares a value with itself and
  holds wherever the subquery has a row (``template_id IN (SELECT template_id FROM
  ref_template_types WHERE …)`` where ``ref_template_types`` has no ``template_id``).
- ``rehomed``: where one other table related to the subquery's by a foreign key holds every
  column the subquery names (``templates``: ``template_id`` and ``template_type_code``), and is
  none of the outer query's, round 0 reads the subquery from it.

Where it came from: the 0.5B's "names of documents that use templates with the code BK" and the
1.5B's "number of countries with more than 2 car makers" in bench/live.py's full runs
(docs/benchmarks.md); no Spider dev gold has such a subquery, 18 of the 13 recorded systems'
6,135 answers do. Nothing per database.
"""

from __future__ import annotations

from sqlglot import exp

from ..core.errors import CandidateRefused
from ..core.sqlcheck import parse_one
from ..core.types import Schema
from ._shown_links import has_column, identifier, link_problem, parsed_sql, table_key, table_named

__all__ = ["outer_bound", "rehomed", "relation_problem"]


def relation_problem(
    sql: str | None, schema: Schema | None, question: str | None = None
) -> str | None:
    """The sentence for the repair prompt on a query that relates tables the wrong way: two
    tables (``_shown_links.link_problem``), or an IN subquery and its outer query
    (``outer_bound``); names only, never a literal.

    Args:
        sql: a candidate's SQL (PostgreSQL), or None.
        schema: the schema it was written for, or None.
        question: the user's question, or None.

    Returns:
        One sentence, or None when no rule applies (or there is no schema).
    """
    if schema is None:
        return None
    linked = link_problem(sql, schema, question)
    if linked:
        return linked
    bound = outer_bound(sql, schema)
    if bound:
        column, tables = bound
        return (
            f"the IN subquery selects {column}, which none of its tables ({tables}) has, so it "
            "refers to the outer query's column and the condition holds wherever the subquery "
            "has a row; select a column of the subquery's own tables, or read the table that has it"
        )
    return None


def outer_bound(sql: str | None, schema: Schema) -> tuple[str, str] | None:
    """An ``IN`` subquery whose one output column none of its own tables has (an outer query's).

    Args:
        sql: a candidate's SQL (PostgreSQL), or None.
        schema: the schema it was written for (its tables' columns).

    Returns:
        ``(the column as written, the subquery's tables, comma-separated)``, or None when every
        IN subquery selects its own tables' columns, names a table the schema does not hold, or
        the SQL does not parse.
    """
    tree = parsed_sql(sql)
    if tree is None:
        return None
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


def rehomed(sql: str | None, schema: Schema) -> tuple[str, list[str]] | None:
    """Read an IN subquery that selects the outer query's column (``outer_bound``) from the one
    table that has every column it names: related to the subquery's table by a foreign key, and
    none of the outer SELECT's tables (there the IN would compare a table with itself).

    Args:
        sql: a candidate's SQL (PostgreSQL), or None.
        schema: the schema it was written for.

    Returns:
        ``(the rewritten SQL, ["FROM a → b (IN subquery)"])``, or None where no IN subquery of
        one table selects an outer column, or no one such table (or more) holds its columns.
    """
    try:
        tree = parse_one(sql) if sql else None
    except CandidateRefused:
        return None
    for node in tree.find_all(exp.In) if tree is not None else ():
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
            return tree.sql(dialect="postgres"), [f"FROM {old} → {home.name} (IN subquery)"]
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
