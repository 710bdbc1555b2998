"""The SQL helpers the repair rules share: a condition's conjuncts, a candidate's shared parse,
the schema's table a query names and its columns, an identifier quoted as PostgreSQL needs,
and whether two column references name one column."""

from __future__ import annotations

from sqlglot import exp

from ..core.errors import CandidateRefused
from ..core.sqlcheck import parse_shared
from ..core.types import Schema, Table

__all__ = [
    "conjuncts",
    "has_column",
    "identifier",
    "parsed_sql",
    "same_column",
    "table_key",
    "table_named",
]


def conjuncts(e: exp.Expression) -> list[exp.Expression]:
    """The conditions ``e`` ANDs together, through parentheses.

    Args:
        e: a condition (a WHERE's, an ON's).

    Returns:
        Its conjuncts, left to right.
    """
    e = e.unnest()
    return conjuncts(e.this) + conjuncts(e.expression) if isinstance(e, exp.And) else [e]


def parsed_sql(sql: str | None) -> exp.Expression | None:
    """The shared parse of a candidate's SQL (``sqlcheck.parse_shared``: read it, do not change it).

    Args:
        sql: SQL text, or None.

    Returns:
        The tree, or None when there is no SQL or it does not parse.
    """
    try:
        return parse_shared(sql) if sql else None
    except CandidateRefused:
        return None


def table_named(schema: Schema, key: str) -> Table | None:
    """The schema's table that ``key`` names.

    Args:
        schema: the schema a candidate was written for.
        key: a table's name as the prompt names it, or ``schema.table`` (case folded).

    Returns:
        The ``Table``, or None when the schema holds none of that name.
    """
    key = key.lower()
    for table in schema.tables:
        if key in (table.name.lower(), f"{table.schema}.{table.table}".lower()):
            return table
    return None


def table_key(t: exp.Table) -> str:
    """How a query names a table: ``schema.table`` or ``table``, as written.

    Args:
        t: a table node of a query.

    Returns:
        The name, for ``table_named``.
    """
    return ".".join(i.name for i in (t.args.get("db"), t.args.get("this")) if i is not None)


def has_column(table: Table, name: str) -> bool:
    """Whether ``table`` has a column of that name.

    Args:
        table: a schema table.
        name: a column's name (case folded).

    Returns:
        True when one of its columns is so called.
    """
    return any(c.name.lower() == name.lower() for c in table.columns)


def identifier(name: str) -> exp.Identifier:
    """An identifier for a real name, quoted where PostgreSQL would fold it otherwise.

    Args:
        name: a table's or column's name as the catalog spells it.

    Returns:
        The sqlglot identifier.
    """
    ident = exp.to_identifier(name)
    if name != name.lower():
        ident.set("quoted", True)
    return ident


def same_column(a: exp.Column, b: exp.Expression) -> bool:
    """Whether both name the same column of the same table (unquoted names compared as
    PostgreSQL folds them).

    Args:
        a: a column reference.
        b: any expression.

    Returns:
        True when ``b`` is a column reference with ``a``'s qualifier and name.
    """
    if not isinstance(b, exp.Column):
        return False

    def key(c: exp.Column) -> tuple[str, ...]:
        return tuple(
            i.name if i.args.get("quoted") else i.name.lower()
            for i in (c.args.get("table"), c.args.get("this"))
            if isinstance(i, exp.Identifier)
        )

    return key(a) == key(b) and len(key(a)) == 2
