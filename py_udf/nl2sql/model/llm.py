"""Model calls to OpenAI-compatible endpoints through the ``openai`` client, concurrently.

Calls run in worker threads; the calling (main) thread waits in short slices and runs
``on_wait`` between them — inside PostgreSQL that is a trivial SPI call, so that a
``pg_cancel_backend`` (psql's Ctrl-C) is noticed within about one slice.
API keys are read from the server's environment variable named in the model configuration;
they are never stored or logged.

Faults: HTTP 408/409/429/5xx and connection errors are retried by the openai client itself, with
exponential backoff and jitter (honouring a Retry-After header), up to ``ModelConfig.max_retries``
times (setting ``llm_max_retries``). Each model's whole call, retries included, is bounded by its
``timeout_s`` and by the time left before the caller's ``statement_timeout``
(``budget_s`` of ``call_models``); a model that is not done by then is reported as timed out and
abandoned, and the others still vote.

Hard deadline: the HTTP client's timeouts bound each read, so an endpoint that trickles its
reply a byte at a time never trips them. Each call therefore gets its own HTTP client whose
connections are shut down at the call's deadline (a timer; the sockets are caught through the
transport's trace hook), every attempt's timeouts are cut to the time left, no retry starts or
waits past the deadline, and each call runs in its own daemon thread (no shared pool that
abandoned calls could fill): a later call always gets a thread, and an abandoned call's thread
ends at its deadline.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import asdict, dataclass
from typing import NamedTuple

from ..core.errors import ConfigError, EmbedderUnavailable, GateError
from ..core.redaction import env_secrets, redact
from ..core.types import LLMReply, ModelConfig
from ..embedding import client as embed_client
from .gate import Gated

WAIT_SLICE_S = 0.2
_SSL_CONTEXT = None  # one TLS context for every per-call HTTP client (building one costs ms)
_CLIENT_CLASS = None


from ..core.errors import ModelError  # noqa: E402  (re-exported)


def pick_model(models: list[ModelConfig], setting: str, name: str) -> ModelConfig:
    """Pick the model a setting names, or the first (PreSQL-writing) model when it is empty.

    Args:
        models: the enabled models, PreSQL writer first (non-empty).
        setting: the setting's key (``selection_model``, ``narrate_model``), for the message.
        name: the setting's value ('' for the first model).

    Returns:
        The model.

    Raises:
        ConfigError: the named model is not enabled.
    """
    if not name:
        return models[0]
    for m in models:
        if m.name == name:
            return m
    raise ConfigError(
        f"nl2sql: setting {setting!r} names {name!r}, which is not an "
        f"enabled model ({', '.join(m.name for m in models)}); fix it with "
        f"SELECT nl2sql.set_setting('{setting}', '<name>') or '' for the "
        f"first model (the PreSQL writer)"
    )


def _spawn(fn: Callable, *args) -> Future:
    """Run ``fn(*args)`` in a new daemon thread; its outcome lands in the returned Future."""
    fut: Future = Future()
    fut.set_running_or_notify_cancel()

    def run() -> None:
        try:
            fut.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001 (handed to the waiter)
            fut.set_exception(e)

    threading.Thread(target=run, name="nl2sql-llm", daemon=True).start()
    return fut


class _Deadline:
    """A call's wall-clock deadline: shuts its connections down when it passes.

    ``hook`` (an httpx request event hook) cuts each attempt's timeouts to the time left,
    refuses an attempt past the deadline, and installs ``trace`` so that every socket the
    attempt opens is recorded; the timer shuts those sockets down at the deadline, which wakes
    a read blocked on a trickling reply.
    """

    def __init__(self, seconds: float):
        self.at = time.monotonic() + seconds
        self.expired = False
        self._streams: list = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(seconds, 0.0), self.expire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        return self.at - time.monotonic()

    def trace(self, event: str, info: dict) -> None:
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
        import openai

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
        try:
            sock = stream.get_extra_info("socket")
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except Exception:  # noqa: BLE001 (already closed, or detached by TLS)
            pass

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            streams = list(self._streams)
        for stream in streams:
            self._shut(stream)

    def cancel(self) -> None:
        self._timer.cancel()


def _client_class():
    """openai.OpenAI whose retry back-off never sleeps past the call's deadline."""
    global _CLIENT_CLASS
    if _CLIENT_CLASS is None:
        import openai

        class _DeadlineOpenAI(openai.OpenAI):
            nl2sql_deadline: _Deadline | None = None

            def _sleep_for_retry(self, *, retries_taken, max_retries, options, response):
                d = self.nl2sql_deadline
                remaining = max_retries - retries_taken
                wait_s = self._calculate_retry_timeout(
                    remaining, options, response.headers if response else None
                )
                if d is not None:
                    wait_s = min(wait_s, max(d.left(), 0.0))
                time.sleep(wait_s)

        _CLIENT_CLASS = _DeadlineOpenAI
    return _CLIENT_CLASS


def _client(cfg: ModelConfig, deadline: _Deadline):
    global _SSL_CONTEXT
    import httpx2
    import openai

    key = None
    if cfg.api_key_env:
        key = os.environ.get(cfg.api_key_env)
        if not key:
            raise ModelError(
                f"model {cfg.name!r}: environment variable {cfg.api_key_env} is not set in the "
                f"PostgreSQL server's environment; set it where the server starts (e.g. "
                f"/etc/postgresql/15/main/environment) and restart, or change api_key_env"
            )
    if _SSL_CONTEXT is None:
        _SSL_CONTEXT = httpx2.create_ssl_context()
    http = openai.DefaultHttpxClient(verify=_SSL_CONTEXT, event_hooks={"request": [deadline.hook]})
    client = _client_class()(
        base_url=cfg.base_url,
        api_key=key or "no-key",
        timeout=cfg.timeout_s,
        max_retries=cfg.max_retries,
        http_client=http,
    )
    client.nl2sql_deadline = deadline
    return client


def call_model(
    cfg: ModelConfig,
    messages: Gated,
    timeout_s: float | None = None,
    n: int = 1,
    temperature: float | None = None,
) -> LLMReply:
    """Make one chat-completions call to a model's OpenAI-compatible endpoint.

    The openai client retries HTTP 408/409/429/5xx and connection errors with backoff, at
    most ``cfg.max_retries`` times. The API key is read from the server environment variable
    ``cfg.api_key_env``. When this backend uses the shared embedding process (setting
    ``embedder = 'shared'``), the call, already gated, is relayed to that process, which
    holds the imported openai client (``relay_call``): the backend then never imports the
    openai package (0.25-0.7 s and ~21 MB per backend); when the process is not running or
    refuses the connection, the call is made in this process. Never raises: every failure
    (missing key, timeout, unreachable endpoint, HTTP error, empty answer) comes back in
    ``LLMReply.error``, naming the model, the endpoint and what went wrong, with the key and
    key-like tokens masked (``redaction.redact``).

    Args:
        cfg: the model's configuration (name, model id, base_url, api_key_env, temperature,
            max_tokens, timeout_s, max_retries).
        messages: the chat messages as the gate sealed them (``gate.Gate.seal``): nothing
            else reaches a model.
        timeout_s: the call's hard deadline in seconds, retries and a trickling reply
            included (its connections are shut down then); None or 0 uses ``cfg.timeout_s``.
        n: number of samples asked for in one request (self-consistency); at least 1.
        temperature: sampling temperature overriding ``cfg.temperature``; None keeps it.

    Returns:
        ``LLMReply``: ``text`` (the first sample; None on failure), ``choices`` (every
        non-empty sample's text), ``error`` (None on success), ``latency_ms`` (wall time,
        milliseconds), ``prompt_tokens`` and ``completion_tokens`` (0 when not reported).

    Raises:
        GateError: ``messages`` did not come from the gate (a bug, not a model failure).
    """
    if not isinstance(messages, Gated):
        raise GateError(
            f"nl2sql: model {cfg.name!r} was asked with messages that did not pass "
            f"the gate ({type(messages).__name__}); build them with gate.Gate.seal"
        )
    timeout_s = timeout_s or cfg.timeout_s
    relayed = _relayed(cfg, messages.as_list(), timeout_s, n, temperature)
    if relayed is not None:
        return relayed
    return _call_here(cfg, messages.as_list(), timeout_s, n, temperature)


def _relayed(
    cfg: ModelConfig, messages: list[dict], timeout_s: float, n: int, temperature: float | None
) -> LLMReply | None:
    """The call made by the shared process (``embed_client.relay_chat``), or None to make it
    here (the process is not in use, not running, or too old to relay)."""
    t0 = time.perf_counter()
    payload = {
        "config": asdict(cfg),
        "messages": messages,
        "timeout_s": timeout_s,
        "n": n,
        "temperature": temperature,
    }
    try:
        got = embed_client.relay_chat(payload, timeout_s)
    except EmbedderUnavailable as e:
        secrets = env_secrets([cfg.api_key_env])
        return LLMReply(
            model=cfg.name,
            text=None,
            latency_ms=(time.perf_counter() - t0) * 1000,
            error=redact(f"model {cfg.name!r}: {e}", secrets),
        )
    if got is None:
        return None
    secrets = env_secrets([cfg.api_key_env])  # the process redacted too; so does the backend
    err = got.get("error")
    return LLMReply(
        model=cfg.name,
        text=got.get("text"),
        error=redact(err, secrets) if err else None,
        latency_ms=(time.perf_counter() - t0) * 1000,
        prompt_tokens=int(got.get("prompt_tokens") or 0),
        completion_tokens=int(got.get("completion_tokens") or 0),
        choices=list(got.get("choices") or []),
    )


def relay_call(
    config: dict,
    messages: list[dict],
    timeout_s: float,
    n: int = 1,
    temperature: float | None = None,
) -> dict:
    """Make a model call for a backend, in the shared process (``embed_service``).

    The backend's gate sealed ``messages`` before it sent them over the process's socket
    (mode 0600, the server's OS user only); this makes the call as ``call_model`` would in the
    backend, with the API key read from this process's environment (the server's).

    Args:
        config: a ``ModelConfig`` as a dict (``dataclasses.asdict``).
        messages: the chat messages, ``[{"role": ..., "content": ...}, ...]``.
        timeout_s: the call's hard deadline in seconds, retries included.
        n: samples asked for (at least 1).
        temperature: sampling temperature overriding the configuration's; None keeps it.

    Returns:
        The ``LLMReply``'s fields as a dict (errors already redacted).

    Raises:
        TypeError: ``config`` is not a ``ModelConfig``'s fields.
    """
    return asdict(_call_here(ModelConfig(**config), messages, timeout_s, n, temperature))


def _endpoint(cfg: ModelConfig) -> str:
    """The model's base URL for messages, or 'default endpoint' when it has none."""
    return cfg.base_url or "default endpoint"


def _call_here(
    cfg: ModelConfig, messages: list[dict], timeout_s: float, n: int, temperature: float | None
) -> LLMReply:
    """The model call with the openai client in this process (``call_model``'s contract)."""
    t0 = time.perf_counter()
    secrets = env_secrets([cfg.api_key_env])  # masked before truncation, so never cut in half
    deadline = _Deadline(timeout_s)
    client = None
    try:
        client = _client(cfg, deadline)
        resp = client.chat.completions.create(
            model=cfg.model,
            messages=messages,
            temperature=cfg.temperature if temperature is None else temperature,
            max_tokens=cfg.max_tokens,
            n=max(1, int(n)),
            timeout=timeout_s,
        )
        return _reply_of(cfg, resp, t0)
    except ModelError as e:
        err = str(e)
    except Exception as e:  # noqa: BLE001 - any client failure is reported, not raised
        err = _client_error(cfg, e, timeout_s, secrets)
    finally:
        deadline.cancel()
        _close(client)
    if deadline.expired and not err.startswith(f"model {cfg.name!r} at"):
        err = (
            f"model {cfg.name!r} at {_endpoint(cfg)}: no complete answer "
            f"within {timeout_s:g} s (hard deadline; connection closed); raise timeout_s "
            f"with nl2sql.add_model or check the endpoint"
        )
    # an endpoint may echo the key (OpenAI's 401: "Incorrect API key provided: sk-..."); the
    # error goes to the trace, the log and raised messages: mask the key and key-like tokens
    err = redact(err, secrets)
    return LLMReply(
        model=cfg.name, text=None, error=err, latency_ms=(time.perf_counter() - t0) * 1000
    )


def _reply_of(cfg: ModelConfig, resp, t0: float) -> LLMReply:
    """The ``LLMReply`` of a chat-completions response (an error reply when every sample is
    empty); ``t0`` is the call's ``perf_counter`` start."""
    texts = [ch.message.content for ch in resp.choices or [] if ch.message.content]
    text = texts[0] if texts else None
    usage = resp.usage
    return LLMReply(
        model=cfg.name,
        text=text,
        error=None if text else "empty answer",
        latency_ms=(time.perf_counter() - t0) * 1000,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        choices=texts,
    )


def _client_error(cfg: ModelConfig, e: Exception, timeout_s: float, secrets) -> str:
    """What went wrong in an openai client call, naming the model and endpoint and what to
    do (timeout, unreachable endpoint, HTTP status, any other failure)."""
    import openai

    if isinstance(e, openai.APITimeoutError):
        return (
            f"model {cfg.name!r} at {_endpoint(cfg)}: no answer within "
            f"{timeout_s:g} s; raise timeout_s with nl2sql.add_model or check the endpoint"
        )
    if isinstance(e, openai.APIConnectionError):
        return (
            f"model {cfg.name!r}: cannot reach {_endpoint(cfg)} "
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


@dataclass
class ModelRound:
    """The outcome of one round of concurrent model calls (``call_models_during``).

    Attributes:
        replies: one ``LLMReply`` per call, in the order of the calls.
        wait_ms: milliseconds from submission until the last reply arrived or was abandoned
            (the models' time).
        work_ms: milliseconds the overlapped ``work`` took on the calling thread.
    """

    replies: list[LLMReply]  # in the order of the calls
    wait_ms: float  # submission → the last reply in (or abandoned), ms: model time
    work_ms: float = 0.0  # the overlapped work's time on the calling thread, ms


def call_models(
    calls: list[tuple], on_wait: Callable[[], None] | None = None, budget_s: float | None = None
) -> list[LLMReply]:
    """Run several model calls concurrently in worker threads.

    Each call gets ``min(cfg.timeout_s, budget_s)`` seconds (at least 0.05 s), retries
    included; a call still running then is abandoned and reported as an error reply (the
    others are kept). Failures never raise (see ``call_model``).

    Args:
        calls: each ``(cfg, messages)`` or ``(cfg, messages, n, temperature)``, as the
            arguments of ``call_model`` (``messages`` sealed by ``gate.Gate.seal``).
        on_wait: called on the calling thread every ``WAIT_SLICE_S`` seconds (0.2) while
            waiting; it may raise to cancel (e.g. QueryCanceled from a trivial SPI call), and
            the exception then propagates with the outstanding calls abandoned. None for none.
        budget_s: seconds left for the whole statement (before the caller's
            statement_timeout), or None for no limit beyond each model's ``timeout_s``.

    Returns:
        One ``LLMReply`` per call, in the order of ``calls``.

    Raises:
        GateError: a call's messages did not come from the gate.
    """
    return call_models_during(calls, None, on_wait, budget_s).replies


def call_models_during(
    calls: list[tuple],
    work: Callable[[], None] | None,
    on_wait: Callable[[], None] | None = None,
    budget_s: float | None = None,
    on_reply: Callable[[int, LLMReply, int], None] | None = None,
) -> ModelRound:
    """Run model calls as ``call_models`` does, doing other work on the calling thread meanwhile.

    Args:
        calls: each ``(cfg, messages)`` or ``(cfg, messages, n, temperature)``, as the
            arguments of ``call_model`` (``messages`` sealed by ``gate.Gate.seal``).
        work: what the pipeline would otherwise do before or after the round (inside
            PostgreSQL: SPI and CPU work that needs no reply of this round); run once, right
            after the calls are submitted. Exceptions it raises propagate (the calls are then
            abandoned). None for no work.
        on_wait: called on the calling thread every ``WAIT_SLICE_S`` seconds (0.2) while
            waiting; it may raise to cancel (the exception propagates, outstanding calls are
            abandoned). None for none.
        budget_s: seconds left before the caller's statement_timeout, or None; each call gets
            ``min(cfg.timeout_s, budget_s)`` seconds (at least 0.05 s), retries included.
        on_reply: ``on_reply(i, reply, still_out)`` is called on the calling thread for each
            reply as it arrives (in arrival order; not for abandoned calls), with ``i`` the
            call's index and ``still_out`` the number of calls still out, so a caller can start
            on the early answers while slower models are still writing. None for none.

    Returns:
        ``ModelRound``: the replies in the order of ``calls`` (abandoned calls as error
        replies), ``wait_ms`` (only the models' time, until the last reply arrived or was
        abandoned, so work that outlasts the models counts as the caller's own time) and
        ``work_ms`` (the time of ``work``), both in milliseconds.

    Raises:
        GateError: a call's messages did not come from the gate.
    """
    t0 = time.monotonic()
    rnd = _Round(_round_calls(calls, budget_s), t0, budget_s)
    rnd.submit()
    work_ms = 0.0
    if work is not None:
        tw = time.monotonic()
        work()
        work_ms = (time.monotonic() - tw) * 1000
    rnd.wait(on_wait, on_reply)
    return rnd.outcome(work_ms)


class _Call(NamedTuple):
    """One call of a round: ``call_model``'s arguments and its time limit in seconds."""

    cfg: ModelConfig
    messages: Gated
    n: int
    temperature: float | None
    limit_s: float


def _round_calls(calls: list[tuple], budget_s: float | None) -> list[_Call]:
    """``call_models_during``'s calls with defaults filled in and their time limits
    (``min(cfg.timeout_s, budget_s)``, at least 0.05 s); refused unless every call's
    messages passed the gate (on the calling thread, before anything is sent)."""
    calls = [(c[0], c[1], c[2] if len(c) > 2 else 1, c[3] if len(c) > 3 else None) for c in calls]
    for cfg, msgs, *_ in calls:
        if not isinstance(msgs, Gated):
            raise GateError(
                f"nl2sql: model {cfg.name!r} was asked with messages that did not "
                f"pass the gate; build them with gate.Gate.seal"
            )
    limits = [
        min(cfg.timeout_s, budget_s) if budget_s is not None else cfg.timeout_s for cfg, *_ in calls
    ]
    return [_Call(*c, max(lim, 0.05)) for c, lim in zip(calls, limits)]


class _Round:
    """One round of concurrent calls while the calling thread waits on them: their futures,
    the replies of abandoned calls and when each call ended (``time.monotonic``)."""

    def __init__(self, calls: list[_Call], t0: float, budget_s: float | None):
        self.calls, self.t0, self.budget_s = calls, t0, budget_s
        self.futures: list[Future] = []
        self.replies: list[LLMReply | None] = [None] * len(calls)  # abandoned calls' replies
        self.done_at = [t0] * len(calls)
        self.reported: set[int] = set()

    def submit(self) -> None:
        """Start every call in its own thread, stamping its end time when it is done."""
        for i, c in enumerate(self.calls):
            f = _spawn(
                call_model,
                c.cfg,
                c.messages,
                c.limit_s,
                *(() if c.n == 1 and c.temperature is None else (c.n, c.temperature)),
            )
            f.add_done_callback(self._stamp(i))
            self.futures.append(f)

    def _stamp(self, i: int) -> Callable[[Future], None]:
        """A done-callback recording when call ``i`` ended."""

        def at(_f: Future) -> None:
            self.done_at[i] = time.monotonic()

        return at

    def _pending(self) -> set[Future]:
        """The calls still out (neither done nor abandoned)."""
        return {f for i, f in enumerate(self.futures) if not f.done() and self.replies[i] is None}

    def wait(
        self,
        on_wait: Callable[[], None] | None,
        on_reply: Callable[[int, LLMReply, int], None] | None,
    ) -> None:
        """Wait in ``WAIT_SLICE_S`` slices until every call is done or abandoned, reporting
        arrivals to ``on_reply`` and calling ``on_wait`` between slices."""
        while True:
            if on_reply is not None:
                self._report_arrivals(on_reply)
            pending = self._pending()
            if not pending:
                break
            _, pending = wait(pending, timeout=WAIT_SLICE_S, return_when=FIRST_COMPLETED)
            self._abandon_overdue(pending)
            if pending and on_wait is not None:
                on_wait()

    def _report_arrivals(self, on_reply: Callable[[int, LLMReply, int], None]) -> None:
        """Hand each reply not yet reported to ``on_reply``, in arrival order."""
        for i in sorted(
            (
                i
                for i, f in enumerate(self.futures)
                if f.done() and i not in self.reported and self.replies[i] is None
            ),
            key=lambda i: self.done_at[i],
        ):
            self.reported.add(i)
            on_reply(i, self.futures[i].result(), len(self._pending()))

    def _abandon_overdue(self, pending: set[Future]) -> None:
        """Give each call of ``pending`` past its limit an error reply and drop it from
        ``pending``."""
        now = time.monotonic() - self.t0
        for i, f in enumerate(self.futures):
            c = self.calls[i]
            if f in pending and now >= c.limit_s:
                why = (
                    "the time left before statement_timeout"
                    if self.budget_s is not None and c.limit_s < c.cfg.timeout_s
                    else "timeout_s"
                )
                self.replies[i] = LLMReply(
                    model=c.cfg.name,
                    text=None,
                    latency_ms=now * 1000,
                    error=(
                        f"model {c.cfg.name!r} at {_endpoint(c.cfg)}: no answer "
                        f"within {c.limit_s:.3g} s ({why}); abandoned"
                    ),
                )
                self.done_at[i] = self.t0 + min(now, c.limit_s)
                pending.discard(f)

    def outcome(self, work_ms: float) -> ModelRound:
        """The round's ``ModelRound``; its wait ends when the last call ended or was
        abandoned."""
        out = [r if r is not None else f.result() for r, f in zip(self.replies, self.futures)]
        end = time.monotonic()
        # a future's done-callback runs just after its waiters wake: one not stamped yet ended now
        last = max((d if d > self.t0 else end for d in self.done_at), default=self.t0)
        return ModelRound(out, (last - self.t0) * 1000, work_ms)
