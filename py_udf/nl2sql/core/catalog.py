"""Reading the schema index (``nl2sql.schema_*``, through the per-role views) back into a
``Schema`` for prompting. Main thread only."""

from __future__ import annotations

from . import spi
from .errors import NotIndexedError
from .types import Column, ForeignKey, Schema, Table


def parse_search_path(plpy, search_path: str) -> list[str]:
    """Split a search_path setting into schema names.

    Args:
        search_path: the setting's text, e.g. ``"$user", public``.

    Returns:
        The schema names in order, unquoted, ``$user`` replaced, empty entries dropped.
    """
    rows = spi.query(
        plpy,
        "SELECT s, current_user AS u FROM unnest(pg_catalog.string_to_array($1, ',')) AS s",
        [search_path],
        ["text"],
    )
    out = []
    for r in rows:
        s = r["s"].strip()
        if s.startswith('"') and s.endswith('"'):
            s = s[1:-1].replace('""', '"')
        if s == "$user":
            s = r["u"]
        if s:
            out.append(s)
    return out


def load_schema(plpy, search_path: list[str], n_values: int = 3) -> Schema:
    """Load the indexed schema the calling role may read, as the prompt shows it (through
    ``nl2sql.visible_table``/``_column``/``_fk``; sample values where the policy allows).

    Args:
        search_path: schema names in order (``parse_search_path``).
        n_values: most sample values kept per column.

    Returns:
        ``Schema``: tables by schema and name (columns in table order), foreign keys, prompt names.

    Raises:
        NotIndexedError: no table the role may SELECT is indexed.
    """
    trows = _visible_tables(plpy)
    crows = spi.query(
        plpy,
        "SELECT schema_name, table_name, column_name, data_type, is_primary_key, comment, "
        "sample_values, values_allowed, values_complete FROM nl2sql.visible_column "
        "ORDER BY schema_name, table_name, ordinal",
    )
    frows = spi.query(
        plpy,
        "SELECT schema_name, table_name, columns, ref_schema, ref_table, ref_columns "
        "FROM nl2sql.visible_fk ORDER BY schema_name, table_name, constraint_name",
    )
    first_schema = _first_schema_per_table(trows, search_path)

    def shown(schema: str, table: str) -> str:
        return table if first_schema.get(table) == schema else f"{schema}.{table}"

    cols = _columns_by_table(crows, n_values)
    tables = [
        Table(
            name=shown(r["schema_name"], r["table_name"]),
            schema=r["schema_name"],
            table=r["table_name"],
            comment=r["comment"],
            columns=cols.get((r["schema_name"], r["table_name"]), []),
        )
        for r in trows
    ]
    fks = [
        ForeignKey(
            table=shown(r["schema_name"], r["table_name"]),
            columns=list(r["columns"]),
            ref_table=shown(r["ref_schema"], r["ref_table"]),
            ref_columns=list(r["ref_columns"]),
        )
        for r in frows
    ]
    return Schema(tables=tables, foreign_keys=fks)


def _visible_tables(plpy) -> list:
    """Rows of ``nl2sql.visible_table`` by schema and name; NotIndexedError when none."""
    trows = spi.query(
        plpy,
        "SELECT schema_name, table_name, comment FROM nl2sql.visible_table "
        "ORDER BY schema_name, table_name",
    )
    if not trows:
        raise NotIndexedError(
            "nl2sql: no table that this role may SELECT is indexed; run "
            "SELECT nl2sql.reindex(); (setting 'schemas' lists what it covers) "
            "or GRANT SELECT on the tables to ask about"
        )
    return trows


def _first_schema_per_table(trows, search_path: list[str]) -> dict[str, str]:
    """Table name -> the first schema on ``search_path`` holding a visible table of that name."""
    rank = {s: i for i, s in enumerate(search_path)}
    first_schema: dict[str, str] = {}
    for r in sorted(trows, key=lambda r: rank.get(r["schema_name"], 10**6)):
        if r["schema_name"] in rank:
            first_schema.setdefault(r["table_name"], r["schema_name"])
    return first_schema


def _columns_by_table(crows, n_values: int) -> dict[tuple[str, str], list[Column]]:
    """(schema, table) -> its ``Column``s in row order, at most ``n_values`` sample values each."""
    cols: dict[tuple[str, str], list[Column]] = {}
    for r in crows:
        cols.setdefault((r["schema_name"], r["table_name"]), []).append(
            Column(
                name=r["column_name"],
                data_type=r["data_type"],
                is_primary_key=bool(r["is_primary_key"]),
                comment=r["comment"],
                sample_values=list(r["sample_values"] or [])[:n_values],
                values_allowed=r["values_allowed"] is not False,
                values_complete=r["values_complete"],
            )
        )
    return cols


def relation_names(schema: Schema) -> dict[str, str]:
    """Map the names a candidate may use for each table to the table's prompt name.

    Args:
        schema: the schema of ``load_schema``.

    Returns:
        Lower-cased prompt name and ``schema.table`` → the table's prompt name.
    """
    return {
        n: t.name for t in schema.tables for n in (t.name.lower(), f"{t.schema}.{t.table}".lower())
    }


def known_relations(schema: Schema) -> set[str]:
    """List the names a candidate may use for the schema's tables.

    Args:
        schema: the schema of ``load_schema``.

    Returns:
        Lower-cased names: each table's prompt name and its ``schema.table``.
    """
    return set(relation_names(schema))


def caller_schema(plpy, n_values: int = 3) -> Schema:
    """Load the schema the current role may read, named as its search_path names it.

    Args:
        n_values: most sample values kept per column.

    Returns:
        ``load_schema`` over the session's current search_path.

    Raises:
        NotIndexedError: no table the role may SELECT is indexed.
    """
    path = parse_search_path(
        plpy, spi.query(plpy, "SELECT current_setting('search_path') AS p")[0]["p"]
    )
    return load_schema(plpy, path, n_values)
