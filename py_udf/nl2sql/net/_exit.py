"""A backend that ends while a call thread works must end cleanly (docs/internals/net.md "A
backend that ends").

``pg_terminate_backend`` ends a backend inside the cancel point: PostgreSQL's ``proc_exit`` does
its own cleanup, then calls the C library's ``exit()``, which runs the exit handlers the shared
libraries registered. OpenSSL's frees its global state while a call thread may still be inside
OpenSSL without the GIL (building a TLS context, reading a TLS record): the backend then dies of
SIGSEGV, and the postmaster restarts every session. So, inside PostgreSQL, nl2sql registers an
exit handler of its own after OpenSSL's (handlers run last-registered first): when a call thread
is still at work it shuts every request's sockets and ends the process with ``_exit(1)``, the
status of a FATAL exit, before any library's handler runs; with no call thread at work it does
nothing and the exit goes on as before."""

from __future__ import annotations

import ctypes
import os
import sys
import threading

__all__ = ["guard"]

_STATE: dict = {"handler": None, "busy": lambda: False, "expire_all": lambda: None}
_LOCK = threading.Lock()


def guard(busy, expire_all) -> None:
    """Register the exit handler, once per backend (later calls, and any call outside
    PostgreSQL, do nothing).

    Args:
        busy: ``() -> bool``: whether a call thread runs a job now.
        expire_all: ``() -> None``: shut every live request's sockets.
    """
    with _LOCK:
        # only inside PostgreSQL, whose embedded Python is never finalized: in a process that
        # finalizes its interpreter, a handler called after that would crash it
        if _STATE["handler"] is not None or "plpy" not in sys.modules:
            return
        # OpenSSL initialised (its exit handler registered) before this one: importing _ssl
        # initialises it (a backend that asked the embedder imported it with http.client)
        import ssl  # noqa: F401

        _STATE.update(busy=busy, expire_all=expire_all)
        # kept: C holds a pointer to it. ``atexit`` is no symbol of the C library (a static stub
        # of its own): ``__cxa_atexit(fn, arg, NULL)`` registers for the program itself
        _STATE["handler"] = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_at_exit)
        ctypes.CDLL(None).__cxa_atexit(_STATE["handler"], None, None)


def _at_exit(_arg) -> None:
    """Run by the C library's ``exit()`` on the exiting (main) thread, which holds the GIL."""
    try:
        if not _STATE["busy"]():
            return
        _STATE["expire_all"]()
    except BaseException:  # noqa: BLE001 - at exit nothing may be raised into C
        pass
    os._exit(1)
