"""The cell-value policy: which cell values may be indexed and sent to a model.

The rules, in the order they apply:

- setting ``send_values``: ``off`` keeps every cell value out of the index and the prompts;
- a column's row in ``nl2sql.value_policy`` (``send_values`` true/false), else its table's row
  (column name ``''``), decides for that column;
- without a policy row, a table with row-level security is not value-indexed (its rows would be
  read with the indexer's rights, not the asking role's): RLS tables are opt-in.

The rule itself is SQL function ``nl2sql._value_rule`` (reached here through
``nl2sql._values_allowed``), which view ``nl2sql.visible_column`` also applies, so the indexer
and every prompt read the same answer. This module is the Python side: which columns of a table
may be value-indexed (the indexer asks), which columns of the prompt schema are withheld (the
trace reports them), and storing a policy row (``nl2sql.set_value_policy``).

It imports only ``spi``, ``names`` and ``types`` from the package, so the indexer, safety and the
pipeline may all import it.

``rows_for_model`` applies the same rule to result rows: the one function through which rows of
a query's result reach a model (``nl2sql.narrate``) or an abstention's readings; an output
column computed from a column whose values are withheld is left out.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from . import spi
from .names import resolve
from .types import Schema


def value_columns(plpy, schema: str, table: str) -> dict[str, bool]:
    """Say for each column of a table whether its cell values may be indexed and sent.

    Allowed when the setting ``send_values`` is on and the column's policy, else its table's,
    allows it; without a policy a table with row-level security is not value-indexed (its rows
    would be read with the indexer's rights, not the asking role's). The rule is SQL function
    ``nl2sql._value_rule`` (here through ``nl2sql._values_allowed``), which view
    ``nl2sql.visible_column`` also applies.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        schema: the table's schema name.
        table: the table's name.

    Returns:
        Column name → whether its values may be indexed and sent (empty for an unknown table).
    """
    rows = spi.query(
        plpy, "SELECT a.attname::text AS col, "
        "nl2sql._values_allowed(n.nspname, r.relname, a.attname, r.relrowsecurity) AS ok "
        "FROM pg_catalog.pg_class r JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace "
        "JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 "
        "AND NOT a.attisdropped WHERE n.nspname = $1 AND r.relname = $2",
        [schema, table], ["name", "name"])
    return {r["col"]: bool(r["ok"]) for r in rows}


def withheld_value_columns(schema: Schema) -> list[str]:
    """List the columns whose cell values are kept from the model: what the trace reports.

    Withheld by the value policy, row-level security or the setting ``send_values``.

    Args:
        schema: ``catalog.load_schema``'s result (what the calling role may read).

    Returns:
        ``schema.table.column`` names, sorted.
    """
    return sorted(f"{t.schema}.{t.table}.{c.name}" for t in schema.tables for c in t.columns
                  if not c.values_allowed)


def store_policy(plpy, tbl: str, send_values: bool, column_name: str | None) -> dict[str, Any]:
    """Store one value-policy row for a table or one of its columns: backs ``set_value_policy``.

    Inserts or updates the row of ``nl2sql.value_policy``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        tbl: the table, as ``regclass`` text (resolved on the caller's search_path).
        send_values: true opts the values in, false keeps them out of the index and prompts.
        column_name: one column of ``tbl``, or None/empty for the whole table.

    Returns:
        ``{"schema", "table", "column", "send_values", "indexed"}``: the resolved names, the
        column as passed, the flag, and whether the table is in the schema index now (so its
        values need re-indexing).

    Raises:
        plpy.Error: (through ``plpy.error``, the SQL error the caller sees) on a null
            ``send_values`` or a column the table does not have.
        plpy.SPIError: ``tbl`` names no relation.
    """
    if send_values is None:
        plpy.error("nl2sql.set_value_policy: send_values must be true or false",
                   hint="false keeps the values out of the index and prompts; true opts in")
    r = spi.query(
        plpy, "SELECT n.nspname::text AS s, c.relname::text AS t FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1::regclass",
        [tbl], ["text"])[0]
    col = column_name or ""
    if col and col not in value_columns(plpy, r["s"], r["t"]):
        plpy.error(f"nl2sql.set_value_policy: table {r['s']}.{r['t']} has no column {col!r}",
                   hint="pass column_name => NULL for the whole table")
    spi.query(
        plpy, "INSERT INTO nl2sql.value_policy (schema_name, table_name, column_name, send_values) "
        "VALUES ($1, $2, $3, $4) ON CONFLICT (schema_name, table_name, column_name) "
        "DO UPDATE SET send_values = EXCLUDED.send_values", [r["s"], r["t"], col, send_values],
        ["name", "name", "name", "bool"])
    indexed = spi.query(
        plpy, "SELECT 1 FROM nl2sql.schema_table WHERE schema_name = $1 AND table_name = $2",
        [r["s"], r["t"]], ["name", "name"])
    return {"schema": r["s"], "table": r["t"], "column": column_name,
            "send_values": send_values, "indexed": bool(indexed)}


@dataclass
class GatedRows:
    """Result rows after the value policy: what may be shown to a model.

    Attributes:
        rows: the rows, each a dict of the kept output columns (or, for a row that was not
            complete JSON, its text when no column is withheld).
        columns: the output columns kept, in order.
        withheld: output columns left out because they are computed from a column whose
            values the policy withholds (or, when the query's shape hides where an output comes
            from, every output column of a query that reads such a column).
    """

    rows: list[Any] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)


def _withheld_sources(schema: Schema) -> dict[str, set[str]]:
    """Relation name (prompt name and bare name, lower-cased) -> its withheld columns."""
    out: dict[str, set[str]] = {}
    for t in schema.tables:
        cols = {c.name.lower() for c in t.columns if not c.values_allowed}
        if cols:
            for key in {t.name.lower(), t.table.lower(), f"{t.schema}.{t.table}".lower()}:
                out.setdefault(key, set()).update(cols)
    return out


def withheld_outputs(schema: Schema, sql: str, columns: list[str]) -> set[str]:
    """Say which output columns of a query are computed from withheld cell values.

    An output column of the outermost SELECT is withheld when one of the columns its
    expression references belongs (sqlglot scopes, ``names.resolve``) to a relation whose
    column of that name has its values withheld, or cannot be traced to a relation (a CTE's or
    derived table's column) while the query reads a withheld column. When the outermost query
    is not a plain SELECT with one expression per output column (``*``, set operations), an
    output column is withheld when a relation the query reads withholds a column of its name,
    and every column is withheld when the shape hides where the outputs come from (a set
    operation, or ``*`` over a CTE or derived table).

    Args:
        schema: the calling role's schema (``catalog.load_schema``: ``values_allowed`` per
            column).
        sql: the query whose rows these are (PostgreSQL).
        columns: the result's output column names, in order.

    Returns:
        The withheld output column names (a subset of ``columns``).
    """
    by_rel = _withheld_sources(schema)
    try:
        tree = sqlglot.parse_one(sql, read="postgres")
    except SqlglotError:
        tree = None
    if tree is None:
        return set(columns) if by_rel else set()
    names = resolve(tree)
    bad = {(r.key, c) for r in names.relations for c in
           by_rel.get(r.key, by_rel.get(r.name, set()))}
    if not bad:
        return set()
    bad_names = {c for _r, c in bad}
    sel = tree if isinstance(tree, exp.Select) else None
    plain = (sel is not None and len(sel.expressions) == len(columns)
             and not any(isinstance(e, exp.Star) or e.find(exp.Star) is not None
                         and not isinstance(e.find(exp.Star).parent, exp.Count)
                         for e in sel.expressions))
    if not plain:
        derived = bool(names.ctes) or any(isinstance(s, exp.Subquery) for s in
                                          tree.find_all(exp.Subquery))
        if not isinstance(tree, exp.Select) or derived:
            return set(columns)
        return {c for c in columns if c.lower() in bad_names}
    out = set()
    for name, e in zip(columns, sel.expressions):
        for col in e.find_all(exp.Column):
            rels = names.column_relations(col)
            if not rels or any((r.key, col.name.lower()) in bad for r in rels):
                out.add(name)
                break
    return out


def rows_for_model(schema: Schema, sql: str, rows: list[str]) -> GatedRows:
    """Apply the value policy to a query's result rows before they reach a model.

    The one place where result rows bound for a model (``nl2sql.narrate``'s request, an
    abstention's readings) meet the value rules: output columns computed from withheld cell
    values (``withheld_outputs``: the value policy, row-level security, ``send_values``) are
    left out of every row.

    Args:
        schema: the calling role's schema (``catalog.load_schema``).
        sql: the query the rows came from.
        rows: the rows as ``row_to_json`` texts (a text may be cut short: such a row is kept
            as text only when no column is withheld).

    Returns:
        GatedRows: the kept rows (dicts in column order), the kept and the withheld columns.
    """
    parsed: list[Any] = []
    columns: list[str] = []
    for text in rows:
        try:
            row = json.loads(text)
        except (TypeError, ValueError):
            row = text
        if isinstance(row, dict) and not columns:
            columns = list(row)
        parsed.append(row)
    if not columns:
        return GatedRows(parsed if not _withheld_sources(schema) else [], [], [])
    drop = withheld_outputs(schema, sql, columns)
    keep = [c for c in columns if c not in drop]
    kept_rows = [{c: r.get(c) for c in keep} if isinstance(r, dict) else r
                 for r in parsed if isinstance(r, dict) or not drop]
    return GatedRows(kept_rows, keep, [c for c in columns if c in drop])
