"""Which tables a reindex covers and which changed, from the catalog only
(docs/internals/ops.md "Change detection reads no user data")."""

from __future__ import annotations

import json

from ..core import spi
from ..core.settings import Settings, get_settings
from . import _citus as citus

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
    """List the tables a reindex covers: tables (not partitions), views and materialized views
    of ``schemas`` the current role may SELECT; not nl2sql's, extension members, Citus shards.

    Args:
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
    """Read the change-detection state of the covered tables in one catalog query (no user
    data): catalog state with ``settings_state``, data state, row estimate, and both as stored.

    Args:
        schemas: schema names; None or empty uses setting ``schemas``.
        only: ``(schema, table)`` to read the state of that one table (when covered).
        st: the settings; None reads them.

    Returns:
        Dicts with ``schema``, ``table``, ``kind`` (relkind), ``fingerprint``, ``data_state``
        (None when ``track_counts`` is off), ``rows_est`` (``reltuples``, summed over a
        partitioned table's partitions; None for a view or never analyzed),
        ``old_fingerprint``, ``old_data_state`` (None when not indexed), sorted.

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


def state_of(plpy, schema: str, table: str, st: Settings) -> dict:
    """Read one table's ``table_states`` row (covered schemas first, then its own schema).

    Args:
        schema: the table's schema name.
        table: the table's name.
        st: the settings.

    Returns:
        The ``table_states`` row.

    Raises:
        plpy.Error: (through ``plpy.error``) this role may not SELECT it or it is no table,
            view or materialized view.
    """
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
