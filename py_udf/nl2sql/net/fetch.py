"""HTTP requests with the standard library (``urllib.request``: the environment's proxies, the
system's CAs, redirects) under ``deadline.run``: every connection's socket, the TLS handshake's
included, is watched by the request's deadline, and a body is read only up to a size
(docs/internals/net.md)."""

from __future__ import annotations

import functools
import http.client
import json
import socket
import urllib.error
import urllib.request

from ..core.errors import ReplyTooLarge
from . import deadline as _deadline
from .deadline import Deadline

__all__ = ["fetch", "fetch_json", "read_body"]

MAX_BODY_BYTES = 8 << 20  # the most of a reply's body a probe reads, bytes


def _connect(d: Deadline, address, timeout=None, source_address=None) -> socket.socket:
    """``socket.create_connection`` bounded by the time left, its socket watched by ``d``."""
    d.check()
    sock = socket.create_connection(address, max(min(d.left(), timeout or d.left()), 0.001))
    return d.watch(sock)


class _HTTPConnection(http.client.HTTPConnection):
    def __init__(self, host, *, deadline: Deadline, **kw):
        super().__init__(host, **kw)
        self._create_connection = functools.partial(_connect, deadline)


class _HTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host, *, deadline: Deadline, **kw):
        super().__init__(host, **kw)
        self._create_connection = functools.partial(_connect, deadline)


def _opener(d: Deadline) -> urllib.request.OpenerDirector:
    """An opener whose connections the deadline watches (redirects and proxies as urllib's)."""

    class Plain(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(functools.partial(_HTTPConnection, deadline=d), req)

    class Secure(urllib.request.HTTPSHandler):
        def https_open(self, req):
            conn = functools.partial(_HTTPSConnection, deadline=d)
            return self.do_open(conn, req, context=self._context)

    return urllib.request.build_opener(Plain, Secure)


def read_body(resp: http.client.HTTPResponse, max_bytes: int) -> bytes:
    """A response's whole body, at most ``max_bytes``: one announced larger is refused unread,
    one cut short raises (``read(amt)`` would return the part that came as if it were all).

    Args:
        resp: the response, its headers read; max_bytes: the most read.

    Returns:
        The body.

    Raises:
        ReplyTooLarge: the body is (or is announced) over ``max_bytes``.
        http.client.IncompleteRead: the connection ended before the announced length.
    """
    if resp.length is not None:
        if resp.length > max_bytes:
            raise ReplyTooLarge(f"a reply of {resp.length} bytes announced, over {max_bytes}")
        return resp.read()
    raw = resp.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise ReplyTooLarge(f"a reply's body over {max_bytes} bytes")
    return raw


def _request(url: str, body: dict | None, d: Deadline, max_bytes: int) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, method="GET" if body is None else "POST", headers={"Accept": "*/*"}
    )
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with _opener(d).open(req, timeout=max(d.left(), 0.001)) as resp:
            status, raw = resp.status, read_body(resp, max_bytes)
    except urllib.error.HTTPError as e:
        e.close()
        return e.code, b""
    d.check()  # a body read "until close" ends at the shutdown too: not a complete reply
    return status, raw


def fetch(
    url: str, body: dict | None, seconds: float, what: str, max_bytes: int = MAX_BODY_BYTES
) -> tuple[int, bytes]:
    """One HTTP request (GET, or POST of ``body`` as JSON) under one overall deadline.

    Args:
        url: the address (``http`` or ``https``).
        body: the JSON body of a POST; None for a GET.
        seconds: the overall deadline, from the request's start to the body's last byte.
        what: what is asked, for errors (no secret in it).
        max_bytes: the most of the body read.

    Returns:
        ``(HTTP status, body)``; an HTTP error status is returned with an empty body.

    Raises:
        DeadlineExceeded: no complete reply within ``seconds``.
        ReplyTooLarge: the body passed ``max_bytes``.
        OSError: the connection failed (``urllib.error.URLError`` among them).
    """
    return _deadline.run(lambda d: _request(url, body, d, max_bytes), seconds, what)


def fetch_json(url: str, body: dict | None, seconds: float, what: str) -> tuple[int, object]:
    """``fetch`` with the reply read as JSON.

    Args:
        url, body, seconds, what: as ``fetch``.

    Returns:
        ``(HTTP status, the parsed body or None when it is not JSON)``.

    Raises:
        DeadlineExceeded, ReplyTooLarge, OSError: as ``fetch``.
    """
    status, raw = fetch(url, body, seconds, what)
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, None
