"""``POST /v1/embeddings`` on the loopback server: vectors that are NOT A MODEL'S (a hashed bag of
character trigrams and words, unit length: texts that share words are near, nothing more), in
the documented reply shapes of OpenAI's ``/v1/embeddings``, Ollama's OpenAI compatibility and
Hugging Face TEI's OpenAI route, and the faults a test asks for (docs/embedding-models.md).

Script it with ``set_embedding(llm, model, dims, profile, fault)`` or ``POST /_embedding``
(``{"model", "dims", "profile", "fault"}``); ``llm.embedding_requests`` lists ``(model, number
of inputs)`` per request received. Profiles: ``openai`` (``object: list``, each item
``{"object": "embedding", "index", "embedding"}``, ``usage``; ``encoding_format: base64`` gets
little-endian float32 in base64), ``ollama`` (the same shape, ``dimensions`` ignored), ``tei``
(refuses more than ``TEI_MAX_BATCH`` inputs with 413 and TEI's flat error body
``{"error", "error_type"}``). Faults: ``count`` (one embedding fewer), ``dimension`` (one number
fewer), ``nan`` (a NaN, which JSON parsers accept), ``error`` (500 with an error body),
``html`` (200 with an HTML page), ``endless`` (a body that never ends), ``hang`` (no answer),
``reversed`` (data in reverse order, indices right: not a fault), ``string`` (the embedding as
a base64 string though floats were asked)."""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from typing import Any

__all__ = ["FAULTS", "PROFILES", "embed_text", "reply", "send_fault", "set_embedding"]

PROFILES = ("openai", "ollama", "tei")
FAULTS = ("count", "dimension", "nan", "error", "html", "endless", "hang", "reversed", "string")
TEI_MAX_BATCH = 32  # TEI's --max-client-batch-size default


def set_embedding(
    llm, model: str, dims: int = 384, profile: str = "openai", fault: str | None = None
) -> None:
    """Serve ``model`` at ``/v1/embeddings`` with ``dims`` dimensions, in ``profile``'s shape.

    Args:
        llm: the ``LoopbackLLM``.
        model: the model id requests name.
        dims: the vectors' length.
        profile: one of ``PROFILES``.
        fault: one of ``FAULTS``, or None for well-formed replies.

    Raises:
        ValueError: an unknown profile or fault, or dims < 1.
    """
    if profile not in PROFILES or (fault is not None and fault not in FAULTS) or dims < 1:
        raise ValueError(f"embedding: profile {profile!r}, fault {fault!r}, dims {dims}")
    llm.__dict__.setdefault("embedding_models", {})[model] = (int(dims), profile, fault)


def embed_text(text: str, dims: int) -> list[float]:
    """The loopback's vector of a text (not a model's): hashed trigrams and words, unit length.

    Args:
        text: the text.
        dims: the vector's length.

    Returns:
        ``dims`` floats of unit length.
    """
    v = [0.0] * dims
    low = f"  {text.lower()}  "
    grams = [low[i : i + 3] for i in range(len(low) - 2)] + text.lower().split()
    for g in grams:
        h = hashlib.blake2b(g.encode(), digest_size=8).digest()
        v[int.from_bytes(h[:4], "little") % dims] += 1.0 if h[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


def reply(llm, body: Any) -> tuple[int, Any]:
    """The reply to one ``POST /v1/embeddings``.

    Args:
        llm: the ``LoopbackLLM`` (its ``embedding_models``).
        body: the request's JSON.

    Returns:
        ``(status, obj)``: obj is the JSON to send, or a str ``"html"``, ``"endless"`` or
        ``"hang"`` for a fault the handler sends itself.
    """
    models = llm.__dict__.get("embedding_models", {})
    model = body.get("model") if isinstance(body, dict) else None
    if model not in models:
        return 404, {"error": {"message": f"model {model!r} not found", "type": "not_found"}}
    dims, profile, fault = models[model]
    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else texts
    llm.__dict__.setdefault("embedding_requests", []).append((model, len(texts or ())))
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return 400, {"error": {"message": "input must be a string or a list of strings"}}
    if profile == "tei" and len(texts) > TEI_MAX_BATCH:
        return 413, {
            "error": f"batch size {len(texts)} > maximum allowed batch size {TEI_MAX_BATCH}",
            "error_type": "Validation",
        }
    if profile == "openai" and body.get("dimensions"):
        dims = int(body["dimensions"])  # text-embedding-3's shortening
    if fault in ("html", "endless", "hang"):
        return 200, fault
    if fault == "error":
        return 500, {"error": {"message": "the model failed", "type": "server_error"}}
    b64 = body.get("encoding_format") == "base64" or fault == "string"
    data = [_item(i, embed_text(t, dims), b64) for i, t in enumerate(texts)]
    data = _faulty(data, fault)
    usage = {"prompt_tokens": sum(len(t.split()) for t in texts)}
    usage["total_tokens"] = usage["prompt_tokens"]
    return 200, {"object": "list", "data": data, "model": model, "usage": usage}


def _item(i: int, vec: list[float], b64: bool) -> dict:
    if b64:
        packed = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
        return {"object": "embedding", "index": i, "embedding": packed}
    return {"object": "embedding", "index": i, "embedding": vec}


def _faulty(data: list[dict], fault: str | None) -> list[dict]:
    if fault == "count":
        return data[:-1]
    if fault == "dimension":
        data[0]["embedding"] = data[0]["embedding"][:-1]
    elif fault == "nan":
        data[0]["embedding"][0] = float("nan")
    elif fault == "reversed":
        return data[::-1]
    return data


def send_fault(handler, fault: str, stop) -> None:
    """Send a fault that is no JSON reply: ``hang`` (nothing until the server stops), ``html``
    (a 200 HTML page), ``endless`` (a chunked body that never ends).

    Args:
        handler: the request's ``BaseHTTPRequestHandler``.
        fault: ``"hang"``, ``"html"`` or ``"endless"``.
        stop: the server's stop event.
    """
    if fault == "hang":
        stop.wait()
        return
    handler.close_connection = True
    handler.send_response(200)
    if fault == "html":
        page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
        handler.send_header("Content-Type", "text/html")
        handler.send_header("Content-Length", str(len(page)))
        handler.end_headers()
        handler.wfile.write(page)
        return
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    while not stop.wait(0.05):  # a chunk every 50 ms, never the last
        try:
            handler.wfile.write(b"2\r\n[ \r\n")
            handler.wfile.flush()
        except OSError:  # the client closed it (its deadline)
            return
