"""HTTP over the shared embedder's Unix socket with the standard library's ``http.client`` (a
backend's first call imports ~1 MB of it, not httpx's stack: docs/benchmarks.md, "A question's
own cost"); kept-alive connections, one per request in flight; every request under one overall
deadline (``net.deadline``, docs/internals/net.md)."""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading

from ..core.errors import (
    DeadlineExceeded,
    EmbedderConnectError,
    EmbedderTimeout,
    EmbedderTransportError,
)
from ..net import deadline
from ..net.deadline import Deadline
from ..net.fetch import read_body

MAX_BODY_BYTES = 64 << 20  # the most of a reply read (a chunk's vectors: about 1 MB), bytes


class Response:
    """A reply: its status and body."""

    def __init__(self, status: int, body: bytes):
        self.status_code = status
        self.content = body

    @property
    def text(self) -> str:
        """The body as text (undecodable bytes replaced)."""
        return self.content.decode("utf-8", "replace")

    def json(self):
        """The body parsed as JSON.

        Returns:
            The parsed value.

        Raises:
            ValueError: the body is not JSON.
        """
        return json.loads(self.content)


class _UnixConnection(http.client.HTTPConnection):
    """An ``HTTPConnection`` whose ``connect`` opens an ``AF_UNIX`` socket; http.client does the
    HTTP."""

    def __init__(self, path: str, timeout: float):
        super().__init__("nl2sql-embedder", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        """Open the Unix socket (the time limit applies to the connect too)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.unix_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class UnixClient:
    """Kept-alive HTTP connections to a Unix socket (as ``httpx.Client(uds=...)`` was): safe
    to share between threads, each request on a connection of its own (an idle one reused).

    Args:
        path: the socket's path.
        timeout: the default time limit of a request, in seconds.
    """

    def __init__(self, path: str, timeout: float = 60.0):
        self.path = path
        self.timeout = timeout
        self._idle: list[_UnixConnection] = []
        self._lock = threading.Lock()
        self._conn: _UnixConnection | None = None  # the last one used (tests)

    def _connection(self, d: Deadline) -> _UnixConnection:
        """An idle kept-alive connection, else a new one; its socket watched by ``d``."""
        conn = None
        with self._lock:
            while self._idle and conn is None:
                conn = self._idle.pop()
                if conn.sock is None or _closed_by_peer(conn.sock):
                    conn.close()  # the server closed a kept-alive connection: not reused
                    conn = None
        if conn is None:
            conn = _UnixConnection(self.path, max(d.left(), 0.001))
            try:
                conn.connect()
            except (FileNotFoundError, ConnectionRefusedError) as e:
                raise EmbedderConnectError(type(e).__name__) from None
            except TimeoutError:
                raise EmbedderTimeout("connect") from None
            except OSError as e:
                raise EmbedderConnectError(type(e).__name__) from None
        conn.timeout = max(d.left(), 0.001)
        conn.sock.settimeout(conn.timeout)
        d.watch(conn.sock)
        self._conn = conn
        return conn

    def request(
        self, method: str, url: str, json_body=None, timeout: float | None = None
    ) -> Response:
        """Send one request and read its whole reply, under one overall deadline
        (``net.deadline.run``: inside PostgreSQL a cancel lands while it waits).

        Args:
            method: ``GET`` or ``POST``.
            url: the path, e.g. ``/v1/embeddings``.
            json_body: the body, sent as JSON (None: no body).
            timeout: this request's overall deadline in seconds (None: the client's).

        Returns:
            The reply.

        Raises:
            EmbedderConnectError: nothing accepted the connection.
            EmbedderTimeout: no connection or complete reply within the deadline.
            EmbedderTransportError: the connection broke, or the reply passed ``MAX_BODY_BYTES``
                (``ReplyTooLarge``, an ``OSError``).
        """
        body = None if json_body is None else json.dumps(json_body).encode()
        seconds = self.timeout if timeout is None else timeout
        try:
            return deadline.run(
                lambda d: self._exchange(method, url, body, d), seconds, f"the embedder's {url}"
            )
        except DeadlineExceeded:
            raise EmbedderTimeout(url) from None

    def _exchange(self, method: str, url: str, body: bytes | None, d: Deadline) -> Response:
        """One request on a kept-alive connection, its reply read up to ``MAX_BODY_BYTES``."""
        conn = self._connection(d)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            conn.request(method, url, body=body, headers=headers)
            resp = conn.getresponse()
            data = read_body(resp, MAX_BODY_BYTES)
        except TimeoutError:
            conn.close()
            raise EmbedderTimeout(url) from None
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise EmbedderTransportError(type(e).__name__) from None
        if d.expired:  # a body read "until close" ends at the shutdown too
            conn.close()
            raise d.error()
        if resp.will_close:
            conn.close()
        else:
            with self._lock:
                self._idle.append(conn)
        return Response(resp.status, data)

    def post(self, url: str, json=None, timeout: float | None = None) -> Response:
        """``request('POST', ...)``.

        Args:
            url: the path.
            json: the body, sent as JSON.
            timeout: the time limit in seconds (None: the client's).

        Returns:
            The reply (errors: as ``request`` raises them).
        """
        return self.request("POST", url, json, timeout)

    def get(self, url: str, timeout: float | None = None) -> Response:
        """``request('GET', ...)``.

        Args:
            url: the path.
            timeout: the time limit in seconds (None: the client's).

        Returns:
            The reply (errors: as ``request`` raises them).
        """
        return self.request("GET", url, None, timeout)

    def close(self) -> None:
        """Close the kept connections (a later request opens a new one)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether a kept-alive idle connection is readable, i.e. the peer closed it (as httpcore
    checks before reusing one)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
