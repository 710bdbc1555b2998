"""Indexing inside the database: schema index, sample values, value index, example pool.

``reindex`` is what ``nl2sql.reindex()`` runs; ``plan``/``index_table``/``index_examples`` are
the same work in units, which the ``nl2sql-index`` CLI calls one by one to show progress.
Incremental: a table is rewritten only when its fingerprint (columns, types, keys, comments,
row count, sample values, distinct string values) changed, unless ``force``; values that were
already embedded keep their embeddings.

Sources: PET-SQL (Li et al. 2024) §3.1 (3 cell values per column in the prompt);
OpenSearch-SQL (Xie et al. 2024) §3.4 (value index over string cells); DAIL-SQL §3.3 and
PET-SQL §3.2 (examples retrieved by masked-question embedding).
"""
from __future__ import annotations

import hashlib
import json

from . import citus, ddl_queue, spi
from .embed import embed, to_pgvector
from .examples import BUILTIN_SOURCE, builtin_pool
from .settings import Settings, get_settings
from .value_policy import value_columns

_STRING_TYPES = {"text", "character varying", "character", "varchar", "char", "citext", "name"}


def plan(plpy, schemas: list[str] | None = None) -> list[tuple[str, str]]:
    """List the tables a reindex covers.

    Ordinary and partitioned tables (not partitions), views and materialized views of
    ``schemas`` that the current role may SELECT; nl2sql's own schema, extension members and,
    with Citus, shard tables are left out (``citus.plan_query``).

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
    rows = spi.query(plpy, citus.plan_query(citus.present(plpy)), [schemas], ["text[]"])
    return [(r["s"], r["t"]) for r in rows]


def _catalog_of(plpy, schema: str, table: str) -> dict:
    rel = plpy.quote_ident(schema) + "." + plpy.quote_ident(table)
    cols = spi.query(
        plpy, "SELECT a.attname AS name, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type, "
        "pg_catalog.col_description(a.attrelid, a.attnum) AS comment, a.attnum AS ord, "
        "COALESCE(a.attnum = ANY(i.indkey), false) AS pk "
        "FROM pg_catalog.pg_attribute a "
        "LEFT JOIN pg_catalog.pg_index i ON i.indrelid = a.attrelid AND i.indisprimary "
        "WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum", [rel], ["text"])
    fks = spi.query(
        plpy, "SELECT con.conname AS name, "
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
        [rel], ["text"])
    comment = spi.query(plpy, "SELECT pg_catalog.obj_description($1::regclass, 'pg_class') AS c",
                        [rel], ["text"])[0]["c"]
    return {
        "columns": [dict(c) for c in cols],
        "fks": [{"name": f["name"], "cols": list(f["cols"]), "ref_schema": f["ref_schema"],
                 "ref_table": f["ref_table"], "ref_cols": list(f["ref_cols"])} for f in fks],
        "comment": comment,
    }


def _shard_stats(plpy, schema: str, table: str, st: Settings) -> dict | None:
    """For a Citus distributed or reference table, its row count and change signature from its
    shards' statistics (``citus.shard_stats``), the signature extended by the settings that
    shape what is read; None without Citus or for any other table."""
    if not citus.distributed(plpy, schema, table, citus.present(plpy)):
        return None
    stats = citus.shard_stats(plpy, schema, table)
    stats["signature"] += f":{st.sample_values}:{st.values_per_column}:{st.value_max_chars}"
    return stats


def _read_table(plpy, schema: str, table: str, st: Settings, shard: dict | None = None) -> dict:
    """Catalog entry plus the data-derived parts: row count (``count(*)``, or from ``shard``,
    ``_shard_stats`` of a Citus table), sample values per column, distinct string cell values
    per string column, and a fingerprint over all of it."""
    n_samples = st.sample_values
    per_col = st.values_per_column
    max_chars = st.value_max_chars
    cat = _catalog_of(plpy, schema, table)
    rel = plpy.quote_ident(schema) + "." + plpy.quote_ident(table)
    cat["n_rows"] = shard["n_rows"] if shard else \
        spi.run(plpy, f"SELECT count(*) AS n FROM {rel}")[0]["n"]
    allowed = value_columns(plpy, schema, table)  # RLS tables and opted-out columns: no values
    for c in cat["columns"]:
        col = plpy.quote_ident(c["name"])
        if not allowed.get(c["name"], False):
            c["samples"], c["values"] = [], []
            continue
        c["samples"] = [r["v"] for r in spi.run(
            plpy, f"SELECT {col}::text AS v FROM (SELECT {col} FROM {rel} WHERE {col} IS NOT NULL "
            f"LIMIT 10000) s GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT {n_samples}")] \
            if n_samples > 0 else []
        c["values"] = []
        if c["type"].split("(")[0].strip() in _STRING_TYPES and per_col > 0:
            c["values"] = [r["v"] for r in spi.run(
                plpy, f"SELECT {col}::text AS v FROM {rel} WHERE {col} IS NOT NULL "
                f"AND length({col}::text) BETWEEN 1 AND {max_chars} "
                f"GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT {per_col}")]
    shape = json.dumps(cat, sort_keys=True, default=str)
    cat["fingerprint"] = hashlib.md5(shape.encode()).hexdigest()
    return cat


def index_table(plpy, schema: str, table: str, force: bool = False) -> dict:
    """(Re)index one table: catalog rows, sample values, string cell values, embeddings.

    Writes ``nl2sql.schema_table``, ``schema_column`` (with column embeddings of
    ``table column words: comment``), ``cell_value`` (distinct string values with embeddings;
    none for columns the value policy withholds) and ``schema_fk``. Incremental: the
    fingerprint (MD5) covers columns, types, keys, comments, foreign keys, row count, sample
    values and the distinct string values; when it is unchanged (and not ``force``) nothing is
    written. Values already embedded keep their embedding; only new ones are embedded (the
    expensive part).

    Source: PET-SQL (Li et al. 2024) §3.1, cell values per column; OpenSearch-SQL (Xie et al.
    2024) §3.4, value index over string cells.

    With Citus, a distributed or reference table whose shards' statistics are unchanged since
    it was indexed is skipped without reading its data (``citus.shard_stats``), and its row
    count comes from those statistics instead of a distributed ``count(*)``.

    A table that DDL queued (``ddl_queue``: created, altered, renamed) is rewritten as with
    ``force`` (its column embeddings name the table and its cell values were dropped by a
    rename), and its queue rows up to that point are removed afterwards.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        schema: the table's schema name.
        table: the table's name.
        force: rewrite even when the fingerprint is unchanged.

    Returns:
        ``{"table": "schema.table", "skipped": True, "queued": False}`` when unchanged; else
        ``table``, ``skipped`` (False), ``queued`` (DDL queued it), ``columns``, ``values``,
        ``values_embedded``, ``fks``, ``rows`` (counts).

    Raises:
        ConfigError: a stored setting is invalid.
        EmbeddingError: the embedding model is missing.
        plpy.SPIError: the table cannot be read (e.g. dropped meanwhile).
    """
    mark = ddl_queue.table_mark(plpy, schema, table)
    out = _write_table(plpy, schema, table, force or mark is not None)
    out["queued"] = mark is not None
    if mark is not None:
        ddl_queue.mark_done(plpy, schema, table, mark)
    return out


def _write_table(plpy, schema: str, table: str, force: bool) -> dict:
    """``index_table`` without the DDL queue: compare, read the table, compare, write.

    A Citus distributed table whose shard signature (``_shard_stats``) is the stored one is
    skipped before any of its data is read."""
    st = get_settings(plpy)
    old = spi.query(
        plpy, "SELECT fingerprint, shard_signature FROM nl2sql.schema_table "
        "WHERE schema_name = $1 AND table_name = $2", [schema, table], ["name", "name"])
    shard = _shard_stats(plpy, schema, table, st)
    if shard and old and old[0]["shard_signature"] == shard["signature"] and not force:
        return {"table": f"{schema}.{table}", "skipped": True}
    cat = _read_table(plpy, schema, table, st, shard)
    if old and old[0]["fingerprint"] == cat["fingerprint"] and not force:
        if shard:  # data unchanged, counters moved (e.g. an update to the same values)
            spi.query(plpy, "UPDATE nl2sql.schema_table SET shard_signature = $3 "
                      "WHERE schema_name = $1 AND table_name = $2",
                      [schema, table, shard["signature"]], ["name", "name", "text"])
        return {"table": f"{schema}.{table}", "skipped": True}
    # keep existing value embeddings: only new values get embedded
    known = {(r["column_name"], r["value"]): r["e"] for r in spi.query(
        plpy, "SELECT column_name, value, embedding::text AS e FROM nl2sql.cell_value "
        "WHERE schema_name = $1 AND table_name = $2", [schema, table], ["name", "name"])}
    spi.query(plpy, "DELETE FROM nl2sql.schema_table WHERE schema_name = $1 AND table_name = $2",
              [schema, table], ["name", "name"])
    spi.query(plpy,
              "INSERT INTO nl2sql.schema_table (schema_name, table_name, comment, n_rows, "
              "fingerprint, relid, shard_signature) VALUES ($1, $2, $3, $4, $5, "
              "pg_catalog.to_regclass(pg_catalog.quote_ident($1) || '.' || "
              "pg_catalog.quote_ident($2)), $6)",
              [schema, table, cat["comment"], cat["n_rows"], cat["fingerprint"],
               shard["signature"] if shard else None],
              ["name", "name", "text", "int8", "text", "text"])

    col_texts = [f"{table} {c['name'].replace('_', ' ')}" + (f": {c['comment']}" if c["comment"] else "")
                 for c in cat["columns"]]
    col_vecs = embed(col_texts, cache=False)
    ins_col = spi.plan(
        plpy, "INSERT INTO nl2sql.schema_column (schema_name, table_name, column_name, ordinal, "
        "data_type, is_primary_key, comment, sample_values, embedding) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::vector)",
        ["name", "name", "name", "int4", "text", "bool", "text", "text[]", "text"])
    ins_val = spi.plan(
        plpy, "INSERT INTO nl2sql.cell_value (schema_name, table_name, column_name, value, embedding) "
        "SELECT $1, $2, $3, v, e::vector FROM unnest($4::text[], $5::text[]) AS u(v, e) "
        "ON CONFLICT DO NOTHING", ["name", "name", "name", "text[]", "text[]"])
    n_values = n_embedded = 0
    for c, vec in zip(cat["columns"], col_vecs):
        spi.execute(plpy, ins_col, [schema, table, c["name"], c["ord"], c["type"], c["pk"],
                               c["comment"], c["samples"], to_pgvector(vec)])
        vals = c["values"]
        if not vals:
            continue
        new = [v for v in vals if (c["name"], v) not in known]
        fresh = dict(zip(new, (to_pgvector(e) for e in embed(new, cache=False)))) if new else {}
        vecs = [known.get((c["name"], v)) or fresh[v] for v in vals]
        spi.execute(plpy, ins_val, [schema, table, c["name"], vals, vecs])
        n_values += len(vals)
        n_embedded += len(new)
    ins_fk = spi.plan(
        plpy, "INSERT INTO nl2sql.schema_fk (schema_name, table_name, constraint_name, columns, "
        "ref_schema, ref_table, ref_columns) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        ["name", "name", "name", "name[]", "name", "name", "name[]"])
    for f in cat["fks"]:
        spi.execute(plpy, ins_fk, [schema, table, f["name"], f["cols"], f["ref_schema"],
                              f["ref_table"], f["ref_cols"]])
    return {"table": f"{schema}.{table}", "skipped": False, "columns": len(cat["columns"]),
            "values": n_values, "values_embedded": n_embedded, "fks": len(cat["fks"]),
            "rows": cat["n_rows"]}


def drop_missing(plpy, keep: list[tuple[str, str]], schemas: list[str] | None) -> int:
    """Remove index rows of tables in the covered schemas that are no longer covered.

    Also removes the DDL queue's rows that no covered table will consume
    (``ddl_queue.clear_uncovered``: dropped relations, other schemas, partitions, shards).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        keep: the ``(schema, table)`` pairs covered now (``plan``).
        schemas: the covered schema names; None or empty uses setting ``schemas``.

    Returns:
        How many tables were dropped from the index.
    """
    if not schemas:
        schemas = list(get_settings(plpy).schemas)
    keep_names = [f"{s}.{t}" for s, t in keep]
    res = spi.query(
        plpy, "DELETE FROM nl2sql.schema_table WHERE schema_name = ANY($2) "
        "AND NOT (schema_name || '.' || table_name = ANY($1)) RETURNING 1",
        [keep_names, schemas], ["text[]", "text[]"])
    ddl_queue.clear_uncovered(plpy, schemas, keep)
    return len(res)


def load_builtin_examples(plpy) -> int:
    """Insert the built-in example pool (source ``builtin``) where its rows are missing.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        How many rows were inserted (0 when all were there).
    """
    ins = spi.plan(
        plpy, "INSERT INTO nl2sql.example (db_id, question, sql, masked_question, sql_skeleton, "
        "schema, source) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7) ON CONFLICT DO NOTHING RETURNING id",
        ["text", "text", "text", "text", "text", "text", "text"])
    n = 0
    for e in builtin_pool():
        n += len(spi.execute(plpy, ins, [e.db_id, e.question, e.sql, e.masked_question,
                                    e.sql_skeleton, json.dumps(e.schema), BUILTIN_SOURCE]))
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
        spi.query(plpy, "UPDATE nl2sql.example SET embedding = e::vector "
                  "FROM unnest($1::int8[], $2::text[]) AS u(i, e) WHERE id = u.i",
                  [[r["id"] for r in rows], [to_pgvector(v) for v in vecs]], ["int8[]", "text[]"])
    total = spi.query(plpy, "SELECT count(*) AS n FROM nl2sql.example")[0]["n"]
    return {"examples_added": added, "examples_embedded": len(rows), "examples_total": total}


def sum_table_counts(results) -> dict:
    """Add up ``index_table`` results.

    Args:
        results: an iterable of ``index_table`` result dicts.

    Returns:
        ``{"tables_indexed", "tables_skipped", "tables_queued", "columns", "values",
        "values_embedded", "fks"}`` (counts; skipped tables count only in ``tables_skipped``;
        ``tables_queued``: tables indexed because DDL queued them).
    """
    out = {"tables_indexed": 0, "tables_skipped": 0, "tables_queued": 0, "columns": 0,
           "values": 0, "values_embedded": 0, "fks": 0}
    for r in results:
        out["tables_queued"] += bool(r.get("queued"))
        if r["skipped"]:
            out["tables_skipped"] += 1
            continue
        out["tables_indexed"] += 1
        for k in ("columns", "values", "values_embedded", "fks"):
            out[k] += r[k]
    return out


# The index tables read by the pipeline's lookups, analyzed after a reindex that changed them.
INDEX_TABLES = ("schema_table", "schema_column", "schema_fk", "cell_value", "example",
                "example_relation")


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
            pages = spi.query(plpy, "SELECT pg_catalog.gin_clean_pending_list("
                                    "'nl2sql.cell_value_trgm'::regclass) AS n")[0]["n"]
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
    return any(counts.get(k) for k in ("tables_indexed", "tables_dropped", "examples_added",
                                      "examples_embedded"))


def reindex(plpy, schemas: list[str] | None = None, force: bool = False) -> dict:
    """Index the catalog of ``schemas``, their cell values and the example pool.

    What ``nl2sql.reindex()`` runs: ``index_table`` for each table of ``plan`` (tables DDL
    queued are rewritten), then ``drop_missing``, ``index_examples`` and, when anything
    changed, ``tidy_indexes``. Incremental unless ``force``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        schemas: schema names; None or empty uses setting ``schemas``.
        force: rewrite every table even when its fingerprint is unchanged.

    Returns:
        Counts: ``tables_indexed``, ``tables_skipped``, ``tables_queued``, ``tables_dropped``, ``columns``,
        ``values``, ``values_embedded``, ``fks``, ``examples_added``, ``examples_embedded``,
        ``examples_total`` (and ``trigram_pending_pages``, ``tables_analyzed`` when tidied).

    Raises:
        ConfigError: a stored setting is invalid.
        EmbeddingError: the embedding model is missing.
    """
    tables = plan(plpy, schemas)
    out = sum_table_counts(index_table(plpy, s, t, force=force) for s, t in tables)
    out["tables_dropped"] = drop_missing(plpy, tables, schemas)
    out.update(index_examples(plpy))
    if changed(out):
        out.update(tidy_indexes(plpy))
    return out
