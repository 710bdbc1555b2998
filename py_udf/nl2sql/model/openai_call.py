"""One chat-completions call with the ``openai`` client under a hard deadline (heavy: imported
only when needed; docs/internals/model.md "Hard deadline")."""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import asdict, fields, replace

import httpx2
import openai

from ..core.errors import ModelError, ReplyTooLarge
from ..core.redaction import SYSTEM_SECRETS_DIR, env_secrets, redact, secret, url_secrets
from ..core.types import LLMReply, ModelConfig
from ..net import deadline as net_deadline
from . import _exchange

__all__ = ["call_here", "embed_here", "get_here", "relay_call"]

_SSL_CONTEXT = None  # one TLS context for every kept HTTP client (building one costs ms)
MAX_REPLY_BYTES = 32 << 20  # the most of a reply's body read, bytes
MAX_IDLE_CLIENTS = 16  # idle clients kept per endpoint (each holds its open connections)
_IDLE: dict[tuple, list] = {}  # (base_url, key, timeout_s, max_retries) -> idle _Kept clients
_IDLE_LOCK = threading.Lock()


class _Deadline(net_deadline.Deadline):
    """A call's overall deadline (``net.deadline.Deadline``) over the connections of the call's
    client: those its attempts open (each watched from its TCP connect, so a stalled TLS
    handshake is shut too) and those the kept client held from earlier calls."""

    def __init__(self, seconds: float, streams: list | None = None, what: str = "the call"):
        self._streams: list = streams if streams is not None else []
        super().__init__(seconds, what)

    def trace(self, event: str, info: dict) -> None:
        if event.endswith(".connect_tcp.complete"):
            sock = _socket_of(info.get("return_value"))
            if sock is not None:
                self.watch(sock)
        if event.endswith(
            (".connect_tcp.complete", ".start_tls.complete", ".connect_unix_socket.complete")
        ):
            stream = info.get("return_value")
            if stream is None:
                return
            with self._lock:
                self._streams.append(stream)
                expired = self.expired
            if expired:
                self._shut(stream)

    def hook(self, request) -> None:
        left = self.left()
        if left <= 0 or self.expired:
            raise openai.APITimeoutError(request=request)
        old = request.extensions.get("timeout") or {}
        request.extensions["timeout"] = {
            k: min(old[k], left) if old.get(k) is not None else left
            for k in ("connect", "read", "write", "pool")
        }
        request.extensions["trace"] = self.trace

    @staticmethod
    def _shut(stream) -> None:
        sock = _socket_of(stream)
        try:
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except Exception:  # noqa: BLE001 (already closed, or detached by TLS)
            pass

    def _shut_all(self) -> None:
        super()._shut_all()
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            self._shut(stream)


def _socket_of(stream):
    """The socket of an httpcore network stream, or None."""
    try:
        return None if stream is None else stream.get_extra_info("socket")
    except Exception:  # noqa: BLE001 (closed, or detached by TLS)
        return None


class _CappedStream(httpx2.SyncByteStream):
    """A response body read up to ``MAX_REPLY_BYTES``."""

    def __init__(self, inner):
        self.inner = inner

    def __iter__(self):
        got = 0
        for chunk in self.inner:
            got += len(chunk)
            if got > MAX_REPLY_BYTES:
                raise ReplyTooLarge(f"the reply's body passed {MAX_REPLY_BYTES} bytes")
            yield chunk

    def close(self) -> None:
        self.inner.close()


def _cap_body(response) -> None:
    """An httpx response hook: refuse a body announced over ``MAX_REPLY_BYTES``, cap any other."""
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_REPLY_BYTES:
        response.close()
        raise ReplyTooLarge(f"the reply announced {length} bytes, over {MAX_REPLY_BYTES}")
    response.stream = _CappedStream(response.stream)


class _DeadlineOpenAI(openai.OpenAI):
    """openai.OpenAI whose retry back-off never sleeps past the call's deadline."""

    nl2sql_deadline: _Deadline | None = None

    def _should_retry(self, response) -> bool:
        # a server that answers 5xx for a request it refuses (llama.cpp: 500 "Context size
        # has been exceeded", 500 "Only one completion choice is allowed") refuses it again
        if response.status_code >= 500:
            try:
                text = response.read()[:2000].decode("utf-8", "replace")
            except Exception:  # noqa: BLE001 (a body that cannot be read: retried as before)
                text = ""
            if _exchange.is_final_server_error(text):
                return False
        return super()._should_retry(response)

    def _sleep_for_retry(self, *, retries_taken, max_retries, options, response):
        d = self.nl2sql_deadline
        remaining = max_retries - retries_taken
        wait_s = self._calculate_retry_timeout(
            remaining, options, response.headers if response else None
        )
        if d is not None:
            wait_s = min(wait_s, max(d.left(), 0.0))
        time.sleep(wait_s)


def _server_environment_file() -> str:
    """Name where this server reads its environment: a backend's working directory is the data
    directory, whose ``PG_VERSION`` holds the major; Debian's clusters
    (``/var/lib/postgresql/<major>/<cluster>``) read ``/etc/postgresql/<major>/<cluster>/environment``.

    Returns:
        e.g. ``"e.g. /etc/postgresql/17/main/environment"``, or a description when the working
        directory is no data directory.
    """
    try:
        with open("PG_VERSION") as f:
            major = f.read().strip()
        here = os.getcwd()
    except OSError:
        return "e.g. /etc/postgresql/<major>/<cluster>/environment on Debian"
    parent, cluster = os.path.split(here)
    if os.path.basename(parent) != major:
        cluster = "main"
    return f"e.g. /etc/postgresql/{major}/{cluster}/environment on Debian"


def _api_key(cfg: ModelConfig) -> str | None:
    """The model's API key from the server's environment (``api_key_env``), else from the
    secrets folder's file of that name (``core.redaction.secret``); None without one.

    Raises:
        ModelError: ``api_key_env`` names a variable that is not set.
    """
    if not cfg.api_key_env:
        return None
    key = secret(cfg.api_key_env)
    if not key:
        raise ModelError(
            f"model {cfg.name!r}: environment variable {cfg.api_key_env} is not set in the "
            f"PostgreSQL server's environment (nor a file of that name in "
            f"{SYSTEM_SECRETS_DIR}); set it where the server starts "
            f"({_server_environment_file()}) and restart, or change api_key_env"
        )
    return key


class _Kept:
    """An openai client kept between calls to one endpoint, so that its connections stay open
    (HTTP keep-alive: no TCP and TLS handshake per call); one call uses it at a time, and that
    call's deadline shuts all its connections when it passes (the client is then dropped)."""

    def __init__(self, cfg: ModelConfig, key: str | None, slot: tuple):
        global _SSL_CONTEXT
        if _SSL_CONTEXT is None:
            _SSL_CONTEXT = httpx2.create_ssl_context()
        self.slot = slot
        self.deadline: _Deadline | None = None
        self.streams: list = []  # the connections it opened (some may be closed since)
        http = openai.DefaultHttpxClient(
            verify=_SSL_CONTEXT, event_hooks={"request": [self._hook], "response": [_cap_body]}
        )
        self.client = _DeadlineOpenAI(
            base_url=cfg.base_url,
            api_key=key or "no-key",
            timeout=cfg.timeout_s,
            max_retries=cfg.max_retries,
            http_client=http,
        )

    def _hook(self, request) -> None:
        d = self.deadline
        if d is None:  # no call holds it (not expected): send nothing
            raise openai.APITimeoutError(request=request)
        d.hook(request)

    def start(self, seconds: float) -> _Deadline:
        """Begin a call: its deadline, ``seconds`` from now, over this client's connections."""
        self.streams = [s for s in self.streams if _open(s)]
        self.deadline = _Deadline(seconds, self.streams)
        self.client.nl2sql_deadline = self.deadline
        return self.deadline


def _open(stream) -> bool:
    """Whether a recorded connection's socket is still open."""
    try:
        sock = stream.get_extra_info("socket")
        return sock is not None and sock.fileno() >= 0
    except Exception:  # noqa: BLE001 (closed, or detached by TLS)
        return False


def _take(cfg: ModelConfig) -> _Kept:
    """An idle kept client for ``cfg``'s endpoint, key and limits, else a new one.

    Raises:
        ModelError: the API key's environment variable is not set.
    """
    key = _api_key(cfg)
    slot = (cfg.base_url, key, cfg.timeout_s, cfg.max_retries)
    with _IDLE_LOCK:
        idle = _IDLE.get(slot)
        if idle:
            return idle.pop()
    return _Kept(cfg, key, slot)


def _give_back(kept: _Kept | None, healthy: bool) -> None:
    """Keep ``kept`` for the next call to its endpoint when its call ended ``healthy`` (before
    its deadline) and fewer than ``MAX_IDLE_CLIENTS`` wait; else close it."""
    if kept is None:
        return
    kept.deadline = kept.client.nl2sql_deadline = None
    if healthy:
        with _IDLE_LOCK:
            idle = _IDLE.setdefault(kept.slot, [])
            if len(idle) < MAX_IDLE_CLIENTS:
                idle.append(kept)
                return
    _close(kept.client)


def call_here(
    cfg: ModelConfig, messages: list[dict], timeout_s: float, n: int, temperature: float | None
) -> LLMReply:
    """Make the model call with the openai client in this process, in the shape its endpoint
    takes (``capability``): a refused parameter is changed once and remembered, a reply cut
    by its output budget before any answer is retried once with a larger one, and samples the
    endpoint does not return for ``n`` are asked as separate requests.

    Args:
        cfg: the model's configuration.
        messages: the chat messages (already sealed by the backend's gate).
        timeout_s: the call's hard deadline in seconds, every request and retry included.
        n: samples asked for.
        temperature: sampling temperature overriding ``cfg.temperature``; None keeps it.

    Returns:
        The ``LLMReply`` (``llm.call_model``'s contract: failures as ``error``, keys masked),
        with ``request`` (what was sent), ``learned`` and ``reasoning_tokens``.
    """
    t0 = time.perf_counter()
    # masked before truncation, so never cut in half
    secrets = env_secrets([cfg.api_key_env]) + url_secrets(cfg.base_url)
    kept, deadline = None, None
    ex = _exchange.Exchange(cfg, messages, max(1, int(n)), temperature)
    try:
        kept = _take(cfg)
        deadline = kept.start(timeout_s)
        reply = ex.run(kept.client, timeout_s, t0)
        reply.learned = [redact(x, secrets) for x in reply.learned]  # the endpoint's words
        return reply
    except ModelError as e:
        err = str(e)
    except Exception as e:  # noqa: BLE001 - any client failure is reported, not raised
        err = _exchange.refusal(cfg, e, ex) or _client_error(cfg, e, timeout_s, secrets)
    finally:
        _give_back(kept, deadline is not None and deadline.finish())
    if deadline is not None and deadline.expired and not err.startswith(f"model {cfg.name!r} at"):
        err = (
            f"model {cfg.name!r} at {cfg.endpoint}: no complete answer "
            f"within {timeout_s:g} s (hard deadline; connection closed); raise timeout_s "
            f"with nl2sql.add_model or check the endpoint"
        )
    # an endpoint may echo the key (OpenAI's 401: "Incorrect API key provided: sk-..."); the
    # error goes to the trace, the log and raised messages: mask the key and key-like tokens
    reply = ex.failed(redact(err, secrets), (time.perf_counter() - t0) * 1000)
    reply.learned = [redact(x, secrets) for x in reply.learned]
    return reply


def get_here(cfg: ModelConfig, path: str, timeout_s: float) -> object:
    """``GET`` a path of a model's endpoint (``/models``) with a kept client under an overall
    deadline, without retries (``nl2sql.doctor()``'s probe).

    Args:
        cfg: the model; path: relative to its ``base_url``; timeout_s: the overall deadline, s.

    Returns:
        The reply's JSON as sent.

    Raises:
        DeadlineExceeded: no complete reply within ``timeout_s``.
        ModelError: the API key's variable is not set.
        openai.OpenAIError: the endpoint refused or could not be reached.
    """
    kept = _take(replace(cfg, max_retries=0))
    d = kept.start(timeout_s)
    try:
        return kept.client.get(path, cast_to=object, options={"timeout": timeout_s})
    except Exception:
        if d.expired:
            raise d.error() from None
        raise
    finally:
        _give_back(kept, d.finish())


def embed_here(cfg: ModelConfig, texts: list[str], timeout_s: float, dimensions: int | None):
    """``POST /embeddings`` (OpenAI's shape) with a kept client under one overall deadline,
    retries within it (the model's ``max_retries``), the body capped at ``MAX_REPLY_BYTES``.

    Args:
        cfg: the embedding endpoint as a model (base URL, model id, key variable, retries).
        texts: the inputs, one request.
        timeout_s: the overall deadline, seconds.
        dimensions: sent as ``dimensions`` (OpenAI's text-embedding-3 shortening) when given.

    Returns:
        The reply's JSON as sent (``encoding_format`` ``float`` is asked; checking is the
        caller's, ``embedding.remote``).

    Raises:
        DeadlineExceeded: no complete reply within ``timeout_s``.
        ModelError: the API key's variable is not set.
        openai.OpenAIError: the endpoint refused or could not be reached (secrets masked by
            the caller).
    """
    kept = _take(cfg)
    d = kept.start(timeout_s)
    body: dict = {"model": cfg.model, "input": list(texts), "encoding_format": "float"}
    if dimensions:
        body["dimensions"] = int(dimensions)
    try:
        return kept.client.post(
            "/embeddings", cast_to=object, body=body, options={"timeout": timeout_s}
        )
    except Exception:
        if d.expired:
            raise d.error() from None
        raise
    finally:
        _give_back(kept, d.finish())


def _client_error(cfg: ModelConfig, e: Exception, timeout_s: float, secrets) -> str:
    """What went wrong in an openai client call, naming the model and endpoint and what to
    do (timeout, unreachable endpoint, HTTP status, any other failure)."""
    if isinstance(e, openai.APITimeoutError):
        return (
            f"model {cfg.name!r} at {cfg.endpoint}: no answer within "
            f"{timeout_s:g} s; raise timeout_s with nl2sql.add_model or check the endpoint"
        )
    if isinstance(e.__cause__, ReplyTooLarge):
        return f"model {cfg.name!r} at {cfg.endpoint}: {e.__cause__}; check the endpoint"
    if isinstance(e, openai.APIConnectionError):
        return (
            f"model {cfg.name!r}: cannot reach {cfg.endpoint} "
            f"({redact(str(e), secrets)}); "
            f"check base_url and that the endpoint is up"
        )
    if isinstance(e, openai.APIStatusError):
        retried = (
            f" (after {cfg.max_retries} retries)"
            if e.status_code in (408, 409, 429) or e.status_code >= 500
            else ""
        )
        return (
            f"model {cfg.name!r}: endpoint answered HTTP {e.status_code}{retried}: "
            f"{redact(str(e), secrets)[:300]}"
        )
    return f"model {cfg.name!r}: {type(e).__name__}: {redact(str(e), secrets)[:300]}"


def _close(client) -> None:
    """Close a per-call openai client (None: none was made), ignoring failures."""
    if client is not None:
        try:
            client.close()
        except Exception:  # noqa: BLE001
            pass


def relay_call(
    config: dict,
    messages: list[dict],
    timeout_s: float,
    n: int = 1,
    temperature: float | None = None,
) -> dict:
    """Make a model call for a backend, in the shared embedding process.

    Args:
        config: a ``ModelConfig`` as a dict (``dataclasses.asdict``).
        messages: the chat messages, ``[{"role": ..., "content": ...}, ...]``.
        timeout_s: the call's hard deadline in seconds, retries included.
        n: samples asked for (at least 1).
        temperature: sampling temperature overriding the configuration's; None keeps it.

    Returns:
        The ``LLMReply``'s fields as a dict (errors already redacted).

    Raises:
        TypeError: ``config`` lacks a ``ModelConfig``'s required fields (unknown ones are
            ignored: a newer backend's).
    """
    known = {f.name for f in fields(ModelConfig)}  # a newer backend's extra fields: not needed
    cfg = ModelConfig(**{k: v for k, v in config.items() if k in known})
    return asdict(call_here(cfg, messages, timeout_s, n, temperature))
