"""Which embedding model embedded the index (settings ``embedding_model`` and
``embedding_precision``): recorded in ``nl2sql.setting`` under ``KEY`` (its identity) and
``ENDPOINT_KEY`` (the ``nl2sql.embedding_model`` row, for an endpoint) — not settings: dumped
and restored with the user's rows — used for every question so that vectors of one model are
never compared with another's, and changed only by ``nl2sql.reindex(force => true)``, which
re-embeds everything and makes the vector columns follow the model's dimensions
(docs/embedding-models.md, docs/operations.md "Embedding precision")."""

from __future__ import annotations

from ..core import spi
from ..core.errors import ConfigError, EmbeddingError
from ..core.settings import get_settings
from . import _columns, encode, remote, static, value_vectors

KEY = "_index_embedding_model"  # a leading underscore: no setting may have this name
ENDPOINT_KEY = "_index_embedding_endpoint"  # the nl2sql.embedding_model row (none: local)
# how the value index is embedded: static.NAME (setting value_embedding = 'static'), or ''
# (the model above); not recorded and values present: '' (the only way before the setting)
VALUE_KEY = "_index_value_embedding"
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


def recorded(plpy, key: str = KEY) -> str | None:
    """What the index records of how it was embedded.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        key: ``KEY`` (the model), ``ENDPOINT_KEY`` or ``VALUE_KEY`` (the value index's embedder).

    Returns:
        The recorded text (for ``KEY`` a value of ``encode.MODEL_NAMES`` or an endpoint's
        identity), or None when none is recorded.
    """
    rows = spi.query(plpy, "SELECT value FROM nl2sql.setting WHERE key = $1", [key], ["text"])
    return rows[0]["value"] if rows else None


def _has_vectors(plpy) -> bool:
    """Whether any table holds an embedding (then an unrecorded index is the fp32 model's)."""
    sql = " UNION ALL ".join(
        f"(SELECT 1 FROM {t} WHERE embedding IS NOT NULL LIMIT 1)" for t in _TABLES
    )
    return bool(spi.query(plpy, sql))


def _record(plpy, name: str, cfg: remote.EmbeddingModel | None) -> None:
    spi.query(
        plpy,
        "INSERT INTO nl2sql.setting (key, value) VALUES ($1, $2), ($3, $4), ($5, $6) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        [
            KEY,
            name,
            ENDPOINT_KEY,
            cfg.name if cfg else "",
            VALUE_KEY,
            value_vectors.current() or "",
        ],
        ["text"] * 6,
    )


def _prepare_values(plpy, rewrite: bool) -> None:
    """Choose the value index's embedder for a reindex: the recorded one, or the setting
    ``value_embedding``'s when the value index is empty or ``rewrite`` (a forced reindex, or a
    new model), emptying the value index for it (the reindex re-embeds every value)."""
    want = static.NAME if get_settings(plpy).value_embedding == value_vectors.STATIC else ""
    got = recorded(plpy, VALUE_KEY)
    empty = not spi.query(plpy, "SELECT 1 FROM nl2sql.cell_value LIMIT 1")
    if got is None:
        got = want if empty else ""
    if got != want and (rewrite or empty):
        spi.query(plpy, "DELETE FROM nl2sql.cell_value")
        got = want
    value_vectors.configure(got)


def _wanted(plpy, prec: str) -> tuple[str, remote.EmbeddingModel | None]:
    """The identity and endpoint (None: local) the settings ask for."""
    name = get_settings(plpy).embedding_model
    if name == remote.LOCAL:
        return encode.MODEL_NAMES[prec], None
    cfg = remote.load(plpy, name)
    return cfg.identity, cfg


def prepare_reindex(plpy, wanted: str, force: bool) -> bool:
    """Before a reindex: embed with the recorded model; on a forced reindex whose settings ask
    another (``embedding_model``, ``embedding_precision``), empty the value index and the
    catalog's vectors (the reindex rewrites them), make the vector columns follow the new
    model's dimensions, re-embed the examples and curated rows, and record the new model.

    Args:
        wanted: the setting ``embedding_precision`` (the local model's file).
        force: the reindex rewrites every table.

    Returns:
        True when the model changed (everything is re-embedded).

    Raises:
        EmbeddingError: the settings differ from the index's model and ``force`` is false.
        ConfigError: ``embedding_model`` names no row of ``nl2sql.embedding_model``.
    """
    name = recorded(plpy)
    want_name, cfg = _wanted(plpy, wanted)
    if name is None and not _has_vectors(plpy):
        name = want_name  # an empty index: the settings decide
    name = name or encode.MODEL_NAMES["fp32"]
    encode.set_precision(wanted)
    dims = cfg.dimensions if cfg else encode.DIM
    if name == want_name:
        encode.set_model(cfg)
        _prepare_values(plpy, force)
        # an empty index (its first reindex) takes the model's dimensions; else they agree
        if _columns.follow(plpy, dims, value_vectors.dimensions(dims)):
            _columns.restore_not_null(plpy)
        _record(plpy, name, cfg)
        return False
    if not force:
        raise EmbeddingError(
            f"nl2sql: the index was embedded with {name} but the settings ask for "
            f"{want_name}; run SELECT nl2sql.reindex(force => true) to re-embed everything "
            "with it, or set embedding_model and embedding_precision back to keep the index"
        )
    encode.set_model(cfg)
    # embedded first: an endpoint's failure changes nothing (and the transaction undoes it all)
    kept = {t: spi.query(plpy, f"SELECT id, {text} AS t FROM {t}") for t, text in KEPT.items()}
    kept = {t: (r, encode.embed([x["t"] for x in r], cache=False)) for t, r in kept.items()}
    spi.query(plpy, "DELETE FROM nl2sql.cell_value")
    spi.query(plpy, "UPDATE nl2sql.schema_column SET embedding = NULL")
    spi.query(plpy, "UPDATE nl2sql.example SET embedding = NULL")  # index_examples embeds them
    _prepare_values(plpy, True)
    _columns.follow(plpy, dims, value_vectors.dimensions(dims))
    for table, (rows, vecs) in kept.items():
        if rows:
            spi.query(
                plpy,
                f"UPDATE {table} SET embedding = e::vector "
                "FROM unnest($1::int8[], $2::text[]) AS u(i, e) WHERE id = u.i",
                [[r["id"] for r in rows], [encode.to_pgvector(v) for v in vecs]],
                ["int8[]", "text[]"],
            )
    _columns.restore_not_null(plpy)
    _record(plpy, want_name, cfg)
    return True


def configure(
    plpy, name: str | None, endpoint: str | None, prec: str, values: str | None = None
) -> None:
    """Point this process's embeddings at the index's model (the door, per call): questions are
    embedded by the model that embedded the index, or refused when its row changed since; value
    lookups the way the value index was embedded.

    Args:
        name: the recorded identity (``KEY``), None when none is recorded.
        endpoint: the recorded ``nl2sql.embedding_model`` row (``ENDPOINT_KEY``), None: local.
        prec: the setting ``embedding_precision`` (used when nothing is recorded).
        values: the recorded value embedder (``VALUE_KEY``): ``static.NAME``, or None / "".
    """
    value_vectors.configure(values)
    encode.set_precision(precision_of(name) if name else prec)
    if not endpoint:
        encode.set_model(None)
        return
    try:
        cfg = remote.load(plpy, endpoint)
    except ConfigError as e:
        encode.set_model(EmbeddingError(f"{e} (the index was embedded with {name})"))
        return
    if cfg.identity != name:
        cfg = EmbeddingError(
            f"nl2sql: the index was embedded with {name}, but embedding model {endpoint!r} is "
            f"now {cfg.identity}; a question embedded by one is never compared with vectors "
            "of the other: run SELECT nl2sql.reindex(force => true), or add the model back"
        )
    encode.set_model(cfg)


def mismatch(plpy, wanted: str) -> str | None:
    """Say (for doctor) when the settings differ from the index's model.

    Args:
        wanted: the setting ``embedding_precision``.

    Returns:
        A sentence naming both and what to run, or None when they agree.
    """
    name = recorded(plpy) or (encode.MODEL_NAMES["fp32"] if _has_vectors(plpy) else None)
    try:
        want_name = _wanted(plpy, wanted)[0]
    except ConfigError as e:
        return str(e)
    if name is None or name == want_name:
        return None
    return (
        f"the index was embedded with {name} (questions use it); the settings ask for "
        f"{want_name}, which takes effect at SELECT nl2sql.reindex(force => true)"
    )


def dimensions(plpy) -> int:
    """The dimensions of the embedding model's vector columns now (``_columns.dimensions``;
    the value index's may differ: ``value_vectors``).

    Args:
        plpy: the PL/Python module (SPI access).

    Returns:
        n of the catalog's ``vector(n)``.
    """
    return _columns.dimensions(plpy)


def configure_recorded(plpy) -> None:
    """``configure`` from the stored record (a caller that is no entry point: ``doctor()``).

    Args:
        plpy: the PL/Python module (SPI access).
    """
    rows = spi.query(
        plpy,
        "SELECT key, value FROM nl2sql.setting WHERE key = ANY($1)",
        [[KEY, ENDPOINT_KEY, VALUE_KEY]],
        ["text[]"],
    )
    got = {r["key"]: r["value"] for r in rows}
    prec = get_settings(plpy).embedding_precision
    configure(plpy, got.get(KEY), got.get(ENDPOINT_KEY), prec, got.get(VALUE_KEY))
