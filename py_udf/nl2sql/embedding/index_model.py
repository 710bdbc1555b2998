"""Which embedding model file embedded the index (setting ``embedding_precision``): recorded in
``nl2sql.setting`` under ``KEY`` (not a setting: dumped and restored with the user's rows),
used for every question so that vectors of one model are never compared with the other's, and
changed only by ``nl2sql.reindex(force => true)``, which re-embeds everything
(docs/operations.md "Embedding precision")."""

from __future__ import annotations

from ..core import spi
from ..core.errors import EmbeddingError
from . import encode

KEY = "_index_embedding_model"  # a leading underscore: no setting may have this name
# vectors kept outside the value index and the catalog (which a forced reindex rewrites):
# table -> the text embedded (as example_store, verified, business write them)
KEPT = {
    "nl2sql.verified_query": "masked_question",
    "nl2sql.term": "term || ': ' || definition",
    "nl2sql.instruction": "instruction",
}
_TABLES = ("nl2sql.cell_value", "nl2sql.schema_column", "nl2sql.example", *KEPT)


def precision_of(name: str | None) -> str:
    """The precision of a recorded model name.

    Args:
        name: a value of ``encode.MODEL_NAMES``, or None (nothing recorded: the fp32 model,
            the only one before the setting existed).

    Returns:
        ``"fp32"`` or ``"int8"`` (``"fp32"`` for an unknown name).
    """
    return next((p for p, n in encode.MODEL_NAMES.items() if n == name), "fp32")


def recorded(plpy) -> str | None:
    """The model name the index was embedded with.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        A value of ``encode.MODEL_NAMES``, or None when none is recorded.
    """
    rows = spi.query(plpy, f"SELECT value FROM nl2sql.setting WHERE key = '{KEY}'")
    return rows[0]["value"] if rows else None


def _has_vectors(plpy) -> bool:
    """Whether any table holds an embedding (then an unrecorded index is the fp32 model's)."""
    sql = " UNION ALL ".join(
        f"(SELECT 1 FROM {t} WHERE embedding IS NOT NULL LIMIT 1)" for t in _TABLES
    )
    return bool(spi.query(plpy, sql))


def _record(plpy, name: str) -> None:
    spi.query(
        plpy,
        "INSERT INTO nl2sql.setting (key, value) VALUES ($1, $2) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        [KEY, name],
        ["text", "text"],
    )


def prepare_reindex(plpy, wanted: str, force: bool) -> bool:
    """Before a reindex: embed with the recorded model; on a forced reindex whose setting asks
    another, empty the value index and the catalog's vectors (the reindex rewrites them),
    re-embed the examples and curated rows, and record the new model.

    Args:
        wanted: the setting ``embedding_precision``.
        force: the reindex rewrites every table.

    Returns:
        True when the model changed (everything is re-embedded).

    Raises:
        EmbeddingError: the setting differs from the index's model and ``force`` is false.
    """
    name, want_name = recorded(plpy), encode.MODEL_NAMES[wanted]
    if name is None and not _has_vectors(plpy):
        name = want_name  # an empty index: the setting decides
    name = name or encode.MODEL_NAMES["fp32"]
    if name == want_name:
        encode.set_precision(wanted)
        _record(plpy, name)
        return False
    if not force:
        raise EmbeddingError(
            f"nl2sql: the index was embedded with {name} but setting embedding_precision is "
            f"{wanted}; run SELECT nl2sql.reindex(force => true) to re-embed everything with "
            f"it, or SELECT nl2sql.set_setting('embedding_precision', "
            f"'{precision_of(name)}') to keep the index"
        )
    encode.set_precision(wanted)
    spi.query(plpy, "DELETE FROM nl2sql.cell_value")
    spi.query(plpy, "UPDATE nl2sql.schema_column SET embedding = NULL")
    spi.query(plpy, "UPDATE nl2sql.example SET embedding = NULL")  # index_examples embeds them
    for table, text in KEPT.items():
        rows = spi.query(plpy, f"SELECT id, {text} AS t FROM {table}")
        if rows:
            vecs = encode.embed([r["t"] for r in rows], cache=False)
            spi.query(
                plpy,
                f"UPDATE {table} SET embedding = e::vector "
                "FROM unnest($1::int8[], $2::text[]) AS u(i, e) WHERE id = u.i",
                [[r["id"] for r in rows], [encode.to_pgvector(v) for v in vecs]],
                ["int8[]", "text[]"],
            )
    _record(plpy, want_name)
    return True


def mismatch(plpy, wanted: str) -> str | None:
    """Say (for doctor) when the setting differs from the index's model.

    Args:
        wanted: the setting ``embedding_precision``.

    Returns:
        A sentence naming both and what to run, or None when they agree.
    """
    name = recorded(plpy) or (encode.MODEL_NAMES["fp32"] if _has_vectors(plpy) else None)
    if name is None or name == encode.MODEL_NAMES[wanted]:
        return None
    return (
        f"the index was embedded with {name} (questions use it); setting embedding_precision "
        f"= {wanted} takes effect at SELECT nl2sql.reindex(force => true)"
    )
