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
    "USING hnsw (embedding vector_cosine_ops)"
)

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
    """Build the value index's HNSW index when it is missing (after ``begin_bulk``), with the
    server's ``maintenance_work_mem`` and parallel maintenance workers.

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
    """Fold the trigram index's pending list in and ANALYZE ``INDEX_TABLES`` (skipped for a role
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
                "SELECT pg_catalog.gin_clean_pending_list("
                "'nl2sql.cell_value_text_trgm'::regclass) AS n",
            )[0]["n"]
    except plpy.SPIError:
        pass
    for t in INDEX_TABLES:
        spi.run(plpy, f"ANALYZE nl2sql.{t}")
    return {"trigram_pending_pages": pages, "tables_analyzed": len(INDEX_TABLES)}
