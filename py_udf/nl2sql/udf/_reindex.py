"""The entry points of indexing; ``ops`` is imported inside each, not on the question path."""

from __future__ import annotations

import functools
import json

from ..core import spi
from ..ops import value_policy
from ._door import as_sql_errors, entry_point, schema_names


@entry_point
def reindex(plpy, schemas: list[str] | None, force: bool) -> str:
    """Back ``nl2sql.reindex(schemas, force) → jsonb``: ``indexer.reindex``.

    Args:
        schemas: schema names, or None for setting ``schemas``.
        force: rewrite every table even when unchanged.

    Returns:
        The counts as JSON text.
    """
    from ..ops import indexer  # not loaded by a backend that only asks questions

    return json.dumps(as_sql_errors(plpy, "reindex", indexer.reindex, schema_names(schemas), force))


@entry_point
def reindex_plan(plpy, schemas: list[str] | None) -> list[tuple[str, str]]:
    """Back ``nl2sql._reindex_plan(schemas)``: ``table_state.plan``.

    Args:
        schemas: schema names, or None for setting ``schemas``.

    Returns:
        The covered tables as ``(schema, table)`` pairs.
    """
    from ..ops import table_state  # not loaded by a backend that only asks questions

    return table_state.plan(plpy, schema_names(schemas))


@entry_point
def reindex_changed(plpy, schemas: list[str] | None, force: bool) -> list[tuple[str, str, bool]]:
    """Back ``nl2sql._reindex_changed(schemas, force)``: ``indexer.changed_tables``.

    Args:
        schemas: schema names, or None for setting ``schemas``.
        force: count every table as changed.

    Returns:
        ``(schema, table, changed)`` triples.
    """
    from ..ops import indexer  # not loaded by a backend that only asks questions

    return indexer.changed_tables(plpy, schema_names(schemas), force)


@entry_point
def reindex_begin(plpy) -> bool:
    """Back ``nl2sql._reindex_begin() → boolean``: ``index_maintenance.begin_bulk``.

    Args:
        plpy: PL/Python's module.

    Returns:
        Whether the value index's HNSW index was dropped (``reindex_finish`` builds it).
    """
    from ..ops import index_maintenance  # not loaded by a backend that only asks questions

    return index_maintenance.begin_bulk(plpy)


@entry_point
def reindex_table(plpy, schema_name: str, table_name: str, force: bool) -> str:
    """Back ``nl2sql._reindex_table(schema_name, table_name, force) → jsonb``.

    Args:
        schema_name, table_name: the table.
        force: rewrite it even when unchanged.

    Returns:
        ``table_index.index_table``'s counts as JSON text.
    """
    from ..ops import table_index  # not loaded by a backend that only asks questions

    index_table = table_index.index_table
    return json.dumps(
        as_sql_errors(plpy, "_reindex_table", index_table, schema_name, table_name, force)
    )


@entry_point
def reindex_enqueue(plpy, tables: list[str], force: bool, parts: int = 1) -> int:
    """Back ``nl2sql._reindex_enqueue(tables, force, parts) → bigint``: queue a run for several
    workers.

    Args:
        tables: the changed tables as ``schema.table`` texts.
        force: each worker rewrites its tables even when unchanged.
        parts: the parts a table of at least ``reindex_part_rows`` rows is queued as (the
            number of workers).

    Returns:
        The run id that ``reindex_claim`` takes.
    """
    return spi.query(
        plpy,
        "SELECT nl2sql._reindex_enqueue($1, $2, $3) AS r",
        [tables, force, parts],
        ["text[]", "bool", "int4"],
    )[0]["r"]


# The largest unclaimed table (or part of one) of a run (of any run when $1 is NULL); SKIP
# LOCKED: the rows other workers hold are passed over (sql/incremental/025-reindex-queue.sql).
_CLAIM = (
    "SELECT q.run_id, q.schema_name, q.table_name, q.force, q.part, q.parts "
    "FROM nl2sql.reindex_queue q WHERE q.done_at IS NULL AND ($1::int8 IS NULL OR q.run_id = $1) "
    "ORDER BY q.run_id, q.weight DESC, q.schema_name, q.table_name, q.part LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)

_KEY_TYPES = ["int8", "name", "name"]  # run_id, schema_name, table_name
_DONE = (
    "UPDATE nl2sql.reindex_queue SET done_at = now(), done_by = $5, result = $6::jsonb "
    "WHERE run_id = $1 AND schema_name = $2 AND table_name = $3 AND part = $4"
)

# A table's parts finish one after the other (this lock, until commit): the last one sees the
# others' results committed and records the table's data state when they all read the same
# (sql/incremental/027-reindex-parts.sql); until then the state stays NULL (read again).
_PARTS_LOCK = (
    "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('nl2sql.reindex_parts'), "
    "pg_catalog.hashtext($1 || '.' || $2))"
)
_PARTS_SETTLE = (
    "UPDATE nl2sql.schema_table t SET data_state = q.ds FROM (SELECT "
    "min(r.result ->> 'data_state') AS ds, count(*) FILTER (WHERE r.done_at IS NULL) AS open, "
    "count(DISTINCT r.result ->> 'data_state') AS n_ds, count(r.result ->> 'data_state') AS n "
    "FROM nl2sql.reindex_queue r WHERE r.run_id = $1 AND r.schema_name = $2 "
    "AND r.table_name = $3) q WHERE t.schema_name = $2 AND t.table_name = $3 "
    "AND q.open = 0 AND q.n_ds = 1 AND q.n = $4 RETURNING 1"
)


@entry_point
def reindex_claim(plpy, run_id: int | None, worker: str | None) -> str | None:
    """Back ``nl2sql._reindex_claim(run_id, worker) → jsonb``: claim one queued table (or part of
    one), index it (``table_index.index_table``) and mark it done, all in the caller's
    transaction: a worker that dies rolls its claim back with its work, and the table is
    claimed again. The last part of a table records its data state (``_PARTS_SETTLE``).
    Source: the SKIP LOCKED work queue of pgai's vectorizer workers (timescale/pgai, 2024).

    Args:
        run_id: the run (``reindex_enqueue``), or None for the oldest run with work left.
        worker: a name stored with the result (host and process of the worker).

    Returns:
        ``index_table``'s counts as JSON text with ``run_id`` (and ``part`` for a part of a
        table); None when no unclaimed table is left (other workers may still hold some:
        ``_reindex_pending``).
    """
    from ..ops import table_index  # not loaded by a backend that only asks questions

    rows = spi.query(plpy, _CLAIM, [run_id], ["int8"])
    if not rows:
        return None
    q = rows[0]
    part = (q["part"], q["parts"])
    out = as_sql_errors(
        plpy,
        "_reindex_claim",
        table_index.index_table,
        q["schema_name"],
        q["table_name"],
        q["force"] or q["parts"] > 1,  # a part of a table the run found changed
        None,  # its state: read now
        part,
    )
    out["run_id"] = q["run_id"]
    text = json.dumps(out)
    key = [q["run_id"], q["schema_name"], q["table_name"]]
    spi.query(plpy, _DONE, [*key, q["part"], worker, text], _KEY_TYPES + ["int4", "text", "text"])
    if q["parts"] > 1:
        spi.query(plpy, _PARTS_LOCK, key[1:], ["text", "text"])
        spi.query(plpy, _PARTS_SETTLE, [*key, q["parts"]], _KEY_TYPES + ["int4"])
    return text


@entry_point
def reindex_finish(plpy, schemas: list[str] | None, kept: list[str] | None, changed: bool) -> str:
    """Back ``nl2sql._reindex_finish(schemas, kept, tables_changed) → jsonb``.

    Args:
        schemas: the covered schema names, or None for setting ``schemas``.
        kept: the covered tables as ``schema.table`` texts, or None.
        changed: whether any table was re-indexed.

    Returns:
        ``indexer.finish``'s counts as JSON text.
    """
    from ..ops import indexer  # not loaded by a backend that only asks questions

    keep = [tuple(k.split(".", 1)) for k in (kept or [])]
    return json.dumps(
        as_sql_errors(plpy, "_reindex_finish", indexer.finish, schema_names(schemas), keep, changed)
    )


@entry_point
def set_value_policy(plpy, tbl: str, send_values: bool, column_name: str | None) -> str:
    """Back ``nl2sql.set_value_policy(tbl, send_values, column_name) → jsonb``.

    Args:
        tbl: the table, as ``regclass`` text.
        send_values: true opts the values in, false keeps them out.
        column_name: one column of ``tbl``, or None for the whole table.

    Returns:
        ``value_policy.set_value_policy``'s dict as JSON text (the table re-indexed).
    """
    from ..ops import table_index  # not loaded by a backend that only asks questions

    one = functools.partial(table_index.index_table, plpy, force=True)
    return json.dumps(value_policy.set_value_policy(plpy, tbl, send_values, column_name, one))
