"""Reading one table for the index: catalog entry, sample values, distinct string values.
Source: PET-SQL (Li et al. 2024) §3.1; OpenSearch-SQL (Xie et al. 2024) §3.4."""

from __future__ import annotations

from ..core import spi
from ..core.settings import Settings
from .value_policy import value_columns

_STRING_TYPES = {"text", "character varying", "character", "varchar", "char", "citext", "name"}


_COLUMNS = (
    "SELECT a.attname AS name, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type, "
    "pg_catalog.col_description(a.attrelid, a.attnum) AS comment, a.attnum AS ord, "
    "COALESCE(a.attnum = ANY(i.indkey), false) AS pk "
    "FROM pg_catalog.pg_attribute a "
    "LEFT JOIN pg_catalog.pg_index i ON i.indrelid = a.attrelid AND i.indisprimary "
    "WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped "
    "ORDER BY a.attnum"
)

_FOREIGN_KEYS = (
    "SELECT con.conname AS name, "
    "ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(n, o) "
    "      JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n "
    "      ORDER BY k.o)::name[] AS cols, "
    "rn.nspname AS ref_schema, rc.relname AS ref_table, "
    "ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY k(n, o) "
    "      JOIN pg_catalog.pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n "
    "      ORDER BY k.o)::name[] AS ref_cols "
    "FROM pg_catalog.pg_constraint con "
    "JOIN pg_catalog.pg_class rc ON rc.oid = con.confrelid "
    "JOIN pg_catalog.pg_namespace rn ON rn.oid = rc.relnamespace "
    "WHERE con.conrelid = $1::regclass AND con.contype = 'f' ORDER BY con.conname"
)


def _catalog_of(plpy, schema: str, table: str) -> dict:
    rel = plpy.quote_ident(schema) + "." + plpy.quote_ident(table)
    cols = spi.query(
        plpy,
        _COLUMNS,
        [rel],
        ["text"],
    )
    fks = spi.query(
        plpy,
        _FOREIGN_KEYS,
        [rel],
        ["text"],
    )
    comment = spi.query(
        plpy, "SELECT pg_catalog.obj_description($1::regclass, 'pg_class') AS c", [rel], ["text"]
    )[0]["c"]
    return {
        "columns": [dict(c) for c in cols],
        "fks": [
            {
                "name": f["name"],
                "cols": list(f["cols"]),
                "ref_schema": f["ref_schema"],
                "ref_table": f["ref_table"],
                "ref_cols": list(f["ref_cols"]),
            }
            for f in fks
        ],
        "comment": comment,
    }


def _n_distinct(plpy, schema: str, table: str, column: str, rows_est: float) -> float | None:
    """The statistics' estimate of a column's distinct values (pg_stats), None without one."""
    r = spi.query(
        plpy,
        "SELECT n_distinct AS d FROM pg_catalog.pg_stats WHERE schemaname = $1 "
        "AND tablename = $2 AND attname = $3 ORDER BY inherited DESC LIMIT 1",
        [schema, table, column],
        ["name", "name", "name"],
    )
    if not r or r[0]["d"] is None:
        return None
    d = float(r[0]["d"])
    return d if d >= 0 else -d * rows_est


def _most_common(plpy, schema: str, table: str, column: str, max_chars: int) -> list[str]:
    """The column's most common values from pg_stats (most frequent first), as text."""
    r = spi.query(
        plpy,
        "SELECT v FROM pg_catalog.pg_stats s, "
        "unnest(s.most_common_vals::text::text[]) WITH ORDINALITY AS u(v, o) "
        "WHERE s.schemaname = $1 AND s.tablename = $2 AND s.attname = $3 "
        "AND length(v) BETWEEN 1 AND $4 ORDER BY s.inherited DESC, o",
        [schema, table, column, max_chars],
        ["name", "name", "name", "int4"],
    )
    return list(dict.fromkeys(x["v"] for x in r))


def _column_values(
    plpy,
    rel: str,
    c: dict,
    schema: str,
    table: str,
    kind: str,
    rows_est: float | None,
    st: Settings,
) -> tuple[list[str], bool]:
    """``(values, complete)``: one column's distinct string values, most frequent first, all
    of them or a partial set (counted over the column, or over a block sample of a big table
    after its pg_stats most common values: docs/internals/ops.md, "Cell values")."""
    per_col, max_chars, budget = st.values_per_column, st.value_max_chars, st.value_sample_rows
    col = plpy.quote_ident(c["name"])
    where = f"WHERE {col} IS NOT NULL AND length({col}::text) BETWEEN 1 AND {max_chars}"
    big = kind in ("r", "m", "p") and rows_est is not None and rows_est > budget
    if big:
        nd = _n_distinct(plpy, schema, table, c["name"], rows_est)
        big = nd is None or nd > per_col
    if not big:
        rows = spi.run(
            plpy,
            f"SELECT {col}::text AS v FROM {rel} {where} "
            f"GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT {per_col + 1}",
        )
        vals = [r["v"] for r in rows]
        return vals[:per_col], len(vals) <= per_col
    pct = min(100.0, 100.0 * budget / max(rows_est, 1.0))
    rows = spi.run(
        plpy,
        f"SELECT {col}::text AS v FROM {rel} TABLESAMPLE SYSTEM ({pct:.6f}) "
        f"REPEATABLE (0) {where} GROUP BY 1 ORDER BY count(*) DESC, 1 "
        f"LIMIT {per_col}",
    )
    vals = list(
        dict.fromkeys(
            _most_common(plpy, schema, table, c["name"], max_chars) + [r["v"] for r in rows]
        )
    )
    return vals[:per_col], False


def read_table(plpy, schema: str, table: str, st: Settings, state: dict) -> dict:
    """Read one table's catalog entry, sample values and string cell values.

    Args:
        schema: the table's schema name.
        table: the table's name.
        st: the settings (``sample_values``, ``values_per_column``, ...).
        state: the table's ``table_states`` row (``kind``, ``rows_est``).

    Returns:
        ``{"columns", "fks", "comment"}``; each column dict has ``name``, ``type``,
        ``comment``, ``ord``, ``pk``, ``samples``, ``values`` and ``complete`` (None for a
        column without a value index).
    """
    n_samples = st.sample_values
    cat = _catalog_of(plpy, schema, table)
    rel = plpy.quote_ident(schema) + "." + plpy.quote_ident(table)
    allowed = value_columns(plpy, schema, table)  # RLS tables and opted-out columns: no values
    for c in cat["columns"]:
        col = plpy.quote_ident(c["name"])
        c["values"], c["complete"] = [], None
        if not allowed.get(c["name"], False):
            c["samples"] = []
            continue
        if c["type"].split("(")[0].strip() in _STRING_TYPES and st.values_per_column > 0:
            c["values"], c["complete"] = _column_values(
                plpy, rel, c, schema, table, state["kind"], state["rows_est"], st
            )
            c["samples"] = c["values"][:n_samples]
            if len(c["samples"]) >= n_samples:
                continue
        c["samples"] = (
            [
                r["v"]
                for r in spi.run(
                    plpy,
                    f"SELECT {col}::text AS v FROM (SELECT {col} FROM {rel} WHERE {col} IS NOT NULL "
                    f"LIMIT 10000) s GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT {n_samples}",
                )
            ]
            if n_samples > 0
            else []
        )
    return cat
