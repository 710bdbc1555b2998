"""Literal evidence for a weak consensus: a candidate whose string literals are no cell values
of the columns it compares them with (``'stealth'`` where the column holds ``'Stealth'``) most
likely reads the wrong rows (BIRD's value mismatches: Li et al. 2023 §5; CHESS (Talaei et al.
2024) §3.1 and OpenSearch-SQL (Xie et al. 2024) §3.5 look literals up in the same kind of
index). docs/internals/selection.md "Weak consensus"."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sqlglot import exp

from ..core import spi
from ..core.errors import CandidateRefused
from ..core.names import resolve
from ..core.sqlcheck import parse_one
from ..core.types import Schema
from ..generation.alignment import resolve_column

__all__ = ["compared_literals", "literal_misses", "missing_literals"]

Col = tuple[str, str, str]

# One statement for every (column, literal) of a vote: per pair the column's count of indexed
# values the role may read and, of its values equal to the literal ignoring case, the one equal
# to it as written first (nl2sql._column_values: SECURITY DEFINER, the role's privileges and
# value policy; a similarity threshold above 1 keeps only the case-insensitive matches).
_LOOKUP = (
    "SELECT u.i::int AS i, f.n_values AS n, f.value FROM unnest($1::name[], $2::name[], "
    "$3::name[], $4::text[]) WITH ORDINALITY AS u(s, t, c, lit, i) CROSS JOIN LATERAL "
    "nl2sql._column_values(current_user, u.s, u.t, u.c, u.lit, 2.0, 1) AS f"
)


def _tables(schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {t.name.lower(): t for t in schema.tables}
    out.update({f"{t.schema}.{t.table}".lower(): t for t in schema.tables})
    return out


def _compared(node: exp.Expression) -> tuple[Any, list[Any]]:
    """The column and the literals a comparison node compares it with (``=``, ``IN``, ``LIKE``
    whose pattern holds no wildcard)."""
    if isinstance(node, exp.In):
        return node.this, list(node.expressions)
    a, b = node.this, node.expression
    col, lit = (a, b) if isinstance(a, exp.Column) else (b, a)
    wild = isinstance(lit, exp.Literal) and ("%" in lit.this or "_" in lit.this)
    if isinstance(node, exp.Like) and wild:
        return None, []
    return col, [lit]


def compared_literals(sql: str, schema: Schema) -> list[tuple[Col, str]]:
    """Find the string literals a query compares with a column of the schema: ``col = 'x'``,
    ``col IN ('x', …)``, ``col LIKE 'x'`` without wildcards (sqlglot's tree, names resolved as
    value alignment resolves them: ``generation.alignment.resolve_column``).

    Args:
        sql: one PostgreSQL statement (a candidate's executed SQL).
        schema: the schema the calling role may see (``catalog.load_schema``).

    Returns:
        ((schema, table, column), literal text) pairs in tree order, duplicates dropped; empty
        when the statement does not parse.
    """
    try:
        tree = parse_one(sql)
    except CandidateRefused:
        return []
    names, lookup = resolve(tree), _tables(schema)
    out: list[tuple[Col, str]] = []
    for node in tree.find_all(exp.EQ, exp.In, exp.Like):
        col, lits = _compared(node)
        if not isinstance(col, exp.Column):
            continue
        texts = [x.this for x in lits if isinstance(x, exp.Literal) and x.is_string]
        where = resolve_column(col, names, lookup) if texts else None
        if where is not None:
            out.extend((where, t) for t in texts if (where, t) not in out)
    return out


def missing_literals(
    plpy, pairs: Iterable[tuple[Col, str]], cap: int, partial: Iterable[Col] = ()
) -> set[tuple[Col, str]]:
    """Which (column, literal) pairs are no cell value of their column in the value index, as
    the calling role may read it: one statement for all (``nl2sql._column_values``).

    A column with no indexed value the role may read, at the indexer's cap or partially
    indexed (``value_policy.partial_columns``) says nothing: its pairs are never missing.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        pairs: ((schema, table, column), literal) pairs.
        cap: setting ``values_per_column`` (a column holding as many values may hold more).
        partial: the partially indexed columns.

    Returns:
        The missing pairs (a literal found only in another case is missing).

    Raises:
        plpy.SPIError: the statement fails (QueryCanceled when the caller cancelled).
    """
    todo = list(dict.fromkeys(p for p in pairs if p[0] not in set(partial)))
    if not todo:
        return set()
    cols = list(zip(*(c for c, _ in todo), strict=True))
    rows = spi.query(
        plpy,
        _LOOKUP,
        [list(cols[0]), list(cols[1]), list(cols[2]), [lit for _, lit in todo]],
        ["name[]", "name[]", "name[]", "text[]"],
    )
    out = set()
    for r in rows:
        col, lit = todo[int(r["i"]) - 1]
        if 0 < int(r["n"]) < cap and r["value"] != lit:
            out.add((col, lit))
    return out


def literal_misses(
    plpy, schema: Schema, cap: int, partial: Iterable[Col] = ()
) -> Callable[[list[dict[str, Any]]], list[int]]:
    """The literal evidence of a vote: per group, how many of its representative's compared
    literals the value index lacks (one lookup for all the groups).

    Args:
        plpy: the PL/Python module of the calling backend.
        schema: the schema the calling role may see.
        cap: setting ``values_per_column``.
        partial: the partially indexed columns (``value_policy.partial_columns``).

    Returns:
        A function of the contending groups (each with ``sql``) to their counts of missing
        literals, in order.
    """
    partial = set(partial)

    def misses(groups: list[dict[str, Any]]) -> list[int]:
        found = [compared_literals(g.get("sql") or "", schema) for g in groups]
        missing = missing_literals(plpy, (p for f in found for p in f), cap, partial)
        return [sum(1 for p in f if p in missing) for f in found]

    return misses
