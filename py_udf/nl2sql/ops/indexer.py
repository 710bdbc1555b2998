"""Indexing inside the database: schema index, sample values, value index, example pool.

``reindex`` is what ``nl2sql.reindex()`` runs; ``table_states``/``index_table``/
``index_examples`` are the same work in units, which the ``nl2sql-index`` CLI calls one by one
to show progress.

Change detection reads no user data (``table_states``): a table is re-read only when its
catalog state (columns, types, keys, comments, value policy, the indexing settings; SQL
function ``nl2sql._catalog_state``) or its data state (oid, relfilenode and the statistics'
inserted/updated/deleted tuple counters; ``nl2sql._data_state``) differs from what was stored
when it was indexed, unless ``force``.

Values (``_column_values``): every distinct string value of a column up to
``values_per_column``; a column with more is *partially* indexed (``values_complete`` false):
its most frequent values, counted over the whole column, or for a table of more than
``value_sample_rows`` rows (statistics estimate) whose column has more distinct values than the
budget (or no statistics), over a block sample of about ``value_sample_rows`` rows
(``TABLESAMPLE SYSTEM``, fixed seed) after the column's ``pg_stats`` most common values.
New values are embedded once per distinct string (across the columns of the table; a string
already in the value index for another column or table reuses that embedding) in bulk
(``embed(..., bulk=True)``: batches grouped by token length, all cores) and written with one
``INSERT ... SELECT FROM unnest`` per chunk.

Sources: PET-SQL (Li et al. 2024) §3.1 (3 cell values per column in the prompt);
OpenSearch-SQL (Xie et al. 2024) §3.4 (value index over string cells); DAIL-SQL §3.3 and
PET-SQL §3.2 (examples retrieved by masked-question embedding).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from ..core import spi
from ..core.settings import Settings, get_settings
from ..embedding.encode import embed, to_pgvector
from ..retrieval.example_pool import BUILTIN_SOURCE, builtin_pool
from . import citus, ddl_queue
from .value_policy import value_columns

_STRING_TYPES = {"text", "character varying", "character", "varchar", "char", "citext", "name"}
# Distinct strings embedded and written per chunk (bounds memory: 4,096 x 384 floats; the CLI's
# progress bar moves once per chunk).
EMBED_CHUNK = 4096
_COVERED = (
    "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = ANY($1) AND c.relkind IN ('r','p','v','m') "
    "AND NOT c.relispartition AND n.nspname <> 'nl2sql' "
    "AND pg_catalog.has_table_privilege(c.oid, 'SELECT') "
    "AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.objid = c.oid "
    "  AND d.deptype = 'e') "
)


def _covered(plpy) -> str:
    """``_COVERED``, with Citus's shard tables left out when the citus extension is present
    (``citus.NO_SHARDS``; without Citus the SQL names no Citus function)."""
    return _COVERED + (citus.NO_SHARDS if citus.present(plpy) else "")


def plan(plpy, schemas: list[str] | None = None) -> list[tuple[str, str]]:
    """List the tables a reindex covers.

    Ordinary and partitioned tables (not partitions), views and materialized views of
    ``schemas`` that the current role may SELECT; nl2sql's own schema, extension members and,
    with Citus, shard tables are left out (``_covered``).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        schemas: schema names; None or empty uses setting ``schemas``.

    Returns:
        ``(schema, table)`` pairs, sorted.

    Raises:
        ConfigError: a stored setting is invalid.
    """
    if not schemas:
        schemas = list(get_settings(plpy).schemas)
    rows = spi.query(
        plpy,
        "SELECT n.nspname AS s, c.relname AS t " + _covered(plpy) + "ORDER BY 1, 2",
        [schemas],
        ["text[]"],
    )
    return [(r["s"], r["t"]) for r in rows]


def settings_state(st: Settings) -> str:
    """Name the settings whose change re-reads every table, as text for the fingerprint.

    Args:
        st: the settings.

    Returns:
        JSON of ``sample_values``, ``values_per_column``, ``value_max_chars``,
        ``value_sample_rows``.
    """
    return json.dumps(
        [st.sample_values, st.values_per_column, st.value_max_chars, st.value_sample_rows]
    )


def table_states(
    plpy,
    schemas: list[str] | None = None,
    only: tuple[str, str] | None = None,
    st: Settings | None = None,
) -> list[dict]:
    """Read the change-detection state of the covered tables, from the catalog only.

    One query over the tables ``plan`` covers: each table's catalog state
    (``nl2sql._catalog_state`` with ``settings_state``), data state (``nl2sql._data_state``:
    oid, relfilenode, the statistics' tuple counters), its row estimate (``reltuples``, for a
    partitioned table summed over its partitions; None when never analyzed or for a view), and
    the fingerprint and data state stored when it was last indexed. No user data is read.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        schemas: schema names; None or empty uses setting ``schemas``.
        only: ``(schema, table)`` to read the state of that one table (when covered).
        st: the settings; None reads them.

    Returns:
        Dicts with ``schema``, ``table``, ``kind`` (relkind), ``fingerprint``, ``data_state``
        (None when ``track_counts`` is off), ``rows_est`` (float or None),
        ``old_fingerprint``, ``old_data_state`` (None when not indexed), sorted by schema and
        table.

    Raises:
        ConfigError: a stored setting is invalid.
    """
    st = st or get_settings(plpy)
    if not schemas:
        schemas = list(st.schemas)
    extra = "AND n.nspname = $3 AND c.relname = $4 " if only else ""
    rows = spi.query(
        plpy,
        "SELECT n.nspname AS s, c.relname AS t, c.relkind::text AS kind, "
        "pg_catalog.md5(nl2sql._catalog_state(c.oid) || $2) AS fp, "
        "nl2sql._data_state(c.oid) AS ds, "
        "CASE WHEN c.relkind = 'p' THEN (SELECT sum(GREATEST(p.reltuples, 0)) "
        "  FROM pg_catalog.pg_partition_tree(c.oid) x JOIN pg_catalog.pg_class p ON p.oid = x.relid "
        "  WHERE x.isleaf) WHEN c.reltuples >= 0 AND c.relkind IN ('r', 'm') "
        "  THEN c.reltuples END::float8 AS rows_est, "
        "st.fingerprint AS old_fp, st.data_state AS old_ds "
        + _covered(plpy).replace(
            "WHERE",
            "LEFT JOIN nl2sql.schema_table st ON st.schema_name = n.nspname "
            "AND st.table_name = c.relname WHERE",
            1,
        )
        + extra
        + "ORDER BY 1, 2",
        [schemas, settings_state(st)] + (list(only) if only else []),
        ["text[]", "text"] + (["name", "name"] if only else []),
    )
    return [
        {
            "schema": r["s"],
            "table": r["t"],
            "kind": r["kind"],
            "fingerprint": r["fp"],
            "data_state": r["ds"],
            "rows_est": r["rows_est"],
            "old_fingerprint": r["old_fp"],
            "old_data_state": r["old_ds"],
        }
        for r in rows
    ]


def needs_reindex(state: dict, force: bool = False) -> bool:
    """Say whether a table must be re-read (``table_states`` row).

    Args:
        state: one ``table_states`` row.
        force: re-read whatever the state says.

    Returns:
        True when forced, never indexed, its catalog state or data state changed, or the data
        state is unknown (``track_counts`` off).
    """
    return bool(
        force
        or state["old_fingerprint"] is None
        or state["data_state"] is None
        or state["fingerprint"] != state["old_fingerprint"]
        or state["data_state"] != state["old_data_state"]
    )


def _catalog_of(plpy, schema: str, table: str) -> dict:
    rel = plpy.quote_ident(schema) + "." + plpy.quote_ident(table)
    cols = spi.query(
        plpy,
        "SELECT a.attname AS name, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type, "
        "pg_catalog.col_description(a.attrelid, a.attnum) AS comment, a.attnum AS ord, "
        "COALESCE(a.attnum = ANY(i.indkey), false) AS pk "
        "FROM pg_catalog.pg_attribute a "
        "LEFT JOIN pg_catalog.pg_index i ON i.indrelid = a.attrelid AND i.indisprimary "
        "WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum",
        [rel],
        ["text"],
    )
    fks = spi.query(
        plpy,
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
        "WHERE con.conrelid = $1::regclass AND con.contype = 'f' ORDER BY con.conname",
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
    """Distinct string values of one column, most frequent first, and whether that is all.

    Every distinct value (1 to ``value_max_chars`` characters) when there are at most
    ``values_per_column``. Beyond that, partial: the most frequent ``values_per_column``,
    counted over the whole column; or, for a table whose row estimate exceeds
    ``value_sample_rows`` and whose column has (by pg_stats) more distinct values than the budget
    or no statistics, the column's pg_stats most common values followed by the most frequent
    values of a block sample of about ``value_sample_rows`` rows (``TABLESAMPLE SYSTEM``,
    ``REPEATABLE (0)``).

    Returns:
        ``(values, complete)``.
    """
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


def _read_table(plpy, schema: str, table: str, st: Settings, state: dict) -> dict:
    """Catalog entry plus the data-derived parts: sample values per column and distinct string
    cell values per string column (``_column_values``), with their completeness."""
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


def _progress(plpy, on: bool, table: str, done: int) -> None:
    """Tell the nl2sql-index CLI how many values of ``table`` are written (a NOTICE, only in a
    session that set ``nl2sql.progress`` to on)."""
    if on:
        plpy.notice("nl2sql-progress " + json.dumps({"table": table, "values": done}))


def _embed_texts(texts: list[str]) -> list[str]:
    """Bulk embeddings of ``texts`` as pgvector text (runs in the indexer's helper thread)."""
    return [to_pgvector(v) for v in embed(texts, cache=False, bulk=True)]


def _insert_chunk(
    plpy,
    ins,
    schema: str,
    table: str,
    chunk: list[str],
    vecs: list[str],
    by_value: dict[str, list[str]],
) -> None:
    """Insert one chunk of new strings (each into every column that holds it)."""
    c_, v_, e_ = [], [], []
    for text, vec in zip(chunk, vecs):
        for colname in by_value[text]:
            c_.append(colname)
            v_.append(text)
            e_.append(vec)
    spi.execute(plpy, ins, [schema, table, c_, v_, e_])


# The (column, value) pairs of ``_write_values`` as a relation ``u(c, v)``: parameters $3, $4.
_PAIRS_CTE = "WITH u AS MATERIALIZED (SELECT * FROM unnest($3::name[], $4::text[]) AS u(c, v))"
_PAIRS_TYPES = ["name", "name", "name[]", "text[]"]


class _NewValues(NamedTuple):
    """New cell values after copying embeddings already in the value index."""

    reused: int  # rows inserted with an embedding copied from the value index
    by_value: dict[str, list[str]]  # each string still to embed -> the columns holding it


def _delete_gone(plpy, schema: str, table: str, cols: list[str], vals: list[str]) -> int:
    """Delete the table's cell values no longer among the pairs; returns how many."""
    gone = spi.query(
        plpy,
        _PAIRS_CTE + " "
        "DELETE FROM nl2sql.cell_value x WHERE x.schema_name = $1 AND x.table_name = $2 "
        "AND NOT EXISTS (SELECT 1 FROM u WHERE u.c = x.column_name AND u.v = x.value) RETURNING 1",
        [schema, table, cols, vals],
        _PAIRS_TYPES,
    )
    return len(gone)


def _insert_reused(plpy, schema: str, table: str, cols: list[str], vals: list[str]) -> _NewValues:
    """Insert the missing pairs whose string the value index holds already (copying its
    embedding); the others are returned, grouped by string, to be embedded."""
    todo = spi.query(
        plpy,
        _PAIRS_CTE + ", "
        "missing AS MATERIALIZED (SELECT u.c, u.v FROM u WHERE NOT EXISTS (SELECT 1 FROM "
        "  nl2sql.cell_value x WHERE x.schema_name = $1 AND x.table_name = $2 "
        "  AND x.column_name = u.c AND x.value = u.v)), "
        "ins AS (INSERT INTO nl2sql.cell_value (schema_name, table_name, column_name, value, "
        "  embedding) SELECT $1, $2, m.c, m.v, e.embedding FROM missing m CROSS JOIN LATERAL "
        "  (SELECT x.embedding FROM nl2sql.cell_value x WHERE lower(x.value) = lower(m.v) "
        "   AND x.value = m.v LIMIT 1) e ON CONFLICT DO NOTHING RETURNING column_name, value), "
        "rest AS MATERIALIZED (SELECT m.c, m.v FROM missing m WHERE NOT EXISTS "
        "  (SELECT 1 FROM ins WHERE ins.column_name = m.c AND ins.value = m.v)) "
        "SELECT (SELECT count(*) FROM ins) AS n_reused, array_agg(r.c) AS cs, "
        "array_agg(r.v) AS vs FROM rest r",
        [schema, table, cols, vals],
        _PAIRS_TYPES,
    )[0]
    by_value: dict[str, list[str]] = {}
    for c, v in zip(todo["cs"] or [], todo["vs"] or []):
        by_value.setdefault(v, []).append(c)
    return _NewValues(int(todo["n_reused"]), by_value)


def _embed_and_insert(
    plpy, schema: str, table: str, by_value: dict[str, list[str]], progress: bool
) -> float:
    """Embed the new strings ``EMBED_CHUNK`` at a time and insert them; returns the seconds
    spent waiting for embeddings."""
    ins = spi.plan(
        plpy,
        "INSERT INTO nl2sql.cell_value (schema_name, table_name, column_name, value, embedding) "
        "SELECT $1, $2, c, v, e::vector FROM unnest($3::name[], $4::text[], $5::text[]) AS u(c, v, e) "
        "ON CONFLICT DO NOTHING",
        ["name", "name", "name[]", "text[]", "text[]"],
    )
    strings = list(by_value)
    chunks = [strings[i : i + EMBED_CHUNK] for i in range(0, len(strings), EMBED_CHUNK)]
    embed_s, done = 0.0, 0
    # the next chunk is embedded in a thread (ONNX Runtime releases the GIL) while this one is
    # formatted and written: only this thread calls plpy
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nl2sql-index") as pool:
        pending = pool.submit(_embed_texts, chunks[0]) if chunks else None
        for k, chunk in enumerate(chunks):
            t0 = time.perf_counter()
            vecs = pending.result()
            embed_s += time.perf_counter() - t0
            pending = pool.submit(_embed_texts, chunks[k + 1]) if k + 1 < len(chunks) else None
            _insert_chunk(plpy, ins, schema, table, chunk, vecs, by_value)
            done += len(chunk)
            _progress(plpy, progress, f"{schema}.{table}", done)
    return embed_s


def _write_values(
    plpy, schema: str, table: str, pairs: list[tuple[str, str]], progress: bool
) -> dict:
    """Make the table's rows of ``nl2sql.cell_value`` equal ``pairs`` (column, value).

    Rows no longer among the pairs are deleted (``_delete_gone``); rows already there keep
    their embedding; a new row whose string is in the value index already (any column, any
    table) copies that embedding (``_insert_reused``); the remaining new strings are embedded
    once each (``embed``, bulk) and inserted ``EMBED_CHUNK`` strings at a time with one
    ``INSERT ... SELECT FROM unnest`` (``_embed_and_insert``).

    Returns:
        ``{"values_embedded", "values_reused", "values_deleted"}`` (counts) and
        ``embed_seconds`` (time spent waiting for embeddings).
    """
    cols = [p[0] for p in pairs]
    vals = [p[1] for p in pairs]
    n_gone = _delete_gone(plpy, schema, table, cols, vals)
    new = _insert_reused(plpy, schema, table, cols, vals)
    embed_s = _embed_and_insert(plpy, schema, table, new.by_value, progress)
    return {
        "values_embedded": len(new.by_value),
        "values_reused": new.reused,
        "values_deleted": n_gone,
        "embed_seconds": round(embed_s, 3),
    }


def index_table(
    plpy, schema: str, table: str, force: bool = False, state: dict | None = None
) -> dict:
    """(Re)index one table, as ``write_table`` does, rewriting it when DDL queued it.

    A table that DDL queued (``ddl_queue``: created, altered, renamed) is rewritten as with
    ``force`` (its column embeddings name the table and a rename dropped its cell values); its
    queue rows up to that point are removed afterwards.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        schema: the table's schema name.
        table: the table's name.
        force: rewrite even when the state is unchanged.
        state: the table's ``table_states`` row when the caller has it (else it is read).

    Returns:
        ``write_table``'s result with ``queued`` (DDL queued it).

    Raises:
        ConfigError: a stored setting is invalid.
        EmbeddingError: the embedding model is missing.
        plpy.SPIError: the table cannot be read (e.g. dropped meanwhile).
    """
    mark = ddl_queue.table_mark(plpy, schema, table)
    out = write_table(plpy, schema, table, force or mark is not None, state)
    out["queued"] = mark is not None
    if mark is not None:
        ddl_queue.mark_done(plpy, schema, table, mark)
    return out


def _with_shard_state(plpy, schema: str, table: str, state: dict) -> dict:
    """For a Citus distributed or reference table, ``state`` with its data state and row
    estimate taken from its shards' statistics (``citus.shard_stats``: the coordinator's own
    counters stay zero for such a table); ``state`` unchanged without Citus or for any other
    table."""
    if not citus.distributed(plpy, schema, table, citus.present(plpy)):
        return state
    stats = citus.shard_stats(plpy, schema, table)
    return dict(
        state,
        data_state=stats["signature"],
        rows_est=float(stats["n_rows"]),
        shard_signature=stats["signature"],
    )


def write_table(
    plpy, schema: str, table: str, force: bool = False, state: dict | None = None
) -> dict:
    """(Re)index one table: catalog rows, sample values, string cell values, embeddings.

    Writes ``nl2sql.schema_table``, ``schema_column`` (with column embeddings of
    ``table column words: comment``, ``values_indexed`` and ``values_complete``),
    ``cell_value`` (distinct string values with embeddings, ``_write_values``; none for
    columns the value policy withholds) and ``schema_fk``. Incremental: when the table's state
    (``table_states``: catalog and statistics, no user data) is what it was when it was indexed
    (and not ``force``) nothing is read or written.

    Source: PET-SQL (Li et al. 2024) §3.1, cell values per column; OpenSearch-SQL (Xie et al.
    2024) §3.4, value index over string cells.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        schema: the table's schema name.
        table: the table's name.
        force: rewrite even when the state is unchanged.
        state: the table's ``table_states`` row when the caller has it (else it is read).

    Returns:
        ``{"table": "schema.table", "skipped": True}`` when unchanged; else ``table``,
        ``skipped`` (False), ``columns``, ``values``, ``values_embedded``, ``values_reused``,
        ``columns_partial``, ``fks``, ``rows`` (the statistics' row estimate, None for a view
        or a table never analyzed), ``seconds`` and ``embed_seconds`` (of it, embedding).

    Raises:
        ConfigError: a stored setting is invalid.
        EmbeddingError: the embedding model is missing.
        plpy.SPIError: the table cannot be read (e.g. dropped meanwhile).
    """
    st = get_settings(plpy)
    if state is None:
        state = _state_of(plpy, schema, table, st)
    state = _with_shard_state(plpy, schema, table, state)
    if not needs_reindex(state, force):
        return {"table": f"{schema}.{table}", "skipped": True}
    t0 = time.perf_counter()
    cat = _read_table(plpy, schema, table, st, state)
    progress = (
        spi.query(plpy, "SELECT current_setting('nl2sql.progress', true) AS p")[0]["p"] == "on"
    )
    rows_est = None if state["rows_est"] is None else int(state["rows_est"])
    _write_table_row(plpy, schema, table, cat["comment"], rows_est, state)
    spi.query(
        plpy,
        "DELETE FROM nl2sql.schema_column WHERE schema_name = $1 AND table_name = $2",
        [schema, table],
        ["name", "name"],
    )
    spi.query(
        plpy,
        "DELETE FROM nl2sql.schema_fk WHERE schema_name = $1 AND table_name = $2",
        [schema, table],
        ["name", "name"],
    )
    _write_columns(plpy, schema, table, cat["columns"])
    pairs = [(c["name"], v) for c in cat["columns"] for v in c["values"]]
    wrote = _write_values(plpy, schema, table, pairs, progress)
    _write_fks(plpy, schema, table, cat["fks"])
    return {
        "table": f"{schema}.{table}",
        "skipped": False,
        "columns": len(cat["columns"]),
        "values": len(pairs),
        "values_embedded": wrote["values_embedded"],
        "values_reused": wrote["values_reused"],
        "embed_seconds": wrote["embed_seconds"],
        "columns_partial": sum(1 for c in cat["columns"] if c["complete"] is False),
        "fks": len(cat["fks"]),
        "rows": rows_est,
        "seconds": round(time.perf_counter() - t0, 3),
    }


def _state_of(plpy, schema: str, table: str, st: Settings) -> dict:
    """The table's ``table_states`` row (covered schemas first, then its own schema); an
    error when this role may not SELECT it or it is no table, view or materialized view."""
    found = table_states(plpy, None, (schema, table), st) or table_states(
        plpy, [schema], (schema, table), st
    )
    if not found:
        plpy.error(
            f"nl2sql: {schema}.{table} is not a table, view or materialized view "
            f"this role may SELECT",
            hint="see nl2sql._reindex_plan()",
        )
    return found[0]


def _write_table_row(
    plpy, schema: str, table: str, comment: str | None, rows_est: int | None, state: dict
) -> None:
    """Insert or update the table's ``nl2sql.schema_table`` row (its states as indexed now)."""
    spi.query(
        plpy,
        "INSERT INTO nl2sql.schema_table (schema_name, table_name, comment, n_rows, "
        "fingerprint, data_state, indexed_at, relid, shard_signature) "
        "VALUES ($1, $2, $3, $4, $5, $6, now(), pg_catalog.to_regclass("
        "pg_catalog.quote_ident($1) || '.' || pg_catalog.quote_ident($2)), $7) "
        "ON CONFLICT (schema_name, table_name) DO UPDATE SET comment = EXCLUDED.comment, "
        "n_rows = EXCLUDED.n_rows, fingerprint = EXCLUDED.fingerprint, "
        "data_state = EXCLUDED.data_state, indexed_at = EXCLUDED.indexed_at, "
        "relid = EXCLUDED.relid, shard_signature = EXCLUDED.shard_signature",
        [
            schema,
            table,
            comment,
            rows_est,
            state["fingerprint"],
            state["data_state"],
            state.get("shard_signature"),
        ],
        ["name", "name", "text", "int8", "text", "text", "text"],
    )


def _column_text(table: str, c: dict) -> str:
    """What a column's embedding is of: ``table column words: comment``."""
    return f"{table} {c['name'].replace('_', ' ')}" + (f": {c['comment']}" if c["comment"] else "")


def _write_columns(plpy, schema: str, table: str, columns: list[dict]) -> None:
    """Insert the table's ``nl2sql.schema_column`` rows, each with its column embedding,
    samples and value-index counts (``_read_table``'s columns)."""
    col_vecs = embed([_column_text(table, c) for c in columns], cache=False)
    rows = [
        {
            "name": c["name"],
            "ord": c["ord"],
            "type": c["type"],
            "pk": c["pk"],
            "comment": c["comment"],
            "samples": c["samples"],
            "embedding": to_pgvector(v),
            "n_values": len(c["values"]) if c["complete"] is not None else None,
            "complete": c["complete"],
        }
        for c, v in zip(columns, col_vecs)
    ]
    spi.query(
        plpy,
        "INSERT INTO nl2sql.schema_column (schema_name, table_name, column_name, ordinal, "
        "data_type, is_primary_key, comment, sample_values, embedding, values_indexed, "
        "values_complete) SELECT $1, $2, x.name, x.ord, x.type, x.pk, x.comment, x.samples, "
        "x.embedding::vector, x.n_values, x.complete "
        "FROM json_to_recordset($3::json) AS x(name name, ord int, type text, pk bool, "
        "comment text, samples text[], embedding text, n_values int, complete bool)",
        [schema, table, json.dumps(rows)],
        ["name", "name", "text"],
    )


def _write_fks(plpy, schema: str, table: str, fks: list[dict]) -> None:
    """Insert the table's ``nl2sql.schema_fk`` rows (``_catalog_of``'s foreign keys)."""
    spi.query(
        plpy,
        "INSERT INTO nl2sql.schema_fk (schema_name, table_name, constraint_name, columns, "
        "ref_schema, ref_table, ref_columns) SELECT $1, $2, x.name, x.cols, x.ref_schema, "
        "x.ref_table, x.ref_cols FROM json_to_recordset($3::json) AS x(name name, cols name[], "
        "ref_schema name, ref_table name, ref_cols name[])",
        [schema, table, json.dumps(fks)],
        ["name", "name", "text"],
    )


def drop_missing(plpy, keep: list[tuple[str, str]], schemas: list[str] | None) -> int:
    """Remove index rows of tables in the covered schemas that are no longer covered.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        keep: the ``(schema, table)`` pairs covered now (``plan``).
        schemas: the covered schema names; None or empty uses setting ``schemas``.

    Returns:
        How many tables were dropped from the index.
    """
    if not schemas:
        schemas = list(get_settings(plpy).schemas)
    ddl_queue.clear_uncovered(plpy, schemas, keep)
    keep_names = [f"{s}.{t}" for s, t in keep]
    res = spi.query(
        plpy,
        "DELETE FROM nl2sql.schema_table WHERE schema_name = ANY($2) "
        "AND NOT (schema_name || '.' || table_name = ANY($1)) RETURNING 1",
        [keep_names, schemas],
        ["text[]", "text[]"],
    )
    return len(res)


def load_builtin_examples(plpy) -> int:
    """Insert the built-in example pool (source ``builtin``) where its rows are missing.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        How many rows were inserted (0 when all were there).
    """
    ins = spi.plan(
        plpy,
        "INSERT INTO nl2sql.example (db_id, question, sql, masked_question, sql_skeleton, "
        "schema, source) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7) ON CONFLICT DO NOTHING RETURNING id",
        ["text", "text", "text", "text", "text", "text", "text"],
    )
    n = 0
    for e in builtin_pool():
        n += len(
            spi.execute(
                plpy,
                ins,
                [
                    e.db_id,
                    e.question,
                    e.sql,
                    e.masked_question,
                    e.sql_skeleton,
                    json.dumps(e.schema),
                    BUILTIN_SOURCE,
                ],
            )
        )
    return n


def index_examples(plpy) -> dict:
    """Load the built-in pool if needed and embed every example without an embedding.

    The embedding is of the masked question (all-MiniLM-L6-v2, 384 floats).

    Source: DAIL-SQL (Gao et al. 2023) §3.3 and PET-SQL (Li et al. 2024) §3.2, examples
    retrieved by masked-question embedding.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        ``{"examples_added", "examples_embedded", "examples_total"}`` (counts).

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    added = load_builtin_examples(plpy)
    rows = spi.query(plpy, "SELECT id, masked_question FROM nl2sql.example WHERE embedding IS NULL")
    if rows:
        vecs = embed([r["masked_question"] for r in rows], cache=False)
        spi.query(
            plpy,
            "UPDATE nl2sql.example SET embedding = e::vector "
            "FROM unnest($1::int8[], $2::text[]) AS u(i, e) WHERE id = u.i",
            [[r["id"] for r in rows], [to_pgvector(v) for v in vecs]],
            ["int8[]", "text[]"],
        )
    total = spi.query(plpy, "SELECT count(*) AS n FROM nl2sql.example")[0]["n"]
    return {"examples_added": added, "examples_embedded": len(rows), "examples_total": total}


def sum_table_counts(results) -> dict:
    """Add up ``index_table`` results.

    Args:
        results: an iterable of ``index_table`` result dicts.

    Returns:
        ``{"tables_indexed", "tables_skipped", "tables_queued", "columns", "columns_partial", "values",
        "values_embedded", "values_reused", "fks"}`` (counts; skipped tables count only in
        ``tables_skipped``) and ``embed_seconds`` (summed time spent embedding).
    """
    keys = (
        "columns",
        "columns_partial",
        "values",
        "values_embedded",
        "values_reused",
        "fks",
        "embed_seconds",
    )
    out = {"tables_indexed": 0, "tables_skipped": 0, "tables_queued": 0, **dict.fromkeys(keys, 0)}
    for r in results:
        out["tables_queued"] += bool(r.get("queued"))
        if r["skipped"]:
            out["tables_skipped"] += 1
            continue
        out["tables_indexed"] += 1
        for k in keys:
            out[k] += r.get(k, 0)
    return out


# The value index's vector index (sql/incremental/001-tables.sql). Inserting into an HNSW graph
# one row at a time cost ~2.5 ms a row (400 rows/s at 10,000 rows, slower as it grows) against
# 3,600-6,600 rows/s for building it over the rows at once (pgvector 0.8, this 2-core machine):
# a reindex that starts from an (almost) empty value index drops it and builds it at the end.
VECTOR_INDEX = "cell_value_embedding_hnsw"
VECTOR_INDEX_DDL = (
    "CREATE INDEX IF NOT EXISTS cell_value_embedding_hnsw ON nl2sql.cell_value "
    "USING hnsw (embedding vector_cosine_ops)"
)
BULK_BELOW_ROWS = 1000


def begin_bulk(plpy) -> bool:
    """Drop the value index's HNSW index when the value index is (almost) empty.

    With fewer than ``BULK_BELOW_ROWS`` values indexed, a reindex that writes values is a first
    (or full) index: building the HNSW graph once at the end (``ensure_vector_index``) is 10x
    faster than inserting into it row by row. Vector lookups still work meanwhile (exact
    scans). Skipped (False) for a role that may not drop it.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        True when the index was dropped (``ensure_vector_index`` builds it again).
    """
    n = spi.query(
        plpy,
        "SELECT count(*) AS n FROM (SELECT 1 FROM nl2sql.cell_value LIMIT $1) x",
        [BULK_BELOW_ROWS],
        ["int4"],
    )[0]["n"]
    if n >= BULK_BELOW_ROWS:
        return False
    try:
        with plpy.subtransaction():
            spi.run(plpy, f"DROP INDEX IF EXISTS nl2sql.{VECTOR_INDEX}")
        return True
    except plpy.SPIError:
        return False


def ensure_vector_index(plpy) -> bool:
    """Build the value index's HNSW index when it is missing (after ``begin_bulk``).

    The build uses the server's ``maintenance_work_mem`` (pgvector builds in memory while the
    graph fits, far faster than on disk) and its parallel maintenance workers.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        True when it was built now; False when it existed or the role may not build it.
    """
    if spi.query(plpy, f"SELECT to_regclass('nl2sql.{VECTOR_INDEX}') IS NOT NULL AS ok")[0]["ok"]:
        return False
    try:
        with plpy.subtransaction():
            spi.run(plpy, VECTOR_INDEX_DDL)
        return True
    except plpy.SPIError:
        return False


# The index tables read by the pipeline's lookups, analyzed after a reindex that changed them.
INDEX_TABLES = (
    "schema_table",
    "schema_column",
    "schema_fk",
    "cell_value",
    "cell_value_text",
    "example",
    "example_relation",
)


def tidy_indexes(plpy) -> dict:
    """Tidy the index after a reindex that changed it: GIN pending list and statistics.

    Folds the trigram index's pending list into the index (``gin_clean_pending_list``) and
    ANALYZEs the index tables (``INDEX_TABLES``). GIN's fast update leaves newly inserted
    values in a pending list that every trigram lookup reads in full until autovacuum cleans
    it: on the superhero database right after a reindex, 15 phrases took 25 ms instead of
    1.6 ms. Fresh statistics let the lookups' kept plans use the indexes. Both need ownership
    of the tables; for a role without it they are skipped (with PostgreSQL's warning for
    ANALYZE), not an error.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        ``{"trigram_pending_pages", "tables_analyzed"}``: pages folded in (None when not
        permitted) and the number of tables ANALYZE was run on (also when it skipped them).
    """
    pages = None
    try:
        with plpy.subtransaction():
            pages = spi.query(
                plpy,
                "SELECT pg_catalog.gin_clean_pending_list("
                "'nl2sql.cell_value_text_trgm'::regclass) AS n",
            )[0]["n"]
    except plpy.SPIError:
        pass
    for t in INDEX_TABLES:
        spi.run(plpy, f"ANALYZE nl2sql.{t}")
    return {"trigram_pending_pages": pages, "tables_analyzed": len(INDEX_TABLES)}


def changed(counts: dict) -> bool:
    """Say whether a reindex's counts show a change of the index.

    Args:
        counts: the reindex's counts (``reindex``'s dict, before tidying).

    Returns:
        True when tables were indexed or dropped, or examples added or embedded.
    """
    return any(
        counts.get(k)
        for k in ("tables_indexed", "tables_dropped", "examples_added", "examples_embedded")
    )


def reindex(plpy, schemas: list[str] | None = None, force: bool = False) -> dict:
    """Index the catalog of ``schemas``, their cell values and the example pool.

    What ``nl2sql.reindex()`` runs: ``table_states`` (one catalog query), ``begin_bulk`` when a
    table changed, ``index_table`` for each table whose state changed (``needs_reindex``), then
    ``drop_missing``, ``index_examples``, ``ensure_vector_index`` and, when anything changed,
    ``tidy_indexes``. Incremental unless
    ``force``: a reindex with nothing changed reads no user data.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        schemas: schema names; None or empty uses setting ``schemas``.
        force: rewrite every table even when its fingerprint is unchanged.

    Returns:
        Counts: ``tables_indexed``, ``tables_skipped``, ``tables_dropped``, ``columns``,
        ``columns_partial``, ``values``, ``values_embedded``, ``values_reused``, ``fks``,
        ``examples_added``, ``examples_embedded``, ``examples_total`` (and
        ``trigram_pending_pages``, ``tables_analyzed`` when tidied), ``vector_index_built``,
        ``seconds``.

    Raises:
        ConfigError: a stored setting is invalid.
        EmbeddingError: the embedding model is missing.
    """
    t0 = time.perf_counter()
    st = get_settings(plpy)
    states = table_states(plpy, schemas, st=st)
    bulk = any(needs_reindex(x, force) for x in states) and begin_bulk(plpy)
    out = sum_table_counts(
        index_table(plpy, x["schema"], x["table"], force=force, state=x) for x in states
    )
    out["tables_dropped"] = drop_missing(plpy, [(x["schema"], x["table"]) for x in states], schemas)
    out.update(index_examples(plpy))
    out["vector_index_built"] = ensure_vector_index(plpy) if bulk else False
    if changed(out):
        out.update(tidy_indexes(plpy))
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out
