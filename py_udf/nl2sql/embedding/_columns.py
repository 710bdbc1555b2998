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
# the views over those columns (visible_cell_value, visible_column, ...) and the views over
# them, oldest first: dropped for the change of type and made again as they were, in the
# extension (when they were), with their options and grants (the owner runs a reindex)
_VIEWS = """
WITH RECURSIVE dep(oid, depth) AS (
    SELECT r.ev_class, 1 FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
     JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
    WHERE d.classid = 'pg_rewrite'::regclass AND a.attname = 'embedding'
      AND d.refobjid = ANY($1::regclass[]::oid[]) AND r.ev_class <> d.refobjid
    UNION
    SELECT r.ev_class, dep.depth + 1 FROM dep JOIN pg_depend d ON d.refobjid = dep.oid
     JOIN pg_rewrite r ON r.oid = d.objid
    WHERE d.classid = 'pg_rewrite'::regclass AND r.ev_class <> dep.oid AND dep.depth < 8)
SELECT c.oid::regclass::text AS name, pg_get_viewdef(c.oid) AS def,
       coalesce(array_to_string(c.reloptions, ', '), '') AS opts,
       EXISTS (SELECT 1 FROM pg_depend e WHERE e.classid = 'pg_class'::regclass
                  AND e.objid = c.oid AND e.deptype = 'e') AS member,
       (SELECT coalesce(array_agg(coalesce(nullif(g.grantee, 0)::regrole::text, 'PUBLIC')
                                  || ' ' || g.privilege_type), '{}')
          FROM aclexplode(c.relacl) g WHERE g.grantee <> c.relowner) AS grants
  FROM (SELECT oid, max(depth) AS depth FROM dep GROUP BY oid) x JOIN pg_class c USING (oid)
 ORDER BY x.depth, c.oid"""


def dimensions(plpy, table: str = "nl2sql.schema_column") -> int:
    """The dimensions of one of the vector columns now.

    Args:
        plpy: the PL/Python module (SPI access).
        table: a table of ``COLUMNS``: ``nl2sql.schema_column`` (the embedding model's) or
            ``nl2sql.cell_value`` (the value index's, ``value_vectors``).

    Returns:
        n of its ``vector(n)`` or ``halfvec(n)`` (384 as installed).
    """
    rows = spi.query(
        plpy,
        "SELECT atttypmod AS n FROM pg_attribute "
        "WHERE attrelid = $1::regclass AND attname = 'embedding'",
        [table],
        ["text"],
    )
    return int(rows[0]["n"])


def follow(plpy, n: int, value_n: int | None = None) -> bool:
    """Make every vector column ``n``-dimensional (the value index's ``value_n``) and emptied
    (the caller re-embeds), with its HNSW index made again; the views over them are made
    again as they were. Columns that have their dimensions already are left as they are.

    Args:
        plpy: the PL/Python module (SPI access).
        n: the model's dimensions.
        value_n: the value index's (``value_vectors.dimensions``); None: ``n``.

    Returns:
        True when a column changed.

    Raises:
        EmbeddingError: ``n`` is outside 1..4,000.
    """
    if not 1 <= n <= MAX_HALFVEC:
        raise EmbeddingError(
            f"nl2sql: an embedding model of {n} dimensions cannot be indexed (1 to "
            f"{MAX_HALFVEC}, pgvector's HNSW limit for halfvec); declare a model with fewer"
        )
    want = {t: (value_n or n) if t == "nl2sql.cell_value" else n for t in COLUMNS}
    todo = [t for t in COLUMNS if dimensions(plpy, t) != want[t]]
    if not todo:
        return False
    views = _dependent_views(plpy)
    for v in reversed(views):  # a view over another view goes first
        if v["member"]:  # beside the database (nl2sql install) there is no extension
            spi.query(plpy, f"ALTER EXTENSION nl2sql DROP VIEW {v['name']}")
        spi.query(plpy, f"DROP VIEW {v['name']}")
    for table in todo:
        _retype(plpy, table, want[table])
    for v in views:
        _create_view(plpy, v)
    return True


def _retype(plpy, table: str, n: int) -> None:
    """Make one table's vector column ``n``-dimensional and emptied, its index made again."""
    typ, index, not_null = COLUMNS[table]
    if index:
        spi.query(plpy, f"DROP INDEX IF EXISTS nl2sql.{index[0]}")
    if not_null:
        spi.query(plpy, f"ALTER TABLE {table} ALTER COLUMN embedding DROP NOT NULL")
    spi.query(plpy, f"ALTER TABLE {table} ALTER COLUMN embedding TYPE {typ}({n}) USING NULL")
    if index and (typ == "halfvec" or n <= MAX_VECTOR_HNSW):
        spi.query(plpy, f"CREATE INDEX {index[0]} ON {table} USING hnsw (embedding {index[1]})")


def _dependent_views(plpy) -> list[dict]:
    """The views over the vector columns, and over those, in the order they can be made."""
    return spi.query(plpy, _VIEWS, [list(COLUMNS)], ["text[]"])


def _create_view(plpy, v: dict) -> None:
    """Make a view again as ``_dependent_views`` read it, back in the extension."""
    opts = f" WITH ({v['opts']})" if v["opts"] else ""
    spi.query(plpy, f"CREATE VIEW {v['name']}{opts} AS {v['def']}")
    if v["member"]:
        spi.query(plpy, f"ALTER EXTENSION nl2sql ADD VIEW {v['name']}")
    for grant in v["grants"]:
        role, privilege = grant.rsplit(" ", 1)
        spi.query(plpy, f"GRANT {privilege} ON {v['name']} TO {role}")


def restore_not_null(plpy) -> None:
    """Set NOT NULL again on the columns that had it (after they are re-embedded).

    Args:
        plpy: the PL/Python module (SPI access).
    """
    for table, (_typ, _index, not_null) in COLUMNS.items():
        if not_null:  # the value index is empty then: the reindex fills it
            spi.query(plpy, f"ALTER TABLE {table} ALTER COLUMN embedding SET NOT NULL")
