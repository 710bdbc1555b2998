"""The semantic model's rows: a logical table's base table found in the catalog, an object's
expression checked like a business term's, and the upserts (docs/semantic-model.md)."""

from __future__ import annotations

import json
import re
from typing import Any

from sqlglot import exp

from ..core import spi
from ..core.errors import CandidateRefused, ItemSkipped
from ..core.sqlcheck import parse_single, statement_in_expression, to_sql
from ..core.types import Schema, Table
from ..generation.db_checks import (
    check_candidate_in_db,
    function_names,
    relation_targets,
    volatile_functions,
)

_PLAIN = re.compile(r"[a-z_][a-z0-9_$]*")


def identifier(name: str) -> exp.Identifier:
    """An identifier for a catalog name, quoted unless PostgreSQL would fold it to itself.

    Args:
        name: the name as the catalog spells it.

    Returns:
        The sqlglot identifier.
    """
    return exp.to_identifier(name, quoted=not _PLAIN.fullmatch(name))


def base_table(plpy, spec: Any, schema: Schema) -> Table:
    """The indexed table a logical table's ``base_table`` names (``database`` is not compared:
    the model describes this database); schema and table compared case-insensitively.

    Args:
        spec: the ``base_table`` mapping (``schema``, ``table``; ``database`` ignored).
        schema: the importing role's schema (``catalog.caller_schema``).

    Returns:
        The ``Table``.

    Raises:
        ItemSkipped: no ``base_table``, no such table, or not indexed.
        CandidateRefused: the table exists and the importing role may not SELECT it.
    """
    if not isinstance(spec, dict) or not str(spec.get("table") or "").strip():
        raise ItemSkipped("it has no base_table with a table")
    s, t = str(spec.get("schema") or "").strip(), str(spec["table"]).strip()
    hits = [
        x
        for x in schema.tables
        if x.table.lower() == t.lower() and (not s or x.schema.lower() == s.lower())
    ]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise ItemSkipped(f"base_table {t} is in several schemas: name its schema")
    row = spi.query(
        plpy,
        "SELECT c.oid::regclass::text AS name, has_table_privilege(c.oid, 'SELECT') AS ok "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE lower(c.relname) = lower($1) AND ($2 = '' OR lower(n.nspname) = lower($2)) "
        "AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY 1 LIMIT 1",
        [t, s],
        ["text", "text"],
    )
    shown = f"{s}.{t}" if s else t
    if not row:
        raise ItemSkipped(f"base_table {shown} does not exist in this database")
    if not row[0]["ok"]:
        raise CandidateRefused(f"the importing role may not SELECT {row[0]['name']}")
    raise ItemSkipped(f"base_table {row[0]['name']} is not indexed: run SELECT nl2sql.reindex()")


def column_of(table: Table, name: str) -> str:
    """The catalog's spelling of column ``name`` of ``table`` (case-insensitive).

    Args:
        table: the table.
        name: the column as the model writes it.

    Returns:
        The column's name.

    Raises:
        ItemSkipped: ``table`` has no such column.
    """
    for c in table.columns:
        if c.name.lower() == str(name).lower() or c.name == name:
            return c.name
    raise ItemSkipped(f"table {table.schema}.{table.table} has no column {name}")


def _parsed_expression(kind: str, expr: str) -> exp.Expression:
    """``check_expression``'s parse of ``expr``: one expression (a statement refused), no
    placeholder, aggregating exactly when ``kind`` is ``metric``.

    Raises:
        ItemSkipped, CandidateRefused: as ``check_expression`` says.
    """
    if not expr:
        raise ItemSkipped("it has no expr")
    found = statement_in_expression(expr)
    if found is not None:  # a statement, however the expression before it ends: refused
        raise CandidateRefused(f"expected one SQL expression, but it holds {found}")
    try:
        tree = parse_single(expr)
    except CandidateRefused as e:
        if "one statement" in str(e):  # statements after the expression: refused, not skipped
            raise
        raise ItemSkipped(f"its expression does not parse: {e}") from e
    if isinstance(tree, (exp.Query, exp.DDL, exp.DML, exp.Command)) and not isinstance(
        tree, exp.Subquery
    ):
        raise CandidateRefused(
            f"expected an SQL expression, not a {type(tree).__name__} statement: {expr[:80]}"
        )
    if tree.find(exp.Placeholder):
        raise ItemSkipped("its expression holds a placeholder")
    aggregates = any(a.find_ancestor(exp.Select) is None for a in tree.find_all(exp.AggFunc))
    if kind == "metric" and not aggregates:
        raise ItemSkipped("a metric's expression must aggregate, e.g. SUM(amount)")
    if kind != "metric" and aggregates:
        raise ItemSkipped(f"a {kind}'s expression must not aggregate (a metric's does)")
    return tree


def _qualified(
    tree: exp.Expression, table: Table, schema: Schema, logical: dict[str, Table]
) -> tuple[exp.Expression, dict[tuple[str, str], Table]]:
    """``check_expression``'s columns qualified by ``schema.table`` (``table``'s when they have
    no qualifier), and the tables they read by ``(schema, table)``.

    Raises:
        ItemSkipped: a qualifier is neither a logical table nor an indexed table, or a column
            is unknown.
    """
    lookup: dict[str, Table] = {}
    for t in schema.tables:
        lookup[t.name.lower()] = lookup[f"{t.schema}.{t.table}".lower()] = t
    used: dict[tuple[str, str], Table] = {(table.schema, table.table): table}
    for col in list(tree.find_all(exp.Column)):
        if col.find_ancestor(exp.Select) is not None or isinstance(col.this, exp.Star):
            continue  # a subquery's own columns: the candidate check resolves them
        t = table
        if col.table:
            q = ".".join(p.name for p in col.parts[:-1]).lower()
            t = logical.get(q) or logical.get(q.lstrip("_")) or lookup.get(q)
            if t is None:
                raise ItemSkipped(
                    f"{q} is neither a logical table of the model nor an indexed table"
                )
        name = column_of(t, col.name)
        used.setdefault((t.schema, t.table), t)
        new = exp.Column(this=identifier(name), table=identifier(t.table), db=identifier(t.schema))
        if col is tree:
            tree = new
        else:
            col.replace(new)
    return tree, used


def check_expression(
    plpy, kind: str, expr: str, table: Table, schema: Schema, logical: dict[str, Table]
) -> tuple[str, list[tuple[str, str]]]:
    """Check an object's SQL expression against the catalog and resolve it: a column without a
    qualifier is ``table``'s, a qualifier names a logical table (``logical``) or an indexed
    table; ``SELECT <expression> FROM <its tables>`` must pass the candidate check (read-only,
    no volatile or refused function, only relations the importing role may SELECT).

    Args:
        kind: ``metric`` (must aggregate) or ``dimension``, ``time_dimension``, ``fact``,
            ``filter`` (must not).
        expr: the expression as the model writes it.
        table: the logical table's base table.
        schema: the importing role's schema.
        logical: lower-cased logical table name -> its base table.

    Returns:
        ``(sql, relations)``: the expression with every column qualified by ``schema.table``
        (PostgreSQL), and ``(schema, table)`` of every relation it reads.

    Raises:
        ItemSkipped: empty, does not parse, a placeholder, an unknown table or column, or the
            wrong aggregation for ``kind``.
        CandidateRefused: a statement instead of an expression, or after it (behind a
            semicolon, or after a parenthesis that closes the expression:
            ``sqlcheck.statement_in_expression``), a volatile function (``random()`` too), or
            what the candidate check refuses (a relation the role may not read, a refused
            function).
    """
    tree = _parsed_expression(kind, expr)
    tree, used = _qualified(tree, table, schema, logical)
    sql = tree.sql(dialect="postgres")
    query = exp.select(tree.copy())
    for i, t in enumerate(used.values()):
        ref = exp.Table(this=identifier(t.table), db=identifier(t.schema))
        query = query.from_(ref) if i == 0 else query.join(ref)
    checked = check_candidate_in_db(plpy, to_sql(query), schema)
    volatile = volatile_functions(plpy, function_names(checked))
    if volatile:  # stricter than a candidate's check: random() is not allowed here either
        raise CandidateRefused(
            f"volatile function {', '.join(sorted(volatile))} not allowed: a semantic model's "
            "expression must give the same value for the same rows"
        )
    return sql, list(dict.fromkeys([*used, *relation_targets(checked, schema)]))


def save_model(plpy, name: str, description: str | None, extra: dict) -> None:
    """Store the model's name, description and the keys kept for export (one row).

    Args:
        name, description: the model's.
        extra: its other top-level keys.
    """
    spi.query(
        plpy,
        "INSERT INTO nl2sql.semantic_model (id, name, description, extra) "
        "VALUES (1, $1, $2, $3::jsonb) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, "
        "description = EXCLUDED.description, extra = EXCLUDED.extra, imported_at = now()",
        [name, description, _json(extra)],
        ["text", "text", "text"],
    )


def upsert_table(
    plpy, name: str, table: Table, description, synonyms, primary_key, extra
) -> tuple[int, bool]:
    """Add or update a logical table (by lower-cased name).

    Args:
        name: the logical table's name.
        table: its base table.
        description, synonyms, primary_key: as the model has them (None, lists of text).
        extra: the keys kept for export only.

    Returns:
        ``(id, added)``: added is False when it replaced one of the same name.
    """
    r = spi.query(
        plpy,
        "INSERT INTO nl2sql.semantic_table AS t (name, schema_name, table_name, description, "
        "synonyms, primary_key, extra) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb) "
        "ON CONFLICT (lower(name)) DO UPDATE SET name = EXCLUDED.name, "
        "schema_name = EXCLUDED.schema_name, table_name = EXCLUDED.table_name, "
        "description = EXCLUDED.description, synonyms = EXCLUDED.synonyms, "
        "primary_key = EXCLUDED.primary_key, extra = EXCLUDED.extra "
        "RETURNING t.id, (t.xmax = 0) AS added",
        [name, table.schema, table.table, description, synonyms, primary_key, _json(extra)],
        ["text", "name", "name", "text", "text[]", "text[]", "text"],
    )[0]
    return r["id"], bool(r["added"])


def upsert_object(
    plpy, table_id: int, kind: str, fields: dict, relations: list[tuple[str, str]]
) -> tuple[int, bool]:
    """Add or update an object of a logical table (by lower-cased name) and its relations.

    Args:
        table_id: the logical table's id.
        kind: its kind.
        fields: ``name``, ``expr``, ``sql``, ``description``, ``synonyms``, ``data_type``,
            ``extra``.
        relations: ``(schema, table)`` of every relation its expression reads.

    Returns:
        ``(id, added)``.
    """
    f = fields
    r = spi.query(
        plpy,
        "INSERT INTO nl2sql.semantic_object AS o (table_id, kind, name, expr, sql, description, "
        "synonyms, data_type, extra) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb) "
        "ON CONFLICT (table_id, lower(name)) DO UPDATE SET kind = EXCLUDED.kind, "
        "name = EXCLUDED.name, expr = EXCLUDED.expr, sql = EXCLUDED.sql, "
        "description = EXCLUDED.description, synonyms = EXCLUDED.synonyms, "
        "data_type = EXCLUDED.data_type, extra = EXCLUDED.extra "
        "RETURNING o.id, (o.xmax = 0) AS added",
        [
            table_id,
            kind,
            f["name"],
            f["expr"],
            f["sql"],
            f["description"],
            f["synonyms"],
            f["data_type"],
            _json(f["extra"]),
        ],
        ["int8", "text", "text", "text", "text", "text", "text[]", "text", "text"],
    )[0]
    spi.query(
        plpy,
        "DELETE FROM nl2sql.semantic_object_relation WHERE object_id = $1",
        [r["id"]],
        ["int8"],
    )
    for s, t in relations:
        spi.query(
            plpy,
            "INSERT INTO nl2sql.semantic_object_relation (object_id, schema_name, table_name) "
            "VALUES ($1, $2, $3)",
            [r["id"], s, t],
            ["int8", "name", "name"],
        )
    return r["id"], bool(r["added"])


def upsert_relationship(plpy, fields: dict) -> tuple[int, bool]:
    """Add or update a relationship (by lower-cased name).

    Args:
        fields: ``name``, ``left_table_id``, ``right_table_id``, ``left_columns``,
            ``right_columns``, ``join_type``, ``relationship_type``.

    Returns:
        ``(id, added)``.
    """
    f = fields
    r = spi.query(
        plpy,
        "INSERT INTO nl2sql.semantic_relationship AS r (name, left_table_id, right_table_id, "
        "left_columns, right_columns, join_type, relationship_type) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (lower(name)) DO UPDATE SET "
        "name = EXCLUDED.name, left_table_id = EXCLUDED.left_table_id, "
        "right_table_id = EXCLUDED.right_table_id, left_columns = EXCLUDED.left_columns, "
        "right_columns = EXCLUDED.right_columns, join_type = EXCLUDED.join_type, "
        "relationship_type = EXCLUDED.relationship_type RETURNING r.id, (r.xmax = 0) AS added",
        [
            f["name"],
            f["left_table_id"],
            f["right_table_id"],
            f["left_columns"],
            f["right_columns"],
            f["join_type"],
            f["relationship_type"],
        ],
        ["text", "int8", "int8", "text[]", "text[]", "text", "text"],
    )[0]
    return r["id"], bool(r["added"])


def _json(value: Any) -> str:
    return json.dumps(_plain_keys(value or {}), ensure_ascii=False, default=str)


def _plain_keys(value: Any) -> Any:
    """``value`` with every mapping key JSON can hold (a YAML date or timestamp key as text)."""
    if isinstance(value, dict):
        return {
            k if k is None or isinstance(k, (str, int, float, bool)) else str(k): _plain_keys(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_plain_keys(v) for v in value]
    return value
