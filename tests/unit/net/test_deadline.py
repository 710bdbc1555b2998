"""``net.deadline``: the overall deadline, the sliced wait with the cancel point, groups."""

from __future__ import annotations

import threading
import time

import pytest

from nl2sql.core.errors import DeadlineExceeded
from nl2sql.net import deadline, fetch
from nl2sql_indexer.dev.hostile import HostileServer


class Cancelled(Exception):
    """What a backend's cancel point raises (QueryCanceled), here."""


@pytest.fixture()
def cancel_after():
    """Install a cancel point that raises once ``at`` seconds have passed (as a backend's
    ``spi.cancel_point`` does once pg_cancel_backend arrived); removed after the test."""
    calls = []

    def install(at: float):
        t0 = time.monotonic()

        def point():
            calls.append(time.monotonic() - t0)
            if time.monotonic() - t0 >= at:
                raise Cancelled("canceling statement due to user request")

        deadline.install(point)

    yield install, calls
    deadline.install(None)


def _net_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "nl2sql-net")


def test_a_trickled_body_ends_at_the_overall_deadline_not_per_read():
    with HostileServer("body_trickle", interval_s=0.05) as server:
        t0 = time.monotonic()
        with pytest.raises(DeadlineExceeded, match="within 0.7 s"):
            fetch.fetch(server.url + "/props", None, 0.7, "the probe")
        assert 0.6 < time.monotonic() - t0 < 1.2


def test_a_cancel_lands_within_a_slice_while_the_main_thread_waits(cancel_after):
    install, calls = cancel_after
    install(0.5)
    with HostileServer("headers_trickle", interval_s=0.05) as server:
        t0 = time.monotonic()
        with pytest.raises(Cancelled) as got:
            fetch.fetch(server.url + "/props", None, 30, "the probe")
        took = time.monotonic() - t0
        assert deadline.cancelled(got.value)  # broad handlers on the way let it through
        assert 0.5 <= took < 0.5 + deadline.SLICE_S + 0.3, took
        assert len(calls) >= 2  # the main thread ran the cancel point between slices
        # the request's thread ended with it: its socket was shut, not left to the 30 s
        end = time.monotonic() + 1.0
        while _net_threads() and time.monotonic() < end:
            time.sleep(0.02)
        assert _net_threads() == 0


def test_a_request_that_fails_by_itself_keeps_its_own_error(cancel_after):
    install, _ = cancel_after
    install(60)
    with pytest.raises(OSError):  # nothing listens on port 9: refused, not a timeout
        fetch.fetch("http://127.0.0.1:9/props", None, 5, "the probe")


def test_a_group_ends_the_requests_of_its_threads_at_once():
    with HostileServer("half_open") as server:
        group = deadline.Group()
        futs = [
            deadline.spawn(fetch.fetch, server.url + "/props", None, 30, "p", group=group)
            for _ in range(3)
        ]
        time.sleep(0.3)
        t0 = time.monotonic()
        group.expire()
        for f in futs:
            with pytest.raises(DeadlineExceeded):
                f.result(timeout=2)
        assert time.monotonic() - t0 < 0.5


def test_the_watchdog_expires_deadlines_in_order_and_finish_stops_it():
    late, early, done = deadline.Deadline(0.4), deadline.Deadline(0.1), deadline.Deadline(0.1)
    assert done.finish()
    time.sleep(0.2)
    assert early.expired and not late.expired and not done.expired
    time.sleep(0.3)
    assert late.expired and not late.finish()
    with pytest.raises(DeadlineExceeded):
        late.check()
