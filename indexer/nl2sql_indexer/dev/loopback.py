"""A scripted OpenAI-compatible chat-completions server on loopback.

Its answers are SCRIPTED, NOT A MODEL'S. No LLM is reachable from the machines this project
is built and tested on, so tests, demos and benchmarks start this server on 127.0.0.1 and
tell it, ahead of time, what to answer: rules ("for model M, when the prompt contains X,
answer Y"), replays ("for model M, the answer to question Q is the SQL S", e.g. the gold or
a recorded run), and an optional default. Everything it returns was written by a person or
a script; nothing here generates or judges SQL. Any result obtained against it measures the
pipeline around the model, never a model.

It speaks the real chat-completions protocol over HTTP (stdlib ``http.server`` only), so
the client-side code path -- the ``openai`` client, retries, timeouts, error handling -- is
exactly the one used against a real endpoint:

* ``POST /v1/chat/completions`` -- returns a ``chat.completion`` object with ``n`` identical
  choices. ``usage`` counts tokens as whitespace-separated words (an approximation; there
  is no tokenizer here).
* ``GET /v1/models`` -- the models named in rules and replays.
* Admin endpoints, so another process can script it: ``POST /_rules`` (JSON list of rule
  objects, appended), ``POST /_replay`` (``{"model", "answers", "delay_s"}``),
  ``POST /_default`` (``{"response": str | null}``), ``POST /_clear``, ``GET /_requests``.

Errors are OpenAI-style JSON bodies ``{"error": {"message", "type", "code"}}``: 400 for a
malformed request, 404 for an unknown path or when nothing scripted matches, and whatever
status a rule asks for. Streaming (``stream: true``) is not supported and is refused with 400.

Command line (``nl2sql-loopback``): ``--host`` (loopback only), ``--port``, ``--script FILE``
with ``{"rules": [...], "replays": [{"model", "answers", "delay_s"}], "default": str|null}``.
"""

from __future__ import annotations

import argparse
import copy
import ipaddress
import json
import signal
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "QUESTION_MARKER",
    "extract_question",
    "Rule",
    "LoopbackLLM",
    "is_loopback_host",
    "main",
]

from nl2sql.model.prompts import QUESTION_MARKER
from nl2sql.retrieval.rewriting import original_question

"""The pipeline's prompts end with this marker, the question, and `` */``."""

_HANG_MAX_S = 3600.0
_MAX_BODY = 64 * 1024 * 1024


def extract_question(prompt: str) -> str | None:
    """Return the question in a pipeline prompt, or None if the prompt has no marker.

    The question is the text after the LAST occurrence of :data:`QUESTION_MARKER` up to the
    next ``*/`` (or the end of the text if there is none), stripped of surrounding whitespace.
    """
    if not isinstance(prompt, str):
        return None
    i = prompt.rfind(QUESTION_MARKER)
    if i < 0:
        return None
    rest = prompt[i + len(QUESTION_MARKER) :]
    j = rest.find("*/")
    if j >= 0:
        rest = rest[:j]
    return rest.strip()


def _normalize(text: str) -> str:
    """Collapse runs of whitespace and case-fold (for lenient question matching)."""
    return " ".join(text.split()).casefold()


def _words(text: str) -> int:
    """Token count approximation used in ``usage``: whitespace-separated words."""
    return len(text.split())


def _content_text(content: Any) -> str:
    """Text of a message's content: a string, or a list of content parts (text parts joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "\n".join(parts)
    return str(content)


def _last_user_text(messages: list[dict]) -> str | None:
    """Text of the last message whose role is ``user``; None if there is none."""
    for msg in reversed(messages):
        if msg.get("role") == "user":
            return _content_text(msg.get("content"))
    return None


def is_loopback_host(host: str) -> bool:
    """True if ``host`` is ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if not isinstance(host, str) or not host:
        return False
    h = host.strip()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
    if h.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


@dataclass
class Rule:
    """One scripted answer: when a request matches, answer with ``response`` (or an error).

    All match fields that are not None must hold: ``model`` equals the request's model,
    ``contains`` occurs in the last user message, ``question`` equals
    :func:`extract_question` of the last user message. Rules are tried in insertion order;
    the first match wins. ``times`` limits how often a rule may match (then it is skipped).
    ``status`` != 200 answers with an OpenAI-style JSON error (``response`` is its message, if
    given). ``hang`` never answers: the handler waits until the server stops (at most an hour),
    so the client must time out. ``trickle_s`` > 0 sends the answer's body one byte at a time
    with that pause before each byte (a slow endpoint that never trips a per-read timeout);
    it stops when the server stops or the client goes away.
    """

    model: str | None = None
    contains: str | None = None
    question: str | None = None
    response: str = ""
    delay_s: float = 0.0
    status: int = 200
    hang: bool = False
    times: int | None = None
    trickle_s: float = 0.0


_RULE_FIELDS = {f.name for f in fields(Rule)}


def _rule_from_dict(d: Any) -> Rule:
    """Build and validate a Rule from a JSON object; ValueError on anything malformed."""
    if not isinstance(d, dict):
        raise ValueError("a rule must be a JSON object")
    unknown = set(d) - _RULE_FIELDS
    if unknown:
        raise ValueError(f"unknown rule field(s): {sorted(unknown)}")
    rule = Rule(**d)
    for name in ("model", "contains", "question"):
        v = getattr(rule, name)
        if v is not None and not isinstance(v, str):
            raise ValueError(f"rule.{name} must be a string or null")
    if not isinstance(rule.response, str):
        raise ValueError("rule.response must be a string")
    if (
        isinstance(rule.delay_s, bool)
        or not isinstance(rule.delay_s, (int, float))
        or rule.delay_s < 0
    ):
        raise ValueError("rule.delay_s must be a non-negative number")
    if (
        isinstance(rule.status, bool)
        or not isinstance(rule.status, int)
        or not 100 <= rule.status <= 599
    ):
        raise ValueError("rule.status must be an HTTP status code")
    if (
        isinstance(rule.trickle_s, bool)
        or not isinstance(rule.trickle_s, (int, float))
        or rule.trickle_s < 0
    ):
        raise ValueError("rule.trickle_s must be a non-negative number")
    if not isinstance(rule.hang, bool):
        raise ValueError("rule.hang must be a boolean")
    if rule.times is not None and (
        isinstance(rule.times, bool) or not isinstance(rule.times, int) or rule.times < 0
    ):
        raise ValueError("rule.times must be a non-negative integer or null")
    return rule


def _error_type(status: int) -> tuple[str, str]:
    """OpenAI-style (type, code) for an HTTP error status."""
    table = {
        400: ("invalid_request_error", "bad_request"),
        401: ("authentication_error", "invalid_api_key"),
        403: ("permission_error", "permission_denied"),
        404: ("not_found_error", "not_found"),
        405: ("invalid_request_error", "method_not_allowed"),
        408: ("timeout_error", "timeout"),
        409: ("conflict_error", "conflict"),
        413: ("invalid_request_error", "request_too_large"),
        422: ("invalid_request_error", "unprocessable_entity"),
        429: ("rate_limit_error", "rate_limit_exceeded"),
    }
    if status in table:
        return table[status]
    if status >= 500:
        return ("server_error", "server_error")
    return ("invalid_request_error", f"http_{status}")


class _Reply:
    """What the handler should do for one chat request."""

    __slots__ = ("status", "content", "message", "code", "delay_s", "hang", "trickle_s")

    def __init__(
        self, status=200, content="", message="", code=None, delay_s=0.0, hang=False, trickle_s=0.0
    ):
        self.trickle_s = trickle_s
        self.status = status
        self.content = content
        self.message = message
        self.code = code
        self.delay_s = delay_s
        self.hang = hang


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows its LoopbackLLM and tracks open connections."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, addr, handler, owner: LoopbackLLM):
        self.owner = owner
        self.conns: set[socket.socket] = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, handler)


class _Server6(_Server):
    """IPv6 variant (for ``::1``)."""

    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    """Request handler: routes to the owning LoopbackLLM."""

    protocol_version = "HTTP/1.1"
    server_version = "nl2sql-loopback/0.1 (scripted answers, not a model)"
    # TCP_NODELAY: headers and body go out in two writes; with Nagle's algorithm the body waited
    # for the client's delayed ACK, and one reply in five arrived ~40 ms late
    disable_nagle_algorithm = True
    server: _Server

    # -- connection tracking, so stop() can close idle keep-alive connections --------------
    def setup(self):
        super().setup()
        with self.server.conns_lock:
            self.server.conns.add(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            with self.server.conns_lock:
                self.server.conns.discard(self.connection)

    def log_message(self, format, *args):
        if self.server.owner.verbose:
            sys.stderr.write(f"loopback LLM: {self.address_string()} - {format % args}\n")

    # -- plumbing ---------------------------------------------------------------------------
    def _send_json(self, status: int, obj: Any, trickle_s: float = 0.0) -> None:
        body = json.dumps(obj).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if trickle_s <= 0:
            self.wfile.write(body)
            self.wfile.flush()
            return
        self.wfile.flush()
        stop = self.server.owner._stop_event
        for i in range(len(body)):
            if stop.wait(trickle_s):
                self.close_connection = True
                return
            try:
                self.wfile.write(body[i : i + 1])
                self.wfile.flush()
            except OSError:  # the client closed the connection (its deadline)
                self.close_connection = True
                return

    def _send_error(self, status: int, message: str, code: str | None = None) -> None:
        etype, ecode = _error_type(status)
        self._send_json(
            status,
            {
                "error": {
                    "message": message,
                    "type": etype,
                    "code": code if code is not None else ecode,
                }
            },
        )

    def _path(self) -> str:
        p = self.path.split("?", 1)[0].split("#", 1)[0]
        if len(p) > 1:
            p = p.rstrip("/")
        return p

    def _read_json(self) -> tuple[bool, Any]:
        """Read and parse the body; on failure send a 400 and return (False, None)."""
        length = self.headers.get("Content-Length")
        try:
            n = int(length) if length is not None else 0
        except ValueError:
            self._send_error(400, "invalid Content-Length header")
            return False, None
        if n < 0 or n > _MAX_BODY:
            self.close_connection = True
            self._send_error(413 if n > 0 else 400, "request body too large or invalid length")
            return False, None
        raw = self.rfile.read(n) if n else b""
        if not raw.strip():
            self._send_error(400, "request body must be JSON; got an empty body")
            return False, None
        try:
            return True, json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            self._send_error(400, f"request body is not valid JSON: {e}")
            return False, None

    # -- verbs --------------------------------------------------------------------------------
    def do_GET(self):
        """GET /v1/models, GET /_requests."""
        path = self._path()
        owner = self.server.owner
        if path == "/v1/models":
            created = int(owner.started_at)
            data = [
                {"id": m, "object": "model", "created": created, "owned_by": "loopback-scripted"}
                for m in owner.models()
            ]
            self._send_json(200, {"object": "list", "data": data})
        elif path.startswith("/v1/models/"):
            name = path[len("/v1/models/") :]
            if name in owner.models():
                self._send_json(
                    200,
                    {
                        "id": name,
                        "object": "model",
                        "created": int(owner.started_at),
                        "owned_by": "loopback-scripted",
                    },
                )
            else:
                self._send_error(
                    404,
                    f"model {name!r} is not scripted on this loopback server",
                    "model_not_found",
                )
        elif path == "/_requests":
            self._send_json(200, owner.requests)
        elif path in ("/v1/chat/completions", "/_rules", "/_replay", "/_clear", "/_default"):
            self._send_error(405, f"method GET not allowed on {path}")
        else:
            self._send_error(404, f"unknown path {path!r}")

    def do_POST(self):
        """POST /v1/chat/completions and the admin endpoints."""
        path = self._path()
        if path == "/v1/chat/completions":
            ok, body = self._read_json()
            if ok:
                self._chat(body)
            return
        if path in ("/_rules", "/_replay", "/_clear", "/_default"):
            if path == "/_clear":
                self._discard_body()  # the body, if any, is ignored
                self.server.owner.clear()
                self._send_json(200, {"ok": True})
                return
            ok, body = self._read_json()
            if not ok:
                return
            self._admin(path, body)
            return
        if path == "/v1/models" or path == "/_requests":
            self._discard_body()
            self._send_error(405, f"method POST not allowed on {path}")
            return
        self._discard_body()
        self._send_error(404, f"unknown path {path!r}")

    def _discard_body(self):
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        if 0 < length <= _MAX_BODY:
            self.rfile.read(length)
        elif length:
            self.close_connection = True

    def _fallback(self, method: str):
        self._discard_body()
        self._send_error(405, f"method {method} not allowed")

    def do_PUT(self):
        """Not supported (405)."""
        self._fallback("PUT")

    def do_DELETE(self):
        """Not supported (405)."""
        self._fallback("DELETE")

    def do_PATCH(self):
        """Not supported (405)."""
        self._fallback("PATCH")

    # -- admin --------------------------------------------------------------------------------
    def _admin(self, path: str, body: Any) -> None:
        owner = self.server.owner
        try:
            if path == "/_rules":
                if isinstance(body, dict):
                    body = [body]
                if not isinstance(body, list):
                    raise ValueError("expected a JSON list of rule objects")
                rules = [_rule_from_dict(d) for d in body]
                for r in rules:
                    owner.add_rule(r)
                self._send_json(200, {"ok": True, "added": len(rules)})
            elif path == "/_replay":
                model, answers, delay_s = _replay_from_dict(body)
                owner.set_replay(model, answers, delay_s)
                self._send_json(200, {"ok": True, "model": model, "answers": len(answers)})
            elif path == "/_default":
                if not isinstance(body, dict) or "response" not in body:
                    raise ValueError('expected {"response": string or null}')
                resp = body["response"]
                if resp is not None and not isinstance(resp, str):
                    raise ValueError("response must be a string or null")
                owner.set_default(resp)
                self._send_json(200, {"ok": True})
        except (ValueError, TypeError) as e:
            self._send_error(400, str(e))

    # -- chat ---------------------------------------------------------------------------------
    def _chat(self, body: Any) -> None:
        owner = self.server.owner
        refusal = _chat_refusal(body)
        if refusal is not None:
            self._send_error(400, *refusal)
            return
        model, messages, n = body["model"], body["messages"], _n_of(body)
        owner._log(model, messages, body.get("temperature"), n)
        reply = owner._decide(model, messages)
        if self._held(reply):
            return
        if reply.status != 200:
            self._send_error(reply.status, reply.message, reply.code)
            return
        self._send_json(200, _completion(model, messages, reply, n), reply.trickle_s)

    def _held(self, reply: _Reply) -> bool:
        """Hang or wait as ``reply`` says; True when the request ended meanwhile (the server
        stopped: connection closed; or a hang released by clear(): a 400 sent)."""
        owner = self.server.owner
        stop = owner._stop_event
        if reply.hang:
            released = owner._release_event
            released.wait(_HANG_MAX_S)
            if stop.is_set():
                self.close_connection = True
                return True
            # released by clear(): a 400 is not retried by clients, so an abandoned call does
            # not come back as a stray request in a later script
            self._send_error(400, "hanging request released by clear()", "released")
            return True
        if reply.delay_s > 0 and stop.wait(reply.delay_s):
            self.close_connection = True
            return True
        return False


def _n_of(body: dict) -> Any:
    """The request's ``n`` (samples), 1 when absent or null (not yet validated)."""
    n = body.get("n", 1)
    return 1 if n is None else n


def _chat_refusal(body: Any) -> tuple[str, str | None] | None:
    """``(message, error code)`` of the first problem of a chat-completions request body
    (not an object, no model, bad messages or ``n``, streaming asked for); None when valid."""
    if not isinstance(body, dict):
        return "request body must be a JSON object", None
    model = body.get("model")
    messages = body.get("messages")
    n = _n_of(body)
    if not isinstance(model, str) or not model:
        return "'model' is required and must be a non-empty string", "missing_model"
    if (
        not isinstance(messages, list)
        or not messages
        or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
    ):
        return "'messages' must be a non-empty list of objects with a 'role'", "invalid_messages"
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n > 128:
        return "'n' must be an integer between 1 and 128", "invalid_n"
    if body.get("stream"):
        return "streaming is not supported by the loopback server", "stream_unsupported"
    return None


def _completion(model: str, messages: list[dict], reply: _Reply, n: int) -> dict:
    """The chat-completions answer: ``n`` choices of the scripted content, usage in words."""
    prompt_tokens = sum(_words(_content_text(m.get("content"))) for m in messages)
    completion_tokens = _words(reply.content) * n
    return {
        "id": "chatcmpl-loopback-" + uuid.uuid4().hex,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "loopback-scripted",
        "choices": [
            {
                "index": i,
                "message": {"role": "assistant", "content": reply.content},
                "logprobs": None,
                "finish_reason": "stop",
            }
            for i in range(n)
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _replay_from_dict(body: Any) -> tuple[str, dict[str, str], float]:
    """Validate a replay object {"model", "answers", "delay_s"?}; ValueError if malformed."""
    if not isinstance(body, dict):
        raise ValueError(
            'expected {"model": str, "answers": {question: answer}, "delay_s": number}'
        )
    unknown = set(body) - {"model", "answers", "delay_s"}
    if unknown:
        raise ValueError(f"unknown replay field(s): {sorted(unknown)}")
    model = body.get("model")
    answers = body.get("answers")
    delay_s = body.get("delay_s", 0.0) or 0.0
    if not isinstance(model, str) or not model:
        raise ValueError("replay 'model' must be a non-empty string")
    if not isinstance(answers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in answers.items()
    ):
        raise ValueError(
            "replay 'answers' must be an object mapping question strings to answer strings"
        )
    if isinstance(delay_s, bool) or not isinstance(delay_s, (int, float)) or delay_s < 0:
        raise ValueError("replay 'delay_s' must be a non-negative number")
    return model, answers, float(delay_s)


class LoopbackLLM:
    """OpenAI-compatible chat-completions server on 127.0.0.1 whose answers are scripted (NOT a model).

    The socket is bound when the object is created (``port=0`` picks a free port), so
    :attr:`base_url` is known before :meth:`start`. Use as a context manager::

        with LoopbackLLM() as llm:
            llm.add_rule(Rule(model="m", response="SELECT 1"))
            client = openai.OpenAI(base_url=llm.base_url, api_key="x")

    Resolution order for a request: rules (insertion order, first match wins), then the
    replay for the request's model, then the default answer, else a 404 error naming the
    model and the question. A stopped server cannot be started again.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        """Bind to ``host:port`` (loopback only; ValueError otherwise). ``port=0`` = a free port."""
        if not is_loopback_host(host):
            raise ValueError(
                f"refusing to listen on non-loopback host {host!r}: "
                "the scripted LLM server binds to loopback only (127.0.0.0/8, localhost, ::1)"
            )
        h = host.strip().strip("[]")
        server_cls = _Server6 if ":" in h else _Server
        self._lock = threading.Lock()
        self._rules: list[list] = []  # [rule, remaining times or None]
        self._replays: dict[str, tuple[dict[str, str], dict[str, str], float]] = {}
        self._default: str | None = None
        self._log_entries: list[dict] = []
        self._stop_event = threading.Event()
        self._release_event = threading.Event()  # set by clear() and stop(): hanging handlers end
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.verbose = False
        self.started_at = time.time()
        self._server = server_cls((h, port), _Handler, self)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> LoopbackLLM:
        """Serve in a daemon thread; returns self. Calling it on a running server is a no-op."""
        if self._stopped:
            raise RuntimeError("this LoopbackLLM was stopped; create a new one")
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"loopback-llm:{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: wake hanging/delayed handlers, close connections and the socket. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._stop_event.set()
        self._release_event.set()
        if self._thread is not None:
            self._server.shutdown()
        with self._server.conns_lock:
            conns = list(self._server.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackLLM:
        """Start the server."""
        return self.start()

    def __exit__(self, *exc) -> None:
        """Stop the server."""
        self.stop()

    @property
    def port(self) -> int:
        """The TCP port the server is bound to."""
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """Base URL for an OpenAI client, e.g. ``http://127.0.0.1:PORT/v1``."""
        host = self._server.server_address[0]
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/v1"

    # -- scripting ------------------------------------------------------------------------
    def add_rule(self, rule: Rule) -> None:
        """Append a rule; rules are tried in insertion order and the first match wins."""
        if not isinstance(rule, Rule):
            raise TypeError("add_rule expects a Rule")
        with self._lock:
            self._rules.append([rule, rule.times])

    def clear(self) -> None:
        """Drop all rules, replays and the request log (the default answer is kept). Requests
        hanging under a ``hang`` rule are released with HTTP 400 (not retried by clients)."""
        with self._lock:
            self._rules.clear()
            self._replays.clear()
            self._log_entries.clear()
            released, self._release_event = self._release_event, threading.Event()
        released.set()

    def set_replay(self, model: str, answers: dict[str, str], delay_s: float = 0.0) -> None:
        """For `model`, answer with answers[extract_question(last user message)].

        Lookup is exact first, then whitespace/case-insensitive, then with the explicit dates
        of the pipeline's query rewriting removed (``rewriting.original_question``), so a
        rewritten question still finds the answer recorded for the question as asked. Rules take precedence over
        replays; a question missing from ``answers`` falls through to the default. Setting a
        replay for a model replaces that model's previous replay.
        """
        answers = dict(answers)
        normalized: dict[str, str] = {}
        for q, a in answers.items():
            normalized.setdefault(_normalize(q), a)
        with self._lock:
            self._replays[model] = (answers, normalized, float(delay_s))

    def set_default(self, response: str | None) -> None:
        """Answer ``response`` when nothing matches; None -> a 404 error naming (model, question)."""
        with self._lock:
            self._default = response

    def load_script(self, script: dict) -> None:
        """Load ``{"rules": [...], "replays": [{"model", "answers", "delay_s"}], "default": ...}``.

        Rules are appended, replays set; ``default`` is applied only if the key is present.
        Raises ValueError on a malformed script.
        """
        if not isinstance(script, dict):
            raise ValueError("a script must be a JSON object")
        unknown = set(script) - {"rules", "replays", "default"}
        if unknown:
            raise ValueError(f"unknown script field(s): {sorted(unknown)}")
        rules = [_rule_from_dict(d) for d in (script.get("rules") or [])]
        replays = [_replay_from_dict(d) for d in (script.get("replays") or [])]
        if (
            "default" in script
            and script["default"] is not None
            and not isinstance(script["default"], str)
        ):
            raise ValueError("script 'default' must be a string or null")
        for r in rules:
            self.add_rule(r)
        for model, answers, delay_s in replays:
            self.set_replay(model, answers, delay_s)
        if "default" in script:
            self.set_default(script["default"])

    def models(self) -> list[str]:
        """Models named in rules and replays, in order of first appearance."""
        with self._lock:
            names = [r.model for r, _ in self._rules if r.model is not None] + list(self._replays)
        return list(dict.fromkeys(names))

    @property
    def requests(self) -> list[dict]:
        """Received chat requests, in arrival order: {"model", "messages", "temperature", "n", "time"}."""
        with self._lock:
            return copy.deepcopy(self._log_entries)

    # -- internals ------------------------------------------------------------------------
    def _log(self, model: str, messages: list, temperature: Any, n: int) -> None:
        with self._lock:
            self._log_entries.append(
                {
                    "model": model,
                    "messages": messages,
                    "temperature": temperature,
                    "n": n,
                    "time": time.time(),
                }
            )

    def _decide(self, model: str, messages: list[dict]) -> _Reply:
        """The reply to one chat request: the first matching rule (one use of it taken), else
        the model's replayed answer, else the default response, else a 404."""
        user = _last_user_text(messages)
        question = extract_question(user) if user is not None else None
        with self._lock:
            reply = self._take_rule(model, user, question)
            if reply is None:
                reply = self._replayed(model, question)
            default = self._default
        if reply is not None:
            return reply
        if default is not None:
            return _Reply(content=default)
        return _Reply(
            status=404,
            code="no_scripted_answer",
            message=f"loopback LLM: no scripted answer for model={model!r}, question={question!r}",
        )

    def _take_rule(self, model: str, user: str | None, question: str | None) -> _Reply | None:
        """The reply of the first rule matching the request, counting one use; None when no
        rule matches. The caller holds ``self._lock``."""
        for entry in self._rules:
            rule, remaining = entry
            if not _rule_matches(rule, remaining, model, user, question):
                continue
            if remaining is not None:
                entry[1] = remaining - 1
            return _rule_reply(rule)
        return None

    def _replayed(self, model: str, question: str | None) -> _Reply | None:
        """The model's recorded answer to the question (exact, normalized, or as asked before
        query rewriting); None when there is none. The caller holds ``self._lock``."""
        replay = self._replays.get(model)
        if replay is None or question is None:
            return None
        exact, normalized, delay_s = replay
        if question in exact:
            return _Reply(content=exact[question], delay_s=delay_s)
        norm = _normalize(question)
        if norm in normalized:
            return _Reply(content=normalized[norm], delay_s=delay_s)
        # the pipeline's query rewriting added explicit dates: match the question as asked
        asked = _normalize(original_question(question))
        if asked in normalized:
            return _Reply(content=normalized[asked], delay_s=delay_s)
        return None


def _rule_matches(
    rule: Rule, remaining: int | None, model: str, user: str | None, question: str | None
) -> bool:
    """Whether a rule with uses left applies to this model, user message and question."""
    if remaining is not None and remaining <= 0:
        return False
    if rule.model is not None and rule.model != model:
        return False
    if rule.contains is not None and (user is None or rule.contains not in user):
        return False
    return rule.question is None or rule.question == question


def _rule_reply(rule: Rule) -> _Reply:
    """What a matched rule answers: a hang, a scripted HTTP error, or its response."""
    if rule.hang:
        return _Reply(hang=True)
    if rule.status != 200:
        msg = rule.response or f"scripted error (HTTP {rule.status}) from the loopback server"
        return _Reply(status=rule.status, message=msg, delay_s=rule.delay_s)
    return _Reply(content=rule.response, delay_s=rule.delay_s, trickle_s=float(rule.trickle_s))


def main(argv: list[str] | None = None) -> int:
    """Command-line entry (``nl2sql-loopback``): serve scripted answers until SIGINT/SIGTERM."""
    parser = _arg_parser()
    args = parser.parse_args(argv)
    if not is_loopback_host(args.host):
        parser.error(
            f"refusing non-loopback host {args.host!r}: "
            "only 127.0.0.0/8, localhost and ::1 are allowed"
        )
    if not 0 <= args.port <= 65535:
        parser.error(f"invalid port {args.port}")
    script = _read_script(parser, args.script) if args.script else None
    llm = _scripted_server(parser, args, script)
    _serve_until_signal(llm)
    return 0


def _arg_parser() -> argparse.ArgumentParser:
    """The ``nl2sql-loopback`` command line."""
    parser = argparse.ArgumentParser(
        prog="nl2sql-loopback",
        description="OpenAI-compatible chat-completions server on loopback whose answers are "
        "SCRIPTED (rules/replays/default), not produced by a model.",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="loopback address to bind (127.0.0.0/8, localhost, ::1); default 127.0.0.1",
    )
    parser.add_argument(
        "--port", type=int, default=0, help="TCP port; 0 picks a free one (default)"
    )
    parser.add_argument(
        "--script",
        metavar="FILE",
        help='JSON: {"rules": [...], "replays": [{"model","answers"}], "default": str|null}',
    )
    parser.add_argument("--verbose", action="store_true", help="log each HTTP request to stderr")
    return parser


def _read_script(parser: argparse.ArgumentParser, path: str) -> Any:
    """The JSON of the ``--script`` file (exits with a usage error when unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        parser.error(f"cannot read script {path!r}: {e}")


def _scripted_server(
    parser: argparse.ArgumentParser, args: argparse.Namespace, script: Any
) -> LoopbackLLM:
    """A bound (not started) server with ``script`` loaded (exits with a usage error when it
    cannot listen or the script is invalid)."""
    try:
        llm = LoopbackLLM(host=args.host, port=args.port)
    except OSError as e:
        parser.error(f"cannot listen on {args.host}:{args.port}: {e}")
    llm.verbose = args.verbose
    if script is not None:
        try:
            llm.load_script(script)
        except (ValueError, TypeError) as e:
            llm.stop()
            parser.error(f"invalid script {args.script!r}: {e}")
    return llm


def _serve_until_signal(llm: LoopbackLLM) -> None:
    """Start ``llm`` and serve until SIGINT or SIGTERM; then stop it and restore the handlers."""
    done = threading.Event()

    def _on_signal(signum, frame):
        done.set()

    old_int = signal.signal(signal.SIGINT, _on_signal)
    old_term = signal.signal(signal.SIGTERM, _on_signal)
    llm.start()
    print(f"loopback LLM (scripted answers, not a model) listening on {llm.base_url}", flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        llm.stop()
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


if __name__ == "__main__":
    sys.exit(main())
