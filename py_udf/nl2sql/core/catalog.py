"""Reading the schema index (``nl2sql.schema_*``, through the per-role views) back into a
``Schema`` for prompting, and the row check that keeps an opted-in row-security table's values
to the rows the role's policy shows. Main thread only."""

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
    schema = Schema(tables=tables, foreign_keys=fks)
    schema.row_check = RowCheck.for_schema(plpy, schema)
    if schema.row_check is not None:
        schema.row_check.filter_samples(schema)
    return schema


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


class RowCheck:
    """Keep the indexed values of tables whose row-level security applies to the caller to those
    its policy shows: a value is shown only when the role itself can read a row holding it.

    The index is built by the indexer, which reads every row; a table's values reach models only
    when the DBA opted them in (``set_value_policy``). For such a table this check runs, as the
    calling role (so the table's policies apply), ``EXISTS`` per value at question time, cached
    for the statement: one query per (table, column) asked about, each using the column's index
    where one exists (docs/safety.md "Row-level security").
    """

    def __init__(self, plpy, tables: dict[tuple[str, str], dict[str, str]]):
        """
        Args:
            plpy: the PL/Python module of the calling backend.
            tables: (schema, table) of the tables checked → their columns' ``data_type`` by name.
        """
        self.plpy = plpy
        self.tables = tables
        self._seen: dict[tuple[str, str, str, str], bool] = {}
        self.checked = 0  # values looked up (cache misses)
        self.hidden = 0  # values the role's policy hid

    @classmethod
    def for_schema(cls, plpy, schema: Schema) -> RowCheck | None:
        """Build the check for the tables of ``schema`` whose row security is active for the
        caller (``row_security_active``: not a superuser, a BYPASSRLS role or the owner of a
        table without FORCE) and some of whose columns' values may be sent.

        Args:
            plpy: the PL/Python module of the calling backend.
            schema: ``load_schema``'s tables (what the role may read).

        Returns:
            The check, or None when no such table exists (nothing to do).
        """
        rows = spi.query(
            plpy,
            "SELECT n.nspname::text AS s, c.relname::text AS t FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relrowsecurity AND pg_catalog.row_security_active(c.oid)",
        )
        active = {(r["s"], r["t"]) for r in rows}
        tables = {
            (t.schema, t.table): {c.name: c.data_type for c in t.columns}
            for t in schema.tables
            if (t.schema, t.table) in active and any(c.values_allowed for c in t.columns)
        }
        return cls(plpy, tables) if tables else None

    def applies(self, schema_name: str, table: str) -> bool:
        """Say whether the table's values are checked row by row for this role.

        Args:
            schema_name, table: the table's names.

        Returns:
            True when its row security applies to the role and some values may be sent.
        """
        return (schema_name, table) in self.tables

    def visible(self, schema_name: str, table: str, column: str, values: list[str]) -> list[str]:
        """Keep the values some row the role may read holds.

        Args:
            schema_name, table, column: the column's names.
            values: candidate values, as text.

        Returns:
            The values the role can see, in order (all of them when the table is not checked;
            none when the table cannot be read now).
        """
        if not self.applies(schema_name, table) or not values:
            return list(values)
        key = (schema_name, table, column)
        ask = sorted({v for v in values if (*key, v) not in self._seen})
        if ask:
            found = self._lookup(schema_name, table, column, ask)
            for v in ask:
                self._seen[(*key, v)] = v in found
            self.checked += len(ask)
        keep = [v for v in values if self._seen[(*key, v)]]
        self.hidden += len(values) - len(keep)
        return keep

    def _lookup(self, schema_name: str, table: str, column: str, values: list[str]) -> set[str]:
        """The values of ``values`` some row visible to the caller holds in the column."""
        q = self.plpy.quote_ident
        data_type = self.tables[(schema_name, table)].get(column, "text")
        rel, col = f"{q(schema_name)}.{q(table)}", q(column)
        # the array is cast once, outside the row-security barrier: the comparison left inside is
        # the type's (leakproof) equality, so an index on the column serves it
        typed = f"$1::text[]::{data_type}[]"
        for arr, cond in ((typed, f"{col} = u.v"), ("$1::text[]", f"{col}::text = u.v")):
            sql = (
                f"SELECT u.v::text AS v FROM pg_catalog.unnest({arr}) AS u(v) "
                f"WHERE EXISTS (SELECT 1 FROM {rel} WHERE {cond})"
            )
            try:  # as text when a value does not cast to the column's type
                with self.plpy.subtransaction():
                    return {r["v"] for r in spi.run(self.plpy, sql, [values], ["text[]"])}
            except self.plpy.SPIError:
                continue
        return set()  # the role cannot read the table now: show none of its values

    def _scan_samples(self, t: Table) -> None:
        """Check every sample value of one table in one pass over the rows the role reads."""
        q = self.plpy.quote_ident
        cols = [c for c in t.columns if c.sample_values]
        todo = [
            c
            for c in cols
            if any((t.schema, t.table, c.name, v) not in self._seen for v in c.sample_values)
        ]
        if not todo:
            return
        pairs = ", ".join(f"({i}, {q(c.name)}::text)" for i, c in enumerate(todo))
        where = " OR ".join(f"(x.i = {i} AND x.v = ANY(${i + 1}))" for i in range(len(todo)))
        sql = (
            f"SELECT DISTINCT x.i, x.v FROM {q(t.schema)}.{q(t.table)} AS r, "
            f"LATERAL (VALUES {pairs}) AS x(i, v) WHERE {where}"
        )
        try:
            with self.plpy.subtransaction():
                rows = spi.run(
                    self.plpy, sql, [c.sample_values for c in todo], ["text[]"] * len(todo)
                )
            found = {(r["i"], r["v"]) for r in rows}
        except self.plpy.SPIError:
            found = set()  # the role cannot read the table now: show none of its values
        for i, c in enumerate(todo):
            for v in c.sample_values:
                self._seen[(t.schema, t.table, c.name, v)] = (i, v) in found
            self.checked += len(c.sample_values)

    def filter_samples(self, schema: Schema) -> None:
        """Drop the sample values of checked tables that the role's rows do not hold.

        Args:
            schema: ``load_schema``'s result, changed in place.
        """
        for t in schema.tables:
            if not self.applies(t.schema, t.table):
                continue
            self._scan_samples(t)
            for c in t.columns:
                if c.sample_values:
                    c.sample_values = self.visible(t.schema, t.table, c.name, c.sample_values)
