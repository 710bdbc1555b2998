"""The vector columns follow the embedding model's dimensions (a forced reindex with another
model, ``index_model.prepare_reindex``): the value index is ``halfvec(n)`` (HNSW up to 4,000
dimensions), the catalog, examples and curated rows ``vector(n)``; the examples' HNSW index is
kept up to 2,000 dimensions (pgvector's limit for ``vector``; above it examples are compared
exactly, a few thousand rows). Runs in the reindex's transaction: an error undoes it all."""

from __future__ import annotations

from ..core import spi
from ..core.errors import EmbeddingError

__all__ = ["dimensions", "follow", "restore_not_null"]

MAX_HALFVEC = 4000  # pgvector's HNSW limit for halfvec
MAX_VECTOR_HNSW = 2000  # ... and for vector
# table -> (type, index name and opclass or None, NOT NULL)
COLUMNS = {
    "nl2sql.cell_value": ("halfvec", ("cell_value_embedding_hnsw", "halfvec_cosine_ops"), True),
    "nl2sql.schema_column": ("vector", None, False),
    "nl2sql.example": ("vector", ("example_embedding_hnsw", "vector_cosine_ops"), False),
    "nl2sql.verified_query": ("vector", None, True),
    "nl2sql.term": ("vector", None, True),
    "nl2sql.instruction": ("vector", None, True),
}
VIEW = "nl2sql.visible_cell_value"  # selects cell_value.embedding: dropped and made again


def dimensions(plpy) -> int:
    """The dimensions of the value index's column now.

    Args:
        plpy: the PL/Python module (SPI access).

    Returns:
        n of ``halfvec(n)`` (384 as installed).
    """
    rows = spi.query(
        plpy,
        "SELECT atttypmod AS n FROM pg_attribute "
        "WHERE attrelid = 'nl2sql.cell_value'::regclass AND attname = 'embedding'",
    )
    return int(rows[0]["n"])


def follow(plpy, n: int) -> bool:
    """Make every vector column ``n``-dimensional and emptied (the caller re-embeds), with its
    HNSW index made again; the view over the value index is made again with its grant.

    Args:
        plpy: the PL/Python module (SPI access).
        n: the model's dimensions.

    Returns:
        True when the columns changed (False: they had ``n`` dimensions already).

    Raises:
        EmbeddingError: ``n`` is outside 1..4,000.
    """
    if not 1 <= n <= MAX_HALFVEC:
        raise EmbeddingError(
            f"nl2sql: an embedding model of {n} dimensions cannot be indexed (1 to "
            f"{MAX_HALFVEC}, pgvector's HNSW limit for halfvec); declare a model with fewer"
        )
    if dimensions(plpy) == n:
        return False
    view = spi.query(plpy, f"SELECT pg_get_viewdef('{VIEW}'::regclass) AS d")[0]["d"]
    spi.query(plpy, f"DROP VIEW {VIEW}")
    for table, (typ, index, not_null) in COLUMNS.items():
        if index:
            spi.query(plpy, f"DROP INDEX IF EXISTS nl2sql.{index[0]}")
        if not_null:
            spi.query(plpy, f"ALTER TABLE {table} ALTER COLUMN embedding DROP NOT NULL")
        spi.query(plpy, f"ALTER TABLE {table} ALTER COLUMN embedding TYPE {typ}({n}) USING NULL")
        if index and (typ == "halfvec" or n <= MAX_VECTOR_HNSW):
            spi.query(plpy, f"CREATE INDEX {index[0]} ON {table} USING hnsw (embedding {index[1]})")
    spi.query(plpy, f"CREATE VIEW {VIEW} WITH (security_barrier) AS {view}")
    spi.query(plpy, f"GRANT SELECT ON {VIEW} TO PUBLIC")
    return True


def restore_not_null(plpy) -> None:
    """Set NOT NULL again on the columns that had it (after they are re-embedded).

    Args:
        plpy: the PL/Python module (SPI access).
    """
    for table, (_typ, _index, not_null) in COLUMNS.items():
        if not_null:  # the value index is empty then: the reindex fills it
            spi.query(plpy, f"ALTER TABLE {table} ALTER COLUMN embedding SET NOT NULL")
