"""Hostile HTTP servers on loopback (or a Unix socket), for the tests of every outbound path.

Each answers the paths it is told to in one hostile way (``MODES``) and every other path with a
quick 404, so that a test can make exactly one request of a call hostile (``/props`` while the
chat completion would answer). Nothing here is a model; it only misbehaves at the transport.

- ``half_open``: accepts the connection, reads nothing, never answers;
- ``headers_trickle``: a status line, then a header one byte every ``interval_s``, forever;
- ``body_trickle``: complete headers (a JSON body of 1 MB announced), then one byte every
  ``interval_s``;
- ``chunked_endless``: a chunked body of ``{`` chunks that never ends;
- ``huge_body``: 2 GB announced and sent as fast as the client reads;
- ``reset_mid_body``: 100 bytes of a 1,000-byte body, then a TCP reset;
- ``redirect_loop``: ``302`` to the same path, every time;
- ``tls_stall``: accepts and never answers (the client speaks TLS to it: a handshake that stalls).
"""

from __future__ import annotations

import os
import socket
import socketserver
import struct
import threading

__all__ = ["MODES", "HostileServer"]

MODES = (
    "half_open",
    "headers_trickle",
    "body_trickle",
    "chunked_endless",
    "huge_body",
    "reset_mid_body",
    "redirect_loop",
    "tls_stall",
)


class _Handler(socketserver.BaseRequestHandler):
    server: _TCP | _Unix

    def handle(self) -> None:
        owner: HostileServer = self.server.owner
        if owner.mode in ("half_open", "tls_stall"):  # the path is never read: every one
            owner.hits.append("?")
            owner.stop_event.wait()
            return
        head = self._read_head()
        if head is None:
            return
        path = head.split(b" ", 2)[1].decode("latin-1") if head.count(b" ") >= 2 else "/"
        owner.paths_asked.append(path)
        if not any(path.split("?")[0].endswith(p) for p in owner.paths):
            body = b'{"error": {"message": "not here"}}'
            self._send(
                b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
            )
            return
        owner.hits.append(path)
        getattr(self, "_" + owner.mode)(path)

    def _read_head(self) -> bytes | None:
        """The request up to its blank line (its body, if any, is left unread)."""
        data = b""
        self.request.settimeout(30)
        while b"\r\n\r\n" not in data:
            try:
                got = self.request.recv(65536)
            except OSError:
                return None
            if not got:
                return None
            data += got
        return data

    def _send(self, data: bytes) -> bool:
        try:
            self.request.sendall(data)
            return True
        except OSError:
            return False

    def _drip(self, byte: bytes) -> None:
        owner = self.server.owner
        while not owner.stop_event.wait(owner.interval_s):
            if not self._send(byte):
                return

    def _headers_trickle(self, path: str) -> None:
        if self._send(b"HTTP/1.1 200 OK\r\nX-Slow: "):
            self._drip(b"a")

    def _body_trickle(self, path: str) -> None:
        if self._send(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"
        ):
            self._drip(b" ")

    def _chunked_endless(self, path: str) -> None:
        ok = self._send(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"400\r\n" + b" " * 1024 + b"\r\n"
        while ok and not self.server.owner.stop_event.is_set():
            ok = self._send(chunk)

    def _huge_body(self, path: str) -> None:
        ok = self._send(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: 2147483648\r\n\r\n"
        )
        block = b" " * 65536
        sent = 0
        while ok and sent < 2147483648 and not self.server.owner.stop_event.is_set():
            ok = self._send(block)
            sent += len(block)

    def _reset_mid_body(self, path: str) -> None:
        self._send(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n" + b" " * 100
        )
        if self.request.family != socket.AF_UNIX:
            self.request.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.request.close()

    def _redirect_loop(self, path: str) -> None:
        self._send(
            b"HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\n"
            b"Connection: close\r\n\r\n" % path.encode()
        )


class _TCP(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False


class _Unix(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    block_on_close = False


class HostileServer:
    """A hostile server in a daemon thread: ``with HostileServer("body_trickle") as s: s.url``.

    Args:
        mode: one of ``MODES``.
        paths: the path endings answered in that mode (others: 404); default every path.
        interval_s: the pause between two trickled bytes, seconds.
        unix_path: listen on this Unix socket instead of 127.0.0.1.
    """

    def __init__(
        self,
        mode: str,
        paths: tuple[str, ...] = ("",),
        interval_s: float = 0.1,
        unix_path: str | None = None,
    ):
        if mode not in MODES:
            raise ValueError(f"unknown hostile mode {mode!r}: one of {', '.join(MODES)}")
        self.mode, self.paths, self.interval_s = mode, paths, interval_s
        self.stop_event = threading.Event()
        self.hits: list[str] = []  # the path of each request answered in ``mode``
        self.paths_asked: list[str] = []
        if unix_path is not None:
            if os.path.exists(unix_path):
                os.unlink(unix_path)
            self._server: _TCP | _Unix = _Unix(unix_path, _Handler)
        else:
            self._server = _TCP(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"hostile-{mode}",
            daemon=True,
        )

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """The server's ``/v1`` base URL (``https`` for ``tls_stall``)."""
        scheme = "https" if self.mode == "tls_stall" else "http"
        return f"{scheme}://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Release every held connection and stop listening."""
        self.stop_event.set()
        self._server.shutdown()
        self._server.server_close()
