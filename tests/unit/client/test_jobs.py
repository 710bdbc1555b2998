"""The claim loop of a reindex's workers (client/_jobs.py): deadlocks are retried, a bounded
number of times in a row; other errors and the end of the queue stop it."""

from __future__ import annotations

import json

import pytest

from nl2sql.client import _jobs


class Refused(Exception):
    def __init__(self, sqlstate: str | None):
        super().__init__(f"refused ({sqlstate})")
        self.sqlstate = sqlstate


def _claims(script: list):
    """A claim function that plays ``script``: an exception is raised, anything else returned."""
    it = iter(script)

    def claim():
        step = next(it)
        if isinstance(step, Exception):
            raise step
        return step

    return claim


@pytest.mark.parametrize(
    "script, tables",
    [
        ([None], []),
        ([{"table": "a"}, json.dumps({"table": "b"}), None], ["a", "b"]),
        ([Refused("40P01"), {"table": "a"}, Refused("40001"), None], ["a"]),
        ([Refused("40P01")] * _jobs.MAX_RETRIES + [{"table": "a"}, None], ["a"]),
    ],
)
def test_claims_until_none_retrying_deadlocks(script, tables):
    assert [r["table"] for r in _jobs.claim_loop(_claims(script))] == tables


@pytest.mark.parametrize(
    "script",
    [
        [Refused("42501")],  # no privilege: not retried
        [Refused(None)],
        [Refused("40P01")] * (_jobs.MAX_RETRIES + 1),  # a deadlock every time: given up
    ],
)
def test_other_errors_and_endless_deadlocks_stop_the_worker(script):
    with pytest.raises(Refused):
        _jobs.claim_loop(_claims(script))


def test_waits_for_tables_held_elsewhere_and_takes_those_released():
    pending = iter([2, 2, 1, 0])
    claimed = iter([[], [{"table": "x"}], []])
    out = _jobs.wait_for_others(lambda: next(pending), lambda: next(claimed), poll_s=0)
    assert out == [{"table": "x"}]


@pytest.mark.parametrize("jobs, cpus, want", [(1, 2, "2"), (2, 2, "1"), (3, 2, "1"), (2, 8, "4")])
def test_workers_share_the_cpus_among_their_encoders(monkeypatch, jobs, cpus, want):
    monkeypatch.delenv("NL2SQL_EMBED_THREADS", raising=False)
    monkeypatch.setattr(_jobs.os, "sched_getaffinity", lambda _pid: set(range(cpus)))
    _jobs._split_threads(jobs)
    assert _jobs.os.environ["NL2SQL_EMBED_THREADS"] == want


def test_a_set_thread_count_is_kept(monkeypatch):
    monkeypatch.setenv("NL2SQL_EMBED_THREADS", "5")
    _jobs._split_threads(2)
    assert _jobs.os.environ["NL2SQL_EMBED_THREADS"] == "5"
