"""The DDL queue (``nl2sql.ddl_queue``) as ``reindex`` reads it; a row's ``id`` is its watermark
(docs/indexing.md, "DDL")."""

from __future__ import annotations

from ..core import spi


def queued_tables(plpy) -> dict[tuple[str, str], int]:
    """The relations queued by DDL that still exist, under their current names.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        ``{(schema, table): highest queue id}``; dropped relations are not listed.
    """
    rows = spi.query(
        plpy,
        "SELECT n.nspname AS s, c.relname AS t, max(q.id) AS mark "
        "FROM nl2sql.ddl_queue q JOIN pg_catalog.pg_class c ON c.oid = q.relid "
        "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace GROUP BY 1, 2",
    )
    return {(r["s"], r["t"]): r["mark"] for r in rows}


def table_mark(plpy, schema: str, table: str) -> int | None:
    """The highest queue id of one relation (the watermark for ``mark_done``), or None.

    Args:
        schema: the relation's schema name.
        table: the relation's name.

    Returns:
        The watermark, or None when DDL did not queue the relation.
    """
    rows = spi.query(
        plpy,
        "SELECT max(q.id) AS mark FROM nl2sql.ddl_queue q "
        "WHERE q.relid = pg_catalog.to_regclass(pg_catalog.quote_ident($1) || '.' "
        "|| pg_catalog.quote_ident($2))",
        [schema, table],
        ["text", "text"],
    )
    return rows[0]["mark"] if rows else None


def mark_done(plpy, schema: str, table: str, mark: int) -> int:
    """Remove one relation's queue rows up to ``mark`` (it was just re-indexed).

    Args:
        schema: the relation's schema name.
        table: the relation's name.
        mark: the watermark ``table_mark`` returned before indexing.

    Returns:
        How many queue rows were removed.
    """
    return len(
        spi.query(
            plpy,
            "DELETE FROM nl2sql.ddl_queue q WHERE q.id <= $3 "
            "AND q.relid = pg_catalog.to_regclass(pg_catalog.quote_ident($1) || '.' "
            "|| pg_catalog.quote_ident($2)) RETURNING 1",
            [schema, table, mark],
            ["text", "text", "int8"],
        )
    )


def clear_uncovered(plpy, schemas: list[str], covered: list[tuple[str, str]]) -> int:
    """Remove the queue rows no reindex of ``schemas`` will consume: dropped relations, those
    outside ``schemas``, those not ``covered`` (partitions, extension members, shards).

    Args:
        schemas: the schema names the reindex covered.
        covered: the ``(schema, table)`` pairs the reindex covered.

    Returns:
        How many queue rows were removed.
    """
    names = [f"{s}.{t}" for s, t in covered]
    return len(
        spi.query(
            plpy,
            "DELETE FROM nl2sql.ddl_queue q WHERE NOT EXISTS ("
            "SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
            "ON n.oid = c.relnamespace WHERE c.oid = q.relid AND n.nspname = ANY($1) "
            "AND n.nspname || '.' || c.relname = ANY($2)) RETURNING 1",
            [schemas, names],
            ["text[]", "text[]"],
        )
    )
