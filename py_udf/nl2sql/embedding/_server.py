"""The shared embedding process (one per server; OpenAI embeddings API on a Unix socket; relays
model calls): ``python -m nl2sql.embedding._server --dir DIR --postmaster-pid PID [--detach]``
(docs/internals/embedding.md "Server")."""

from __future__ import annotations

import argparse
import array
import base64
import importlib
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Literal

from ..core.errors import LogNotKept
from . import encode as embed
from . import query_log_relay  # light: psycopg is imported when a row comes

MODEL_NAME = "all-MiniLM-L6-v2"
SOCKET_NAME = "embed.sock"
PID_NAME = "embedder.pid"
LOG_NAME = "embedder.log"
MAX_INPUTS = 2048  # texts per request (the client sends at most 512)
MAX_CHARS = 100_000  # characters per text
CACHE_BELOW = 32  # requests this small use embed's cache (questions, phrases)
MAX_RELAYED = 128  # relayed model calls running at once (threads)
WATCH_S = 1.0  # how often the postmaster and the socket are checked


def _error(status: int, message: str, kind: str = "invalid_request_error"):
    from starlette.responses import (
        JSONResponse,  # web stack: imported after main's fork and pid file
    )

    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": None}}, status_code=status
    )


def _request_model():
    """The pydantic model of an embeddings request (built on first use)."""
    from pydantic import (  # web stack: imported after main's fork and pid file
        BaseModel,
        ConfigDict,
        Field,
    )

    class EmbeddingRequest(BaseModel):
        model_config = ConfigDict(extra="ignore")
        input: str | list[str] = Field(...)
        model: str = MODEL_NAME
        encoding_format: Literal["float", "base64"] = "float"

    return EmbeddingRequest


def _chat_model():
    """The pydantic model of a relayed model call (built on first use)."""
    from pydantic import (  # web stack: imported after main's fork and pid file
        BaseModel,
        ConfigDict,
        Field,
    )

    class ChatRelay(BaseModel):
        model_config = ConfigDict(extra="forbid")
        config: dict
        messages: list[dict[str, str]] = Field(..., min_length=1)
        timeout_s: float = Field(..., gt=0, le=86400)
        n: int = Field(1, ge=1, le=64)
        temperature: float | None = None

    return ChatRelay


def embed_texts(texts: list[str], model: str = MODEL_NAME) -> list[list[float]]:
    """Embed texts in this process with ``encode.embed``.

    Args:
        texts: the texts (at most ``MAX_INPUTS``).
        model: one of ``encode.MODEL_NAMES`` (its precision's model file embeds them).

    Returns:
        One list of 384 floats per text (L2-normalised), in input order.

    Raises:
        EmbeddingError: the model files are missing.
    """
    with _runs():
        prec = next(p for p, name in embed.MODEL_NAMES.items() if name == model)
        big = len(texts) >= CACHE_BELOW
        return embed.embed(texts, cache=not big, bulk=big, prec=prec)


_RUNS: list[threading.BoundedSemaphore] = []  # made on first use (NL2SQL_EMBED_THREADS read then)
_RUNS_LOCK = threading.Lock()


def _runs() -> threading.BoundedSemaphore:
    """The semaphore letting ``encode.bulk_threads()`` embedding runs at once (one per CPU).

    The web server's thread pool would otherwise run one per request (40 at once under 16
    busy backends): no faster on the CPUs there are, and ONNX Runtime's memory arena, which
    never shrinks, grows to what every run in flight needs at the busiest moment (bench/
    embedder_rss.py: +80 MB in 800 requests of 16 clients at once, in steps; docs/benchmarks.md).
    """
    with _RUNS_LOCK:
        if not _RUNS:
            _RUNS.append(threading.BoundedSemaphore(embed.bulk_threads()))
        return _RUNS[0]


def _encode_vector(vec: list[float], fmt: str):
    if fmt == "float":
        return vec
    return base64.b64encode(array.array("f", vec).tobytes()).decode("ascii")


def create_app(data_dir: Path | None = None):
    """Build the starlette application.

    Args:
        data_dir: the cluster's data directory (the query log's writer reads its
            ``postmaster.pid``); None: the working directory, where the client starts it.

    Returns:
        A ``starlette.applications.Starlette`` ASGI application.
    """
    # web stack: imported after main's fork and pid file
    from starlette.applications import Starlette
    from starlette.routing import Route

    embeddings = _embeddings_endpoint()
    chat = _chat_endpoint()
    return Starlette(
        routes=[
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/v1/models", _models, methods=["GET"]),
            Route("/nl2sql/v1/chat", chat, methods=["POST"]),
            Route("/nl2sql/v1/capabilities", _capabilities, methods=["GET"]),
            Route("/nl2sql/v1/quota", _quota_endpoint(), methods=["POST"]),
            Route("/nl2sql/v1/log", _log_endpoint(data_dir or Path.cwd()), methods=["POST"]),
        ]
    )


def _embeddings_endpoint():
    """The ``POST /v1/embeddings`` handler (OpenAI's embeddings API)."""
    # web stack: imported after main's fork and pid file
    from pydantic import ValidationError
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse

    model_cls = _request_model()

    async def embeddings(request):
        try:
            req = model_cls.model_validate_json(await request.body())
        except ValidationError as e:
            return _error(400, f"bad embeddings request: {e.errors()[0].get('msg')}")
        texts = [req.input] if isinstance(req.input, str) else list(req.input)
        problem = _embeddings_problem(texts, req.model)
        if problem:
            return _error(400, problem)
        try:
            vecs = await run_in_threadpool(embed_texts, texts, req.model)
        except Exception as e:  # noqa: BLE001 - answered as an API error, logged by the client
            return _error(
                500, f"embedding failed: {type(e).__name__}: {str(e)[:300]}", "server_error"
            )
        return JSONResponse(_embeddings_body(texts, vecs, req.encoding_format))

    return embeddings


def _embeddings_problem(texts: list[str], model: str) -> str | None:
    """Why an embeddings request is refused (count, length, another model), or None."""
    if not texts or len(texts) > MAX_INPUTS:
        return f"input must hold 1 to {MAX_INPUTS} texts"
    if any(len(t) > MAX_CHARS for t in texts):
        return f"a text is longer than {MAX_CHARS} characters"
    if model not in embed.MODEL_NAMES.values():
        return f"unknown model {model!r}; this process serves {sorted(embed.MODEL_NAMES.values())}"
    return None


def _embeddings_body(texts: list[str], vecs: list[list[float]], fmt: str) -> dict:
    """The embeddings API's answer for ``texts``' vectors (usage counted in words)."""
    n = sum(len(t.split()) for t in texts)
    return {
        "object": "list",
        "model": MODEL_NAME,
        "data": [
            {"object": "embedding", "index": i, "embedding": _encode_vector(v, fmt)}
            for i, v in enumerate(vecs)
        ],
        "usage": {"prompt_tokens": n, "total_tokens": n},
    }


def _chat_endpoint():
    """The ``POST /nl2sql/v1/chat`` handler: a backend's gated model call, relayed
    (``openai_call.relay_call``), at most ``MAX_RELAYED`` at once."""
    # web stack: imported after main's fork and pid file
    from pydantic import ValidationError
    from starlette.responses import JSONResponse

    chat_cls = _chat_model()
    limiter = []

    async def chat(request):
        import anyio  # web stack: imported after main's fork and pid file

        from ..model.openai_call import relay_call  # heavy (openai): preloaded by a thread

        try:
            req = chat_cls.model_validate_json(await request.body())
        except ValidationError as e:
            return _error(400, f"bad model call: {e.errors()[0].get('msg')}")
        if not limiter:
            limiter.append(anyio.CapacityLimiter(MAX_RELAYED))
        try:
            reply = await anyio.to_thread.run_sync(
                relay_call,
                req.config,
                req.messages,
                req.timeout_s,
                req.n,
                req.temperature,
                limiter=limiter[0],
            )
        except TypeError as e:
            return _error(400, f"bad model configuration: {e}")
        return JSONResponse(reply)

    return chat


def _quota_endpoint():
    """The ``POST /nl2sql/v1/quota`` handler: the ledger of questions in flight that lets
    sessions of one role with a quota ask at once (``model.quota.Ledger``); answered on the
    event loop, so each request is atomic."""
    from ..model.quota import Ledger  # light: no openai

    ledger = Ledger()

    async def quota(request):
        from starlette.responses import (
            JSONResponse,  # web stack: imported after main's fork and pid file
        )

        try:
            return JSONResponse(ledger.apply(json.loads(await request.body())))
        except (ValueError, TypeError, KeyError) as e:
            return _error(400, f"bad quota request: {type(e).__name__}: {e}")

    return quota


def _log_endpoint(data_dir: Path):
    """The ``POST /nl2sql/v1/log`` handler: a failed call's query log row, written on this
    process's own connection and committed at once (``query_log_relay.write_row``, in a thread:
    psycopg blocks); ``{"id"}``, else 400 (a bad row) or 503 (not written: why)."""

    async def log(request):
        # web stack: imported after main's fork and pid file
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse

        try:
            payload = json.loads(await request.body())
            query_log_relay.row_values(payload)
        except (ValueError, TypeError) as e:
            return _error(400, f"bad query log row: {e}")
        try:
            got = await run_in_threadpool(query_log_relay.write_row, data_dir, payload)
        except LogNotKept as e:
            return _error(503, str(e), "server_error")
        return JSONResponse({"id": got})

    return log


async def _capabilities(request):
    """The ``GET /nl2sql/v1/capabilities`` handler: what this process learned of the models it
    called for backends (``model.capability.learned``), for ``nl2sql.doctor()``."""
    from starlette.responses import (
        JSONResponse,  # web stack: imported after main's fork and pid file
    )

    from ..model import capability  # light: no openai

    return JSONResponse({"learned": capability.learned()})


async def _models(request):
    """The ``GET /v1/models`` handler: the one model served, with this process's pid."""
    from starlette.responses import (
        JSONResponse,  # web stack: imported after main's fork and pid file
    )

    return JSONResponse(
        {
            "object": "list",
            "data": [
                {
                    "id": MODEL_NAME,
                    "object": "model",
                    "created": 0,
                    "owned_by": "nl2sql",
                    "pid": os.getpid(),
                }
            ],
        }
    )


def bind_socket(directory: Path) -> socket.socket:
    """Bind and listen on ``directory/embed.sock`` (mode 0600), renamed into place once it
    listens (atomically replacing a stale one).

    Args:
        directory: the private folder (mode 0700) of the socket.

    Returns:
        The listening socket.

    Raises:
        OSError: the folder is missing or not writable, or the path is too long for a socket.
    """
    final = directory / SOCKET_NAME
    tmp = directory / f".{SOCKET_NAME}.{os.getpid()}"
    tmp.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(os.fspath(tmp))
    finally:
        os.umask(old)
    os.chmod(tmp, 0o600)
    sock.listen(256)
    os.replace(tmp, final)
    return sock


def _preload_openai() -> None:
    """Import the openai client for relayed model calls while the first requests come in."""
    try:
        importlib.import_module("openai")
        importlib.import_module("nl2sql.model.openai_call")
    except Exception as e:  # noqa: BLE001 - a relayed call reports it when it imports again
        print(
            f"nl2sql embedder {os.getpid()}: cannot import the openai client "
            f"({type(e).__name__}: {e})",
            flush=True,
        )


def _watch(server, directory: Path, postmaster_pid: int, ino: int) -> None:
    """Ask uvicorn to exit once the postmaster is gone or the socket path is not ours."""
    while not server.should_exit:
        time.sleep(WATCH_S)
        try:
            os.kill(postmaster_pid, 0)
            alive = True
        except ProcessLookupError:
            alive = False
        except PermissionError:
            alive = True
        try:
            ours = (directory / SOCKET_NAME).stat().st_ino == ino
        except OSError:
            ours = False
        if not alive or not ours:
            print(
                f"nl2sql embedder {os.getpid()}: exiting ("
                f"{'postmaster gone' if not alive else 'socket replaced or removed'})",
                flush=True,
            )
            server.should_exit = True


def serve(directory: Path, postmaster_pid: int) -> int:
    """Load the model, listen on ``directory/embed.sock`` and serve until told to stop.

    Args:
        directory: the private folder of the socket, pid and log files.
        postmaster_pid: the postmaster this process serves; it exits when that process is gone.

    Returns:
        The exit status, 0.

    Raises:
        EmbeddingError: the model cannot be loaded.
        OSError: the socket cannot be bound.
    """
    import uvicorn  # web stack: imported after main's fork and pid file

    t0 = time.monotonic()
    embed_texts(["warm-up"])  # load the engine before anyone can connect
    sock = bind_socket(directory)
    # the relayed model calls' client, imported once for the server (not in every backend)
    threading.Thread(target=_preload_openai, daemon=True, name="nl2sql-preload").start()
    ino = (directory / SOCKET_NAME).stat().st_ino
    print(
        f"nl2sql embedder {os.getpid()}: ready in {time.monotonic() - t0:.2f} s, serving "
        f"{MODEL_NAME} for postmaster {postmaster_pid}",
        flush=True,
    )
    config = uvicorn.Config(
        create_app(directory.parent),
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_keep_alive=300,
    )
    server = uvicorn.Server(config)
    threading.Thread(
        target=_watch,
        args=(server, directory, postmaster_pid, ino),
        daemon=True,
        name="nl2sql-embedder-watch",
    ).start()
    try:
        server.run(sockets=[sock])
    finally:
        try:
            if (directory / SOCKET_NAME).stat().st_ino == ino:
                (directory / SOCKET_NAME).unlink()
        except OSError:
            pass
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line ``python -m nl2sql.embedding._server --dir DIR --postmaster-pid PID [--detach]``.

    Args:
        argv: command-line arguments without the program name; None reads ``sys.argv``.

    Returns:
        The exit status: 0, or 1 when the model or the socket could not be set up (reason on
        stderr, i.e. ``embedder.log``).

    Raises:
        SystemExit: bad arguments (argparse).
    """
    ap = argparse.ArgumentParser(prog="python -m nl2sql.embedding._server", description=__doc__)
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--postmaster-pid", type=int, required=True)
    ap.add_argument("--detach", action="store_true")
    args = ap.parse_args(argv)
    if args.detach and os.fork() > 0:
        os._exit(0)
    # first thing: the starting backend watches this pid (a process that dies fails fast)
    (args.dir / PID_NAME).write_text(f"{os.getpid()}\n")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        return serve(args.dir, args.postmaster_pid)
    except Exception as e:  # noqa: BLE001 - reported in the log the client points to
        print(
            f"nl2sql embedder {os.getpid()}: cannot serve: {type(e).__name__}: {e}",
            file=sys.stderr,
            flush=True,
        )
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
