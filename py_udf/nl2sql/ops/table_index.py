"""(Re)indexing one table's rows of the schema and value index. Source: PET-SQL (Li et al.
2024) §3.1; OpenSearch-SQL (Xie et al. 2024) §3.4."""

from __future__ import annotations

import json
import time

from ..core import spi
from ..core.errors import GONE_SQLSTATES
from ..core.settings import get_settings
from ..embedding.encode import embed, to_pgvector
from . import _citus as citus
from . import _ddl_queue as ddl_queue
from ._cell_values import WHOLE, write_values
from ._table_reader import read_table
from .table_state import needs_reindex, state_of


def index_table(
    plpy,
    schema: str,
    table: str,
    force: bool = False,
    state: dict | None = None,
    part: tuple[int, int] = WHOLE,
) -> dict:
    """(Re)index one table, as ``write_table`` does, rewriting it (as with ``force``) when DDL
    queued it (``ddl_queue``: created, altered, renamed); its queue rows are removed after
    (by part 0 of a table indexed in parts).

    Args:
        schema: the table's schema name.
        table: the table's name.
        force: rewrite even when the state is unchanged.
        state: the table's ``table_states`` row when the caller has it (else it is read).
        part: ``(k, n)``: write part k of n of the table (``write_table``).

    Returns:
        ``write_table``'s result with ``queued`` (DDL queued it).

    Raises:
        ConfigError: a stored setting is invalid.
        EmbeddingError: the embedding model is missing.
        plpy.SPIError: the table cannot be read (e.g. dropped meanwhile).
    """
    mark = ddl_queue.table_mark(plpy, schema, table) if part[0] == 0 else None
    out = write_table(plpy, schema, table, force or mark is not None, state, part)
    out["queued"] = mark is not None
    if mark is not None and not out.get("gone"):
        ddl_queue.mark_done(plpy, schema, table, mark)
    return out


def _with_shard_state(plpy, schema: str, table: str, state: dict) -> dict:
    """``state``, for a Citus distributed or reference table with data state and row estimate
    from its shards' statistics (the coordinator's counters stay zero)."""
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
    plpy,
    schema: str,
    table: str,
    force: bool = False,
    state: dict | None = None,
    part: tuple[int, int] = WHOLE,
) -> dict:
    """(Re)index one table's rows of the schema and value index, unless unchanged and not
    ``force``.

    Args:
        schema: the table's schema name.
        table: the table's name.
        force: rewrite even when the state is unchanged.
        state: the table's ``table_states`` row when the caller has it (else it is read).
        part: ``(k, n)``: of a table indexed in n parts by several workers
            (sql/incremental/027-reindex-parts.sql), write the cell values of part k
            (``_cell_values.in_part``); part 0 also writes the catalog rows, with the data
            state NULL (``nl2sql._reindex_claim`` records it when every part is done), and
            deletes the values gone. ``WHOLE`` (0, 1): the whole table.

    Returns:
        ``{"table": "schema.table", "skipped": True}`` when unchanged; else ``table``,
        ``skipped`` (False), ``columns``, ``values``, ``values_embedded``, ``values_reused``,
        ``columns_partial``, ``fks``, ``rows`` (the statistics' row estimate, None for a view
        or a table never analyzed), ``seconds`` and ``embed_seconds`` (of it, embedding); of a
        part, also ``part`` (k) and ``data_state``, and the catalog counts of part 0 only.

    Raises:
        ConfigError: a stored setting is invalid.
        EmbeddingError: the embedding model is missing.
        plpy.SPIError: the table cannot be read (e.g. dropped meanwhile).
    """
    st = get_settings(plpy)
    if state is None:
        state = state_of(plpy, schema, table, st)
    state = _with_shard_state(plpy, schema, table, state)
    if not needs_reindex(state, force):
        return {"table": f"{schema}.{table}", "skipped": True}
    t0 = time.perf_counter()
    cat = read_released(plpy, schema, table, st, state)
    if cat is None:
        return {"table": f"{schema}.{table}", "skipped": True, "gone": True}
    progress = (
        spi.query(plpy, "SELECT current_setting('nl2sql.progress', true) AS p")[0]["p"] == "on"
    )
    rows_est = None if state["rows_est"] is None else int(state["rows_est"])
    if part[0] == 0:
        _write_catalog(plpy, schema, table, cat, rows_est, state, part)
    pairs = [(c["name"], v) for c in cat["columns"] for v in c["values"]]
    wrote = write_values(plpy, schema, table, pairs, progress, part)
    out = {
        "table": f"{schema}.{table}",
        "skipped": False,
        "columns": len(cat["columns"]),
        "values": wrote["values"],  # of this part
        "values_embedded": wrote["values_embedded"],
        "values_reused": wrote["values_reused"],
        "embed_seconds": wrote["embed_seconds"],
        "columns_partial": sum(1 for c in cat["columns"] if c["complete"] is False),
        "fks": len(cat["fks"]),
        "rows": rows_est,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    if part != WHOLE:
        out.update(part=part[0], data_state=state["data_state"])
        if part[0] > 0:
            out.update(columns=0, columns_partial=0, fks=0)
    return out


def _write_catalog(
    plpy, schema: str, table: str, cat: dict, rows_est: int | None, state: dict, part: tuple
) -> None:
    """Rewrite the table's ``schema_table``, ``schema_column`` and ``schema_fk`` rows (the data
    state NULL for a table indexed in parts: recorded when all parts are done)."""
    if part != WHOLE:
        state = dict(state, data_state=None)
    _write_table_row(plpy, schema, table, cat["comment"], rows_est, state)
    for index_table in ("schema_column", "schema_fk"):  # rewritten whole below
        spi.query(
            plpy,
            f"DELETE FROM nl2sql.{index_table} WHERE schema_name = $1 AND table_name = $2",
            [schema, table],
            ["name", "name"],
        )
    _write_columns(plpy, schema, table, cat["columns"])
    _write_fks(plpy, schema, table, cat["fks"])


class _Release(Exception):
    """Raised inside the read's subtransaction to roll it back once the table was read."""


def read_released(plpy, schema: str, table: str, st, state: dict) -> dict | None:
    """``read_table`` in a subtransaction rolled back once read: the lock reading took on the
    user's table (AccessShareLock) goes with it, so a concurrent ALTER TABLE waits at most for
    this one table's read, not for the reindex to commit (docs/indexing.md, "Locks").

    Args:
        schema, table: the table.
        st: the settings.
        state: the table's ``table_states`` row.

    Returns:
        ``read_table``'s dict; None when the table (or a column) was dropped or renamed since
        the reindex listed it (the DDL event trigger has queued it for the next reindex).

    Raises:
        plpy.SPIError: reading failed otherwise (e.g. a privilege revoked meanwhile).
    """
    got: dict = {}
    try:
        with plpy.subtransaction():
            got["cat"] = read_table(plpy, schema, table, st, state)
            raise _Release()
    except _Release:
        pass
    except plpy.SPIError as e:
        if getattr(e, "sqlstate", None) not in GONE_SQLSTATES:
            raise
        return None
    return got["cat"]


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
    samples and value-index counts (``read_table``'s columns)."""
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
    """Insert the table's ``nl2sql.schema_fk`` rows (``read_table``'s foreign keys)."""
    spi.query(
        plpy,
        "INSERT INTO nl2sql.schema_fk (schema_name, table_name, constraint_name, columns, "
        "ref_schema, ref_table, ref_columns) SELECT $1, $2, x.name, x.cols, x.ref_schema, "
        "x.ref_table, x.ref_cols FROM json_to_recordset($3::json) AS x(name name, cols name[], "
        "ref_schema name, ref_table name, ref_cols name[])",
        [schema, table, json.dumps(fks)],
        ["name", "name", "text"],
    )
