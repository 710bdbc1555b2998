"""Embeddings from an OpenAI-compatible ``/v1/embeddings`` endpoint (a row of
``nl2sql.embedding_model``): batched, ``concurrency`` requests at once, all under one overall
deadline and cancel (docs/internals/net.md), every reply checked before a vector is kept
(docs/embedding-models.md)."""

from __future__ import annotations

import math
import time
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass

from ..core import spi
from ..core.errors import ConfigError, DeadlineExceeded, EmbeddingError
from ..core.redaction import env_secrets, redact, url_secrets
from ..core.types import ModelConfig
from ..net import deadline as net_deadline

__all__ = ["LOCAL", "EmbeddingModel", "embed", "load"]

LOCAL = "local"  # setting embedding_model: the in-process ONNX all-MiniLM-L6-v2
MAX_DIMENSIONS = 4000  # halfvec's HNSW limit (pgvector); the value index is halfvec
WAIT_SLICE_S = 0.2  # how often the batches' waiter looks at the overall deadline


@dataclass(frozen=True)
class EmbeddingModel:
    """One row of ``nl2sql.embedding_model``."""

    name: str
    base_url: str
    model: str
    dimensions: int
    api_key_env: str | None = None
    batch_size: int = 64  # texts per request
    concurrency: int = 1  # requests in flight at once
    timeout_s: float = 30.0  # one request's deadline (its retries included)
    send_dimensions: bool = False  # send ``dimensions`` (OpenAI text-embedding-3 shortening)
    max_retries: int = 1

    @property
    def identity(self) -> str:
        """What the index records: the vectors of two models with one identity are comparable.

        Returns:
            ``"<model> (<n> dimensions) at <base_url>"``.
        """
        return f"{self.model} ({self.dimensions} dimensions) at {self.base_url}"

    def as_model(self) -> ModelConfig:
        """The endpoint as ``model.openai_call`` takes it.

        Returns:
            A ``ModelConfig`` with this model's URL, id, key variable, timeout and retries.
        """
        return ModelConfig(
            name=self.name,
            model=self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
        )


def load(plpy, name: str) -> EmbeddingModel:
    """Read a row of ``nl2sql.embedding_model``.

    Args:
        plpy: the PL/Python module (SPI access).
        name: the row's name (setting ``embedding_model``).

    Returns:
        The ``EmbeddingModel``.

    Raises:
        ConfigError: no row has that name (the message says how to add one).
    """
    rows = spi.query(
        plpy,
        "SELECT name, base_url, model, dimensions, api_key_env, batch_size, concurrency, "
        "timeout_s::float8 AS timeout_s, send_dimensions FROM nl2sql.embedding_model "
        "WHERE name = $1",
        [name],
        ["text"],
    )
    if not rows:
        raise ConfigError(
            f"nl2sql: no embedding model named {name!r}; add it with SELECT "
            f"nl2sql.add_embedding_model({name!r}, base_url => 'http://host:8080/v1', model => "
            "'...', dimensions => 768), or SELECT nl2sql.set_setting('embedding_model', 'local')"
        )
    return EmbeddingModel(**rows[0])


def embed(cfg: EmbeddingModel, texts: list[str]) -> list[list[float]]:
    """Embed texts at the endpoint: ``batch_size`` texts a request, ``concurrency`` at once,
    each request under ``timeout_s``, the whole call under one overall deadline of ``timeout_s``
    per round of ``concurrency`` requests, and the backend's cancel point (``net.deadline``).

    Args:
        cfg: the embedding model.
        texts: the texts (one or more).

    Returns:
        One list of ``cfg.dimensions`` floats per text, L2-normalised, in input order.

    Raises:
        EmbeddingError: the endpoint failed, timed out or answered out of shape (count,
            dimension, non-numbers, not JSON); the message names it and masks secrets.
    """
    what = f"embedding model {cfg.name!r} at {cfg.base_url}"
    batches = [texts[i : i + cfg.batch_size] for i in range(0, len(texts), cfg.batch_size)]
    try:
        rounds = -(-len(batches) // max(1, cfg.concurrency))
        got = net_deadline.run(lambda d: _all(cfg, batches, d), cfg.timeout_s * rounds, what)
    except EmbeddingError:
        raise
    except DeadlineExceeded as e:
        raise EmbeddingError(
            f"nl2sql: {e}; raise timeout_s with nl2sql.add_embedding_model or check the endpoint"
        ) from None
    except Exception as e:  # noqa: BLE001 - the openai client's errors, masked, one message
        net_deadline.raise_cancel(e)
        secrets = env_secrets([cfg.api_key_env]) + url_secrets(cfg.base_url)
        raise EmbeddingError(redact(_failure(what, e), secrets)) from None
    return [v for b in got for v in b]


def _failure(what: str, e: Exception) -> str:
    """A failed request in words: the HTTP status and the endpoint's own error body (OpenAI's
    ``{"error": {"message"}}``, TEI's flat ``{"error", "error_type"}``) with what to do."""
    status = getattr(e, "status_code", None)
    if status is None:
        return f"nl2sql: {what} failed: {type(e).__name__}: {e}"[:600]
    body = getattr(e, "body", None)
    said = body.get("message", body.get("error", body)) if isinstance(body, dict) else body
    fix = {
        401: "check the key in the variable api_key_env names",
        404: "check base_url (it ends in /v1) and that the server serves the model",
        413: "lower batch_size with nl2sql.add_embedding_model (TEI takes 32 by default)",
    }.get(status, "check the endpoint's log")
    return f"nl2sql: {what} refused the request: HTTP {status}: {str(said)[:300]}; {fix}"


def _all(cfg: EmbeddingModel, batches: list[list[str]], d) -> list[list[list[float]]]:
    """Send the batches, ``concurrency`` at a time on call threads of one group; expire them
    all when ``d`` (the overall deadline, expired on cancel) ends first."""
    group, out, pending = net_deadline.Group(), [None] * len(batches), {}
    todo = list(enumerate(batches))
    try:
        while todo or pending:
            while todo and len(pending) < max(1, cfg.concurrency):
                i, b = todo.pop(0)
                pending[net_deadline.spawn(_one, cfg, b, d.at, group=group)] = i
            done, _ = wait(list(pending), timeout=WAIT_SLICE_S, return_when=FIRST_COMPLETED)
            if d.expired or d.left() <= 0:
                raise d.error()
            for f in done:
                out[pending.pop(f)] = f.result()  # one batch's error ends the call
    except BaseException:
        group.expire()  # the batches still in flight stop reading now
        raise
    return out


def _one(cfg: EmbeddingModel, texts: list[str], at: float) -> list[list[float]]:
    """One request, its deadline the overall one's time left; its reply checked."""
    from ..model import openai_call  # heavy (openai, httpx): only where an endpoint is used

    left = min(cfg.timeout_s, at - time.monotonic())
    if left <= 0:
        raise DeadlineExceeded(f"embedding model {cfg.name!r}: no time left for a request")
    dims = cfg.dimensions if cfg.send_dimensions else None
    reply = openai_call.embed_here(cfg.as_model(), texts, left, dims)
    return check(cfg, reply, len(texts))


def check(cfg: EmbeddingModel, reply: object, n: int) -> list[list[float]]:
    """Check an ``/embeddings`` reply and put its vectors in input order.

    Args:
        cfg: the model (its name and ``dimensions``).
        reply: the reply's JSON (``{"data": [{"index": i, "embedding": [...]}, ...]}``).
        n: the number of inputs sent.

    Returns:
        ``n`` vectors of ``cfg.dimensions`` floats, L2-normalised, in input order.

    Raises:
        EmbeddingError: not that shape, another count, index or dimension, a non-finite
            number or a zero vector; the message says what was received.
    """
    where = f"nl2sql: embedding model {cfg.name!r} at {cfg.base_url}"
    data = reply.get("data") if isinstance(reply, dict) else None
    if not isinstance(data, list):
        seen = str(reply)[:200]
        raise EmbeddingError(
            f"{where} answered without a data list (not OpenAI's /embeddings "
            f"shape): {seen!r}; check base_url (it ends in /v1) and model"
        )
    if len(data) != n:
        raise EmbeddingError(f"{where} returned {len(data)} embeddings for {n} inputs")
    out: list = [None] * n
    for pos, item in enumerate(data):
        i = item.get("index", pos) if isinstance(item, dict) else None
        vec = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(i, int) or not 0 <= i < n or out[i] is not None:
            raise EmbeddingError(f"{where} returned a wrong or repeated index {i!r}")
        out[i] = _vector(where, vec, cfg.dimensions)
    return out


def _vector(where: str, vec: object, dims: int) -> list[float]:
    """One embedding checked (a list of ``dims`` finite numbers, not all zero), unit length."""
    if not isinstance(vec, list):
        raise EmbeddingError(
            f"{where} returned an embedding that is not a list of numbers "
            f"({type(vec).__name__}); encoding_format float was asked"
        )
    if len(vec) != dims:
        raise EmbeddingError(
            f"{where} returned {len(vec)} dimensions, the model is declared with {dims}; "
            "fix dimensions with nl2sql.add_embedding_model and reindex with force => true"
        )
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vec):
        raise EmbeddingError(f"{where} returned an embedding holding non-numbers")
    norm = math.sqrt(math.fsum(x * x for x in vec))
    if not math.isfinite(norm) or norm == 0.0:
        raise EmbeddingError(f"{where} returned an embedding with NaN, infinite or all-zero values")
    return [x / norm for x in vec]
