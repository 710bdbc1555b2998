"""Upkeep of the HNSW and trigram indexes around a reindex (docs/internals/ops.md)."""

from __future__ import annotations

from ..core import spi

# The value index's vector index (sql/incremental/001-tables.sql). Inserting into an HNSW graph
# one row at a time cost ~2.5 ms a row (400 rows/s at 10,000 rows, slower as it grows) against
# 3,600-6,600 rows/s for building it over the rows at once (pgvector 0.8, this 2-core machine):
# a reindex that starts from an (almost) empty value index drops it and builds it at the end.
VECTOR_INDEX = "cell_value_embedding_hnsw"

VECTOR_INDEX_DDL = (
    "CREATE INDEX IF NOT EXISTS cell_value_embedding_hnsw ON nl2sql.cell_value "
    "USING hnsw (embedding halfvec_cosine_ops)"
)

# Memory for building the HNSW graph in one go (sql/incremental/023-value-halfvec.sql: a
# halfvec of 768 bytes and its neighbour lists, ~1.5 kB a value; with vector(384) 979,041 values
# did not fit in 2 GB): a graph that outgrows maintenance_work_mem (64MB by default, ~40,000
# values) is finished by slow on-disk inserts. The build raises it for its own transaction to
# what the rows need, at most BUILD_MEM_MAX_MB, never below the server's; where the server cannot
# give it (a parallel build takes it as shared memory), the build runs again with the server's.
BUILD_MEM_PER_ROW_KB = 1.5
BUILD_MEM_MAX_MB = 2048

BULK_BELOW_ROWS = 1000


def begin_bulk(plpy) -> bool:
    """Drop the value index's HNSW index when fewer than ``BULK_BELOW_ROWS`` values are
    indexed (building it at the end is 10x faster; lookups scan meanwhile), if the role may.

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
    """Build the value index's HNSW index when it is missing (after ``begin_bulk``), with
    ``maintenance_work_mem`` raised for the graph (``_raise_build_memory``) and the server's
    parallel maintenance workers.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        True when it was built now; False when it existed or the role may not build it.
    """
    if spi.query(plpy, f"SELECT to_regclass('nl2sql.{VECTOR_INDEX}') IS NOT NULL AS ok")[0]["ok"]:
        return False
    for raise_memory in (True, False):
        try:
            with plpy.subtransaction():
                if raise_memory:
                    _raise_build_memory(plpy)
                spi.run(plpy, VECTOR_INDEX_DDL)
            return True
        except plpy.SPIError:
            continue
    return False


def _raise_build_memory(plpy) -> None:
    """Set ``maintenance_work_mem`` for this transaction (``set_config(..., true)``) to what an
    HNSW graph of the value index's rows needs, within ``BUILD_MEM_MAX_MB``; lower never."""
    spi.query(
        plpy,
        "SELECT pg_catalog.set_config('maintenance_work_mem', GREATEST("
        "(SELECT s.setting::bigint FROM pg_catalog.pg_settings s "
        "WHERE s.name = 'maintenance_work_mem'), LEAST($1::bigint * 1024, 16384 + "
        "pg_catalog.ceil((SELECT count(*) FROM nl2sql.cell_value) * $2::float8)::bigint)) "
        "|| 'kB', true) AS m",
        [BUILD_MEM_MAX_MB, BUILD_MEM_PER_ROW_KB],
        ["int4", "float8"],
    )


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
    """Fold the trigram and word indexes' pending lists in and ANALYZE ``INDEX_TABLES`` (skipped for a role
    that does not own them).

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
                "SELECT pg_catalog.gin_clean_pending_list('nl2sql.cell_value_text_trgm'::regclass)"
                " + pg_catalog.gin_clean_pending_list('nl2sql.cell_value_text_words'::regclass)"
                " AS n",
            )[0]["n"]
    except plpy.SPIError:
        pass
    for t in INDEX_TABLES:
        spi.run(plpy, f"ANALYZE nl2sql.{t}")
    return {"trigram_pending_pages": pages, "tables_analyzed": len(INDEX_TABLES)}
