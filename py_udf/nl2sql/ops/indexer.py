"""The reindex (``nl2sql.reindex()``) and its units for the ``nl2sql-index`` CLI
(docs/internals/ops.md "The reindex")."""

from __future__ import annotations

import time

from ..core import query_log, spi
from ..core.settings import get_settings
from ..embedding import index_model
from . import _ddl_queue as ddl_queue
from .example_store import index_examples
from .index_maintenance import begin_bulk, ensure_vector_index, tidy_indexes
from .table_index import index_table
from .table_state import needs_reindex, table_states


def reindex(plpy, schemas: list[str] | None = None, force: bool = False) -> dict:
    """Index the catalog of ``schemas``, their cell values and the example pool (incremental
    unless ``force``).

    Args:
        schemas: schema names; None or empty uses setting ``schemas``.
        force: rewrite every table even when its fingerprint is unchanged.

    Returns:
        Counts: ``tables_indexed``, ``tables_skipped``, ``tables_dropped``, ``columns``,
        ``columns_partial``, ``values``, ``values_embedded``, ``values_reused``, ``fks``,
        ``examples_added``, ``examples_embedded``, ``examples_total`` (and
        ``trigram_pending_pages``, ``tables_analyzed`` when tidied), ``vector_index_built``,
        ``query_log_pruned`` (``prune_log``), ``seconds``.

    Raises:
        ConfigError: a stored setting is invalid.
        EmbeddingError: the embedding model is missing, or setting ``embedding_precision``
            differs from the index's model and ``force`` is false.
    """
    t0 = time.perf_counter()
    st = get_settings(plpy)
    # a changed embedding_precision: refused unless forced, then everything is re-embedded
    index_model.prepare_reindex(plpy, st.embedding_precision, force)
    states = table_states(plpy, schemas, st=st)
    bulk = any(needs_reindex(x, force) for x in states) and begin_bulk(plpy)
    out = sum_table_counts(
        index_table(plpy, x["schema"], x["table"], force=force, state=x) for x in states
    )
    out["tables_dropped"] = drop_missing(plpy, [(x["schema"], x["table"]) for x in states], schemas)
    out.update(index_examples(plpy))
    out["vector_index_built"] = ensure_vector_index(plpy) if bulk else False
    if _changed(out):
        out.update(tidy_indexes(plpy))
    out["query_log_pruned"] = prune_log(plpy, st.query_log_retention_days)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def changed_tables(
    plpy, schemas: list[str] | None, force: bool = False
) -> list[tuple[str, str, bool]]:
    """List the covered tables with whether each must be re-read (the CLI's first step).

    Args:
        schemas: schema names; None or empty uses setting ``schemas``.
        force: count every table as changed.

    Returns:
        ``(schema, table, changed)`` triples, sorted (``table_states``, ``needs_reindex``).

    Raises:
        ConfigError: a stored setting is invalid.
        EmbeddingError: ``embedding_precision`` differs from the index's model, not ``force``.
    """
    st = get_settings(plpy)
    index_model.prepare_reindex(plpy, st.embedding_precision, force)  # as reindex does
    states = table_states(plpy, schemas, st=st)
    return [(s["schema"], s["table"], needs_reindex(s, force)) for s in states]


def finish(
    plpy, schemas: list[str] | None, kept: list[tuple[str, str]], tables_changed: bool = True
) -> dict:
    """End a reindex: ``drop_missing``, ``index_examples``, ``ensure_vector_index`` and, when
    tables changed or the counts show a change, ``tidy_indexes``.

    Args:
        schemas: the covered schema names; None or empty uses setting ``schemas``.
        kept: the ``(schema, table)`` pairs covered now.
        tables_changed: whether any table was re-indexed.

    Returns:
        Counts: ``tables_dropped``, ``index_examples``'s, ``vector_index_built`` (and
        ``tidy_indexes``'s when tidied), ``query_log_pruned``.

    Raises:
        ConfigError: a stored setting is invalid.
        EmbeddingError: the embedding model is missing.
    """
    out = {"tables_dropped": drop_missing(plpy, kept, schemas)}
    out.update(index_examples(plpy))
    out["vector_index_built"] = ensure_vector_index(plpy)
    if tables_changed or _changed(out):
        out.update(tidy_indexes(plpy))
    out["query_log_pruned"] = prune_log(plpy, get_settings(plpy).query_log_retention_days)
    return out


def prune_log(plpy, days: int) -> int | None:
    """The reindex's last step: the query log's rows older than ``days`` days deleted
    (``query_log.prune``; setting ``query_log_retention_days``, 0 keeps them).

    Args:
        days: the retention in days.

    Returns:
        How many rows went; None when the reindexing role may not delete from the log (the
        reindex goes on; ``nl2sql.prune_query_log()`` as the owner does it).
    """
    try:
        with plpy.subtransaction():
            return query_log.prune(plpy, days)["deleted"]
    except plpy.SPIError as e:
        if getattr(e, "sqlstate", None) != "42501":  # insufficient_privilege
            raise
        return None


def drop_missing(plpy, keep: list[tuple[str, str]], schemas: list[str] | None) -> int:
    """Remove index rows of tables in the covered schemas that are no longer covered.

    Args:
        keep: the ``(schema, table)`` pairs covered now (``table_state.plan``).
        schemas: the covered schema names; None or empty uses setting ``schemas``.

    Returns:
        How many tables were dropped from the index.
    """
    if not schemas:
        schemas = list(get_settings(plpy).schemas)
    ddl_queue.clear_uncovered(plpy, schemas, keep)
    keep_names = [f"{s}.{t}" for s, t in keep]
    res = spi.query(
        plpy,
        "DELETE FROM nl2sql.schema_table WHERE schema_name = ANY($2) "
        "AND NOT (schema_name || '.' || table_name = ANY($1)) RETURNING 1",
        [keep_names, schemas],
        ["text[]", "text[]"],
    )
    return len(res)


def sum_table_counts(results) -> dict:
    """Add up ``index_table`` results (a table indexed in parts counts once).

    Args:
        results: an iterable of ``index_table`` result dicts.

    Returns:
        Counts (``tables_indexed``, ``tables_skipped``, ``tables_queued``, and the indexed
        tables' ``columns`` … ``fks``) and their summed ``embed_seconds``.
    """
    keys = (
        "columns",
        "columns_partial",
        "values",
        "values_embedded",
        "values_reused",
        "fks",
        "embed_seconds",
    )
    out = {"tables_indexed": 0, "tables_skipped": 0, "tables_queued": 0, **dict.fromkeys(keys, 0)}
    for r in results:
        out["tables_queued"] += bool(r.get("queued"))
        if r["skipped"]:
            out["tables_skipped"] += 1
            continue
        out["tables_indexed"] += r.get("part", 0) == 0  # a table in parts counts once
        for k in keys:
            out[k] += r.get(k, 0)
    return out


def _changed(counts: dict) -> bool:
    """Whether a reindex's counts show tables indexed or dropped, or examples added or embedded."""
    return any(
        counts.get(k)
        for k in ("tables_indexed", "tables_dropped", "examples_added", "examples_embedded")
    )
