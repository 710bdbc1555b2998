"""The vectors of the value index and of the phrases looked up in it: the static table
(``static``, setting ``value_embedding = 'static'``) or the index's embedding model
(``'model'``), whichever embedded the value index (``index_model.VALUE_KEY``; the door sets it
per call). Values are compared only with phrases embedded the same way."""

from __future__ import annotations

from concurrent.futures import Future

from . import encode, static

__all__ = ["configure", "current", "dimensions", "embed_values", "embed_values_async"]

STATIC, MODEL = "static", "model"  # the setting value_embedding's values
_CURRENT: list[str | None] = [None]  # static.NAME, or None: the index's embedding model


def configure(name: str | None) -> None:
    """Choose how this process embeds values and value lookups.

    Args:
        name: ``static.NAME`` (the static table), or None / "" (the index's embedding model).
    """
    _CURRENT[0] = static.NAME if name == static.NAME else None


def current() -> str | None:
    """The value embedder configured now.

    Returns:
        ``static.NAME``, or None for the index's embedding model.
    """
    return _CURRENT[0]


def _static() -> static.StaticEmbedder:
    fp32 = encode.onnx_path("fp32")
    return static.load(fp32, encode.model_dir(), lambda: encode.fp32_session())


def dimensions(model_dims: int) -> int:
    """The value index's dimensions for the configured embedder.

    Args:
        model_dims: the embedding model's dimensions.

    Returns:
        ``static.DIM`` for the static table, else ``model_dims``.
    """
    return static.DIM if _CURRENT[0] == static.NAME else model_dims


def embed_values(texts: list[str], bulk: bool = False) -> list[list[float]]:
    """Embed cell values or the phrases looked up among them.

    Args:
        texts: the texts.
        bulk: the indexer's call (the model's multi-threaded encoder, no cache).

    Returns:
        One unit vector (list of floats, ``dimensions()`` long) per text, in input order.

    Raises:
        EmbeddingError: the model files are missing.
    """
    if not texts:
        return []
    if _CURRENT[0] == static.NAME:
        return _static().encode(texts).tolist()
    return encode.embed(texts, cache=not bulk, bulk=bulk)


def embed_values_async(texts: list[str]) -> Future:
    """``embed_values(texts)`` as a Future: done at once with the static table (microseconds a
    phrase), else ``encode.embed_async``.

    Args:
        texts: the phrases.

    Returns:
        A Future whose ``.result()`` is the vectors or raises the embedding's exception.
    """
    if _CURRENT[0] != static.NAME:
        return encode.embed_async(texts)
    return encode.done_now(embed_values, texts)
