"""Room on a server: how many tokens the requests in flight to one endpoint may hold at once,
learned when the server refuses a request for room (llama.cpp's unified KV cache, shared by its
slots: ``/props`` states one slot's ``n_ctx``, which all slots together may not pass), and the
wait for room under the request's deadline (docs/internals/net.md "Room on a server")."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from .deadline import Deadline

__all__ = ["forget", "hold", "limit", "limit_of"]

WAIT_SLICE_S = 0.05  # a waiting request looks at its deadline this often, seconds

_CV = threading.Condition()
_LIMIT: dict[tuple, int] = {}  # endpoint key -> tokens its requests may hold at once
_IN_USE: dict[tuple, list[int]] = {}  # endpoint key -> [tokens held, requests] in flight


def limit(key: tuple, tokens: int) -> None:
    """Say that the requests in flight to ``key`` may hold at most ``tokens`` together.

    Args:
        key: the endpoint (base URL, model); tokens: prompt and answer, all requests together.
    """
    with _CV:
        _LIMIT[key] = min(tokens, _LIMIT.get(key, tokens))
        _CV.notify_all()


def limit_of(key: tuple) -> int | None:
    """The limit learned for ``key``.

    Args:
        key: the endpoint.

    Returns:
        Tokens, or None when none was learned (requests are not held back).
    """
    with _CV:
        return _LIMIT.get(key)


def forget() -> None:
    """Forget every limit (tests; a server restarted with other flags)."""
    with _CV:
        _LIMIT.clear()
        _CV.notify_all()


@contextlib.contextmanager
def hold(key: tuple, tokens: int, d: Deadline | None) -> Iterator[float]:
    """Hold ``tokens`` of ``key``'s room while the block runs, first waiting for them when a limit
    is known (a request alone always goes, whatever its size).

    Args:
        key: the endpoint; tokens: what the request may hold (prompt and answer).
        d: the request's deadline (the wait ends when it passes or is expired), or None.

    Yields:
        The seconds waited for room.

    Raises:
        DeadlineExceeded: the deadline passed while waiting.
    """
    t0 = time.monotonic()
    with _CV:
        while key in _IN_USE and _IN_USE[key][0] + tokens > _LIMIT.get(key, float("inf")):
            if d is not None:
                d.check()
            _CV.wait(WAIT_SLICE_S)
        held = _IN_USE.setdefault(key, [0, 0])
        held[0] += tokens
        held[1] += 1
    try:
        yield time.monotonic() - t0
    finally:
        with _CV:
            held[0] -= tokens
            held[1] -= 1
            if not held[1]:
                del _IN_USE[key]
            _CV.notify_all()
