"""Citus: shards stay out of the index; distributed tables' counts come from shard statistics.
Nothing runs without Citus (docs/operations.md, "Citus")."""

from __future__ import annotations

from ..core import spi

# The relations a reindex covers (table_state.plan): ordinary and partitioned tables (not
# partitions), views and materialized views of the schemas $1 the role may SELECT; not
# nl2sql's own schema, not extension members.
_PLAN_SQL = (
    "SELECT n.nspname AS s, c.relname AS t FROM pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = ANY($1) AND c.relkind IN ('r','p','v','m') "
    "AND NOT c.relispartition AND n.nspname <> 'nl2sql' "
    "AND pg_catalog.has_table_privilege(c.oid, 'SELECT') "
    "AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.objid = c.oid "
    "  AND d.deptype = 'e') "
    "{shards}"
    "ORDER BY 1, 2"
)
_NO_SHARDS = "AND NOT pg_catalog.relation_is_a_known_shard(c.oid::pg_catalog.regclass) "
NO_SHARDS = _NO_SHARDS
"""The clause leaving Citus shard tables out of a catalog query (only valid with Citus)."""

# Per distributed/reference table: its shards' live rows and change counters, summed over the
# shards, and the shard ids (a rebalance, split or new shard changes them). Run only with Citus.
_SHARD_STATS_SQL = (
    "SELECT COALESCE(sum(split_part(r.result, ',', 1)::bigint), 0) AS n_rows, "
    "COALESCE(sum(split_part(r.result, ',', 2)::bigint), 0) AS changes, "
    "string_agg(r.shardid::text, ',' ORDER BY r.shardid) AS shards, "
    "bool_and(r.success) AS ok "
    "FROM pg_catalog.run_command_on_shards($1::regclass, "
    "$$SELECT n_live_tup || ',' || (n_tup_ins + n_tup_upd + n_tup_del) "
    "FROM pg_catalog.pg_stat_user_tables WHERE relid = '%s'::regclass$$) r"
)


def present(plpy) -> bool:
    """Say whether the citus extension is installed in this database.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        True when ``pg_extension`` lists ``citus``.
    """
    return bool(spi.query(plpy, "SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus'"))


def plan_query(citus: bool) -> str:
    """The SQL listing the relations a reindex covers (one parameter: ``text[]`` of schemas).

    Args:
        citus: the citus extension is installed: adds the shard exclusion (a Citus function).

    Returns:
        SQL text selecting ``s`` (schema) and ``t`` (table), sorted.
    """
    return _PLAN_SQL.format(shards=_NO_SHARDS if citus else "")


def shard_stats_query() -> str:
    """The SQL that measures one distributed or reference table (parameter: its ``regclass`` as
    text) from its shards; only valid with Citus installed.

    Returns:
        SQL text selecting ``n_rows`` (sum of ``n_live_tup``), ``changes`` (sum of inserts,
        updates, deletes), ``shards`` (ids, comma-separated) and ``ok`` (every shard answered).
    """
    return _SHARD_STATS_SQL


def distributed(plpy, schema: str, table: str, citus: bool) -> bool:
    """Say whether a table is a Citus distributed or reference table (in ``pg_dist_partition``).

    Args:
        schema: the table's schema name.
        table: the table's name.
        citus: the citus extension is installed (``present``); without it: False, no query.

    Returns:
        True for a table Citus distributes.
    """
    if not citus:
        return False
    return bool(
        spi.query(
            plpy,
            "SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = "
            "pg_catalog.to_regclass(pg_catalog.quote_ident($1) || '.' || pg_catalog.quote_ident($2))",
            [schema, table],
            ["text", "text"],
        )
    )


def shard_stats(plpy, schema: str, table: str) -> dict:
    """Row count and change signature of a distributed table, from its shards' statistics (no
    user data read; a statistics reset reads as a change).

    Args:
        schema: the table's schema name.
        table: the table's name.

    Returns:
        ``{"n_rows": int, "signature": str}``; the signature changes with any shard's rows or
        with the shards.

    Raises:
        plpy.SPIError: a shard's node cannot be reached.
    """
    rel = plpy.quote_ident(schema) + "." + plpy.quote_ident(table)
    r = spi.query(plpy, _SHARD_STATS_SQL, [rel], ["text"])[0]
    return {
        "n_rows": int(r["n_rows"]),
        "signature": f"citus:{r['changes']}:{r['shards']}:{r['ok']}",
    }
