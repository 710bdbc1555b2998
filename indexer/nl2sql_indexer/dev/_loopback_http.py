"""The HTTP side of the loopback server: a threading HTTP server on loopback and the handler
that speaks the chat-completions protocol (and the admin endpoints) for its owner, a
:class:`~nl2sql_indexer.dev.loopback.LoopbackLLM`. Its answers are scripted, not a model's.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from nl2sql_indexer.dev import _loopback_embed
from nl2sql_indexer.dev._loopback_profiles import (
    Profile,
    context_refusal,
    error_body,
    llamacpp_props,
    ollama_show,
    output_cap,
    request_refusal,
    shaped_answer,
)
from nl2sql_indexer.dev._loopback_script import (
    Reply,
    count_usage,
    replay_from_dict,
    rule_from_dict,
)

if TYPE_CHECKING:  # the owner's type only: loopback imports this module
    from nl2sql_indexer.dev.loopback import LoopbackLLM

__all__ = ["ChatHandler", "LoopbackHTTPServer", "LoopbackHTTPServer6"]

_HANG_MAX_S = 3600.0
_MAX_BODY = 64 * 1024 * 1024
_ADMIN = ("/_rules", "/_replay", "/_clear", "/_default", "/_profile", "/_embedding")


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


class LoopbackHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that knows its LoopbackLLM and tracks open connections."""

    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    # many backends connect at once (a soak's 16 sessions, two models each): the default
    # listen backlog of 5 dropped connections under that load ("Connection error.")
    request_queue_size = 256

    def __init__(self, addr, handler, owner: LoopbackLLM):
        self.owner = owner
        self.conns: set[socket.socket] = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, handler)

    def handle_error(self, request, client_address) -> None:
        """Print a failed request's traceback, except a client gone before its answer (it timed
        out on a delayed or hanging reply, as clients under test do): that is no error here."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class LoopbackHTTPServer6(LoopbackHTTPServer):
    """IPv6 variant (for ``::1``)."""

    address_family = socket.AF_INET6


class ChatHandler(BaseHTTPRequestHandler):
    """Request handler: routes to the owning LoopbackLLM."""

    protocol_version = "HTTP/1.1"
    server_version = "nl2sql-loopback/0.1 (scripted answers, not a model)"
    # TCP_NODELAY: headers and body go out in two writes; with Nagle's algorithm the body waited
    # for the client's delayed ACK, and one reply in five arrived ~40 ms late
    disable_nagle_algorithm = True
    server: LoopbackHTTPServer

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
        stop = self.server.owner.stop_event
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
        """GET /v1/models, GET /_requests, GET /props (a llama.cpp-profiled model)."""
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
        elif path == "/props":
            # ?model=NAME as llama-server's router mode takes it: that model's props only
            asked = parse_qs(urlsplit(self.path).query).get("model", [None])[0]
            served = owner.profiled("llamacpp")
            if asked is not None:
                mine = owner.profile_of(asked)
                served = (asked, mine[1]) if mine and mine[1].context == "llamacpp" else None
            if served is None:
                self._send_error(404, "no model has the llamacpp profile on this loopback server")
            else:
                self._send_json(200, llamacpp_props(served[1], served[0]))
        elif path in ("/v1/chat/completions", "/api/show", *_ADMIN):
            self._send_error(405, f"method GET not allowed on {path}")
        else:
            self._send_error(404, f"unknown path {path!r}")

    def do_POST(self):
        """POST /v1/chat/completions, /api/show (an Ollama-profiled model) and the admin
        endpoints."""
        path = self._path()
        if path in ("/v1/chat/completions", "/api/show", "/v1/embeddings"):
            ok, body = self._read_json()
            if ok and path == "/api/show":
                self._show(body)
            elif ok and path == "/v1/embeddings":
                self._embeddings(body)
            elif ok:
                self._chat(body)
            return
        if path in _ADMIN:
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
        if path in ("/v1/models", "/_requests", "/props"):
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
                rules = [rule_from_dict(d) for d in body]
                for r in rules:
                    owner.add_rule(r)
                self._send_json(200, {"ok": True, "added": len(rules)})
            elif path == "/_replay":
                model, answers, delay_s = replay_from_dict(body)
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
            elif path == "/_profile":
                if not isinstance(body, dict) or "model" not in body or "profile" not in body:
                    raise ValueError('expected {"model": str, "profile": name or null, ...options}')
                options = {k: v for k, v in body.items() if k not in ("model", "profile")}
                owner.set_profile(body["model"], body["profile"], **options)
                self._send_json(200, {"ok": True, "model": body["model"]})
            elif path == "/_embedding":
                _loopback_embed.set_embedding(owner, **body)
                self._send_json(200, {"ok": True})
        except (ValueError, TypeError) as e:
            self._send_error(400, str(e))

    def _embeddings(self, body: Any) -> None:
        """``POST /v1/embeddings`` (``_loopback_embed``): a JSON reply, or a scripted fault."""
        status, obj = _loopback_embed.reply(self.server.owner, body)
        if isinstance(obj, str):
            _loopback_embed.send_fault(self, obj, self.server.owner.stop_event)
        else:
            self._send_json(status, obj)

    def _show(self, body: Any) -> None:
        """Ollama's ``POST /api/show`` for a model with the ollama profile; Ollama's 404 body
        (``{"error": "model 'x' not found"}``) for any other."""
        owner = self.server.owner
        model = (body.get("model") or body.get("name")) if isinstance(body, dict) else None
        named = owner.profile_of(model) if isinstance(model, str) else None
        if named is None or named[1].context != "ollama":
            self._send_json(404, {"error": f"model '{model}' not found"})
            return
        self._send_json(200, ollama_show(named[1], model))

    # -- chat ---------------------------------------------------------------------------------
    def _chat(self, body: Any) -> None:
        owner = self.server.owner
        refusal = _chat_refusal(body)
        if refusal is not None:
            self._send_error(400, *refusal)
            return
        model, messages, n = body["model"], body["messages"], _n_of(body)
        name, profile = owner.profile_of(model) or (None, None)
        refused = _profile_refusal(profile, body) if profile is not None else None
        owner.record_request(body, n, name, refused[0] if refused else None, self.client_address[1])
        if refused is not None:
            self._send_json(*refused)
            return
        reply = owner.reply_to(model, messages)
        if profile is not None and profile.kv_unified:
            self._chat_in_shared_cache(body, reply, n, profile)
            return
        if self._held(reply, profile.delay_s if profile is not None else 0.0):
            return
        if reply.status != 200:
            self._send_error(reply.status, reply.message, reply.code)
            return
        overflow = _generation_overflow(profile, body, reply) if profile is not None else None
        if overflow is not None:
            self._send_json(*overflow)
            return
        self._send_json(200, _completion(body, reply, n, profile), reply.trickle_s)

    def _chat_in_shared_cache(self, body: dict, reply: Reply, n: int, profile: Profile) -> None:
        """Answer as a llama.cpp server whose slots share one KV cache: the request holds its
        prompt and output cap in the cache while it is answered; over the window with the
        others in flight, it is refused with 500."""
        owner = self.server.owner
        need = count_usage(body["messages"], "", 1)[0] + (output_cap(profile, body) or 0)
        owner.kv_hold(body["model"], need)
        try:
            if self._held(reply, profile.delay_s):
                return
            if owner.kv_held(body["model"]) > profile.context_window:
                self._send_json(500, error_body(profile, 500, "Context size has been exceeded."))
                return
            self._send_json(200, _completion(body, reply, n, profile), reply.trickle_s)
        finally:
            owner.kv_hold(body["model"], -need)

    def _held(self, reply: Reply, extra_delay_s: float = 0.0) -> bool:
        """Hang or wait as ``reply`` says (plus the profile's ``extra_delay_s``); True when the
        request ended meanwhile (the server stopped: connection closed; or a hang released by
        clear(): a 400 sent)."""
        owner = self.server.owner
        stop = owner.stop_event
        if reply.hang:
            released = owner.release_event
            released.wait(_HANG_MAX_S)
            if stop.is_set():
                self.close_connection = True
                return True
            # released by clear(): a 400 is not retried by clients, so an abandoned call does
            # not come back as a stray request in a later script
            self._send_error(400, "hanging request released by clear()", "released")
            return True
        delay_s = reply.delay_s + extra_delay_s
        if delay_s > 0 and stop.wait(delay_s):
            self.close_connection = True
            return True
        return False


def _profile_refusal(profile: Profile, body: dict) -> tuple[int, Any] | None:
    """The profile's refusal of the request: its parameters, else a prompt over the context
    window (llama.cpp); None when the provider takes it."""
    refused = request_refusal(profile, body)
    if refused is not None:
        return refused
    prompt_tokens = count_usage(body["messages"], "", 1)[0]
    return context_refusal(profile, prompt_tokens, None)


def _generation_overflow(profile: Profile, body: dict, reply: Reply) -> tuple[int, Any] | None:
    """llama.cpp's 500 when prompt and answer together outgrow the slot's context, else None."""
    prompt_tokens, answer_tokens = count_usage(body["messages"], reply.content, 1)
    cap = output_cap(profile, body)
    generated = answer_tokens if cap is None else min(cap, answer_tokens)
    return context_refusal(profile, prompt_tokens, generated)


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


def _completion(body: dict, reply: Reply, n: int, profile: Profile | None = None) -> dict:
    """The chat-completions answer: ``n`` choices of the scripted content, and the ``usage`` a
    real endpoint reports (``count_usage``) unless the rule said ``usage: false``; shaped as the
    model's provider does (``shaped_answer``) when it has a profile."""
    model, messages = body["model"], body["messages"]
    out = {
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
    }
    if profile is not None:
        out["choices"], usage = shaped_answer(profile, messages, body, reply.content, n)
        if reply.usage:
            out["usage"] = usage
        return out
    if isinstance(reply.usage, dict):
        out["usage"] = reply.usage
    elif reply.usage:
        prompt_tokens, completion_tokens = count_usage(messages, reply.content, n)
        out["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return out
