"""One overall deadline for every network read, and the wait that lets a cancel land
(docs/internals/net.md "The rule").

A ``Deadline`` is wall-clock time from the start of a request to its last byte, not a per-read
timeout: one watchdog thread shuts down the sockets a deadline watches when it passes, which
wakes a read blocked on a server that trickles a byte before each per-read timeout. ``run``
makes the request; inside PostgreSQL (``install``) the backend's main thread never makes it
itself: it waits in ``SLICE_S`` slices on a call thread and runs the cancel point between them,
so ``pg_cancel_backend``, ``pg_terminate_backend`` and ``statement_timeout`` land within a slice.
"""

from __future__ import annotations

import heapq
import itertools
import queue
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from ..core.errors import DeadlineExceeded
from . import _exit

__all__ = [
    "Deadline",
    "Group",
    "cancelled",
    "install",
    "raise_cancel",
    "run",
    "spawn",
    "tick",
]

T = TypeVar("T")
SLICE_S = 0.2  # the main thread's wait between two cancel points, seconds
MAX_IDLE_THREADS = 16  # call threads kept waiting for the next job

_HOOK: dict[str, Callable[[], None] | None] = {"cancel_point": None}
_LOCAL = threading.local()  # .group: the Group whose deadlines this thread's job creates


def install(cancel_point: Callable[[], None] | None) -> None:
    """Name the process's cancel point: inside PostgreSQL a trivial SPI statement (PostgreSQL
    checks for interrupts only inside statements); None beside the database, where Ctrl-C is
    Python's own ``KeyboardInterrupt`` and interrupts a blocking read by itself.

    Args:
        cancel_point: called on the main thread between slices of a wait; it raises to cancel.
    """
    _HOOK["cancel_point"] = cancel_point


def _on_main() -> bool:
    return threading.current_thread() is threading.main_thread()


def tick() -> None:
    """Let a pending cancel land now, on the main thread of a process that installed a cancel
    point (a no-op elsewhere): for loops that wait on something other than a socket.

    Raises:
        Exception: whatever the cancel point raises (QueryCanceled; a terminate ends the backend).
    """
    hook = _HOOK["cancel_point"]
    if hook is not None and _on_main():
        try:
            hook()
        except BaseException as e:
            e.nl2sql_cancel = True  # callers that catch broadly let it through (``cancelled``)
            raise


def raise_cancel(e: BaseException) -> None:
    """Raise ``e`` again when it is a cancel (``cancelled``): for handlers that catch every
    failure of a request.

    Args:
        e: a caught exception.

    Raises:
        BaseException: ``e``, when it is a cancel.
    """
    if cancelled(e):
        raise e


def cancelled(e: BaseException) -> bool:
    """Whether ``e`` is a cancel that ``tick`` let land (a caller that catches every failure of
    a request must raise it again: the statement is being cancelled or the backend terminated).

    Args:
        e: a caught exception.

    Returns:
        True for the cancel point's exception.
    """
    return bool(getattr(e, "nl2sql_cancel", False))


class Group:
    """The deadlines a piece of work created (a model round's calls, one ``run``): ``expire``
    ends them all at once, so an abandoned call stops reading now rather than at its deadline."""

    def __init__(self) -> None:
        self._members: list[Deadline] = []
        self._lock = threading.Lock()

    def add(self, d: Deadline) -> None:
        """Keep ``d`` in the group (the finished ones are dropped).

        Args:
            d: a deadline of the group's work.
        """
        with self._lock:
            self._members = [m for m in self._members if not m.finished]
            self._members.append(d)

    def expire(self) -> None:
        """Expire every deadline of the group still running."""
        with self._lock:
            members = list(self._members)
        for d in members:
            d.expire()


class Deadline:
    """A request's overall deadline: ``seconds`` from now, over every socket it ``watch``es.

    Args:
        seconds: the time allowed, from now to the last byte.
        what: what is asked, for the error (``model 'm' at http://…``).
    """

    def __init__(self, seconds: float, what: str = "the request"):
        self.seconds, self.what = max(float(seconds), 0.0), what
        self.at = time.monotonic() + self.seconds
        self.expired = self.finished = False
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []  # duplicates of the watched sockets' descriptors
        group = getattr(_LOCAL, "group", None)
        if group is not None:
            group.add(self)
        _WATCHDOG.add(self)

    def left(self) -> float:
        """The time left.

        Returns:
            Seconds (negative when past).
        """
        return self.at - time.monotonic()

    def check(self) -> None:
        """Raise ``DeadlineExceeded`` when the deadline passed or was expired."""
        if self.expired or self.left() <= 0:
            raise self.error()

    def error(self) -> DeadlineExceeded:
        """The error of a request this deadline ended.

        Returns:
            ``DeadlineExceeded`` naming what was asked and the deadline.
        """
        return DeadlineExceeded(
            f"{self.what}: no complete answer within {self.seconds:.3g} s (overall deadline; "
            f"connection closed)"
        )

    def watch(self, sock: socket.socket) -> socket.socket:
        """Shut ``sock`` down when the deadline passes (at once if it already has). A duplicate
        of its descriptor is kept: TLS detaches the socket object it wraps, and ``shutdown``
        acts on the connection whichever descriptor names it.

        Args:
            sock: a connected (or connecting) socket.

        Returns:
            ``sock``.
        """
        try:
            dup = sock.dup()
        except OSError:
            return sock
        with self._lock:
            if not self.finished:
                self._socks.append(dup)
                dup = None
            expired = self.expired
        if dup is not None:
            dup.close()
        elif expired:
            self._shut_all()
        return sock

    def expire(self) -> None:
        """End the request now: shut down every watched socket (a no-op once finished)."""
        with self._lock:
            if self.finished:
                return
            self.expired = True
        self._shut_all()

    def _shut_all(self) -> None:
        with self._lock:
            socks = list(self._socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed by the peer or by the request
                pass

    def finish(self) -> bool:
        """Stop the clock at the request's end and drop the duplicates.

        Returns:
            True when the deadline had not ended the request (its connections stay usable).
        """
        with self._lock:
            self.finished = True
            socks, self._socks = self._socks, []
        for s in socks:
            s.close()
        return not self.expired


class _Watchdog:
    """One daemon thread that expires deadlines when they pass (a heap of their times)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Deadline]] = []
        self._cv = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, d: Deadline) -> None:
        with self._cv:
            heapq.heappush(self._heap, (d.at, next(self._seq), d))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="nl2sql-deadline", daemon=True
                )
                self._thread.start()
            self._cv.notify()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._heap and self._heap[0][2].finished:
                    heapq.heappop(self._heap)
                wait = self._heap[0][0] - time.monotonic() if self._heap else None
                if wait is None or wait > 0:
                    self._cv.wait(wait)
                    continue
                d = heapq.heappop(self._heap)[2]
            d.expire()

    def expire_all(self) -> None:
        """Expire every deadline not finished yet (the process is ending)."""
        with self._cv:
            live = [d for _, _, d in self._heap if not d.finished]
        for d in live:
            d.expire()


_WATCHDOG = _Watchdog()

# -- call threads: kept between jobs ---------------------------------------------------------
_IDLE: list[queue.SimpleQueue] = []  # one inbox per idle call thread
_IDLE_LOCK = threading.Lock()
_BUSY = [0]  # call threads running a job now


def spawn(fn: Callable[..., T], *args, name: str = "nl2sql-call", group: Group | None = None):
    """Run ``fn(*args)`` in a daemon thread (an idle one of an earlier job, else a new one);
    the deadlines it creates join ``group``.

    Args:
        fn: the job; args: its arguments.
        name: the thread's name while it runs the job (``nl2sql-idle`` while it waits).
        group: where the job's deadlines are kept, or None.

    Returns:
        A ``concurrent.futures.Future`` holding the job's result or exception.
    """
    if _HOOK["cancel_point"] is not None:  # inside PostgreSQL: a terminate must end cleanly
        _exit.guard(lambda: _BUSY[0] > 0, _WATCHDOG.expire_all)
    fut: Future = Future()
    fut.set_running_or_notify_cancel()
    job = (fut, fn, args, name, group)
    with _IDLE_LOCK:
        inbox = _IDLE.pop() if _IDLE else None
    if inbox is not None:
        inbox.put(job)
    else:
        threading.Thread(target=_call_thread, args=(job,), name=name, daemon=True).start()
    return fut


def _call_thread(job: tuple) -> None:
    """Run jobs one after the other; end when ``MAX_IDLE_THREADS`` others already wait."""
    inbox: queue.SimpleQueue = queue.SimpleQueue()
    me = threading.current_thread()
    while True:
        fut, fn, args, me.name, _LOCAL.group = job
        with _IDLE_LOCK:
            _BUSY[0] += 1
        try:
            fut.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001 (handed to the waiter)
            fut.set_exception(e)
        finally:
            with _IDLE_LOCK:
                _BUSY[0] -= 1
        del fut, fn, args, job  # nothing of the job is kept while idle
        _LOCAL.group = None
        with _IDLE_LOCK:
            if len(_IDLE) >= MAX_IDLE_THREADS:
                return
            me.name = "nl2sql-idle"
            _IDLE.append(inbox)
        job = inbox.get()


def run(fn: Callable[[Deadline], T], seconds: float, what: str) -> T:
    """Make a request under one overall deadline, yielding to cancel.

    On the main thread of a backend (a cancel point installed) ``fn`` runs on a call thread
    while the main thread waits in ``SLICE_S`` slices and runs the cancel point between them;
    elsewhere (a call thread, a client process) it runs here, its sockets shut at the deadline.

    Args:
        fn: the request, given its ``Deadline``: it must ``watch`` every socket it opens or
            reuses and bound each blocking call by ``Deadline.left()``.
        seconds: the overall deadline, seconds.
        what: what is asked, for the error.

    Returns:
        ``fn``'s result.

    Raises:
        DeadlineExceeded: the deadline passed first (also when ``fn`` failed because of it).
        Exception: ``fn``'s own errors; the cancel point's (the request is ended first).
    """
    d, group = Deadline(seconds, what), Group()
    group.add(d)
    try:
        if _HOOK["cancel_point"] is not None and _on_main():
            return _wait_sliced(spawn(fn, d, name="nl2sql-net", group=group), d, group)
        try:
            return fn(d)
        except Exception as e:  # noqa: BLE001 (raised again: the deadline's error when it ended it)
            raise _why(e, d) from None
        except BaseException:  # Ctrl-C beside the database: the request ends now
            group.expire()
            raise
    finally:
        d.finish()


def _why(e: Exception, d: Deadline) -> Exception:
    """The error of a request that failed: the deadline's when it had ended the request."""
    return d.error() if d.expired and not isinstance(e, DeadlineExceeded) else e


def _wait_sliced(fut: Future, d: Deadline, group: Group):
    """Wait for ``fut`` in slices, the cancel point between them, until ``d`` passes; on a
    cancel or at the deadline the request's sockets are shut down (its thread ends now)."""
    while True:
        left = d.left()
        if left <= 0 or d.expired:
            group.expire()
            raise d.error()
        try:
            return fut.result(timeout=min(SLICE_S, left))
        except FutureTimeout:
            pass
        except Exception as e:  # noqa: BLE001 (raised again: the deadline's error when it ended it)
            raise _why(e, d) from None
        try:
            tick()
        except BaseException:
            group.expire()
            raise
