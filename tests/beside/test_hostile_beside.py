"""Beside the database, every outbound path against the hostile servers (``dev.hostile``): the
``nl2sql ask`` client ends within its deadline and on Ctrl-C within 2 s, and the worker's
answer fails within its deadline (docs/internals/net.md "The rule"; the same table inside the
server: tests/db/test_hostile_backend.py). The client's times run from the event each claim is
about (SIGINT; the request's arrival at the hostile server) to its message that it gave up, so
that neither its start nor its exit, both slowed on a loaded machine, is counted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psycopg
import pytest

import nl2sql
from conftest import ROOT
from nl2sql.client import worker
from nl2sql_indexer.dev.demo_data import demo_sql
from nl2sql_indexer.dev.hostile import MODES, HostileServer

from .conftest import make_db, nl2sql_admin

TIMEOUT_S = 1
WAIT_S = 120  # the most a wait on an event (the server's first hit) may take: a bound, not a delay
STARTUP_S = 6.0  # the client's own start: imports, connection, the embedding model loaded
QUESTION = "How many singers do we have?"
CLI_WITH_CTRL_C = (
    "import faulthandler, runpy, signal; faulthandler.register(signal.SIGUSR1); "
    "signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('nl2sql.client.cli', run_name='__main__', alter_sys=True)"
)
PATHS = {  # path -> (the server's hostile paths, add_model's extra arguments)
    "chat_completions": (("/chat/completions",), ", context_window => 8192"),
    "props": (("/props",), ""),
}


@pytest.fixture(scope="module")
def demo_beside(cluster, owner):
    """A database beside which nl2sql is installed, with the demo's tables indexed."""
    db = make_db(cluster, owner)
    r = nl2sql_admin("install", "--dsn", db.dsn)
    assert r.returncode == 0, r.stderr
    with psycopg.connect(db.dsn, autocommit=True) as c:
        c.execute(demo_sql())
        c.execute("SELECT nl2sql.set_setting('model_rounds', 'one')")
    nl2sql.connect(db.dsn).reindex()
    return db


def _report(line: str) -> None:
    """Add a case's measured time to the file ``NL2SQL_HOSTILE_REPORT`` names, when set."""
    if os.environ.get("NL2SQL_HOSTILE_REPORT"):
        with open(os.environ["NL2SQL_HOSTILE_REPORT"], "a") as f:
            f.write(line + "\n")


def _use(dsn: str, url: str, extra: str, timeout_s: float = TIMEOUT_S) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("DELETE FROM nl2sql.model")
        c.execute(
            f"SELECT nl2sql.add_model('h', 'h', base_url => %s, timeout_s => %s{extra})",
            (url, timeout_s),
        )


class _Said(threading.Thread):
    """Reads a process's stderr to its end; ``first_at``: when its first ``nl2sql:`` line came
    (the client's message that it gave up: the event the claims are about, not its exit, whose
    interpreter teardown a loaded machine slows)."""

    def __init__(self, proc: subprocess.Popen):
        super().__init__(daemon=True)
        self.proc, self.first_at, self.text = proc, None, ""

    def run(self) -> None:
        for line in self.proc.stderr:
            if self.first_at is None and line.startswith("nl2sql"):
                self.first_at = time.monotonic()
            self.text += line


@pytest.mark.parametrize("action", ["deadline", "ctrl_c"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", sorted(PATHS))
def test_the_client_never_hangs_on_a_hostile_endpoint(demo_beside, path, mode, action):
    hostile, extra = PATHS[path]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py_udf"))
    with HostileServer(mode, paths=hostile, interval_s=0.3) as server:
        # Ctrl-C is what ends the call: the model's own deadline far off, so that a loaded
        # machine's slow start cannot end the client before the call is made
        _use(demo_beside.dsn, server.url, extra, TIMEOUT_S if action == "deadline" else WAIT_S)
        t0 = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", CLI_WITH_CTRL_C, "ask", "--dsn", demo_beside.dsn, QUESTION],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        said = _Said(proc)
        said.start()
        hit_at = None  # when the client's request reached the hostile server
        while said.first_at is None and proc.poll() is None and time.monotonic() - t0 < WAIT_S:
            if hit_at is None and server.hits:
                hit_at = time.monotonic()
                if action == "ctrl_c":
                    time.sleep(0.3)  # mid-request
                    t0 = time.monotonic()
                    proc.send_signal(signal.SIGINT)
            time.sleep(0.02)
        try:
            proc.wait(timeout=60)
        finally:
            proc.kill()
        said.join(10)
        err = said.text
        took = (said.first_at or time.monotonic()) - (t0 if action == "ctrl_c" else hit_at or t0)
        reached = bool(server.hits)
    _report(f"client {path}\t{mode}\t{action}\t{took:.2f}")
    if action == "ctrl_c":
        assert reached, f"the client never reached the hostile server: {err}"
        if hit_at is None:
            # the client gave up on its own between the request's arrival and the next look at
            # the server (a reply refused at its headers, say): it did not hang, and its message
            # is checked below; Ctrl-C had nothing left to end
            assert proc.returncode not in (0, 130), err
        else:
            assert took < 2.0, f"{path} × {mode}: Ctrl-C answered after {took:.2f} s"
        assert err.startswith("nl2sql: interrupted" if proc.returncode == 130 else "nl2sql: "), err
        assert "Traceback" not in err, err
    else:
        # from the request's arrival, the call's deadline and the probe's, with room; when the
        # client's own deadline passed before any request arrived, from the client's start
        limit = 2 * TIMEOUT_S + 1.5 if hit_at else STARTUP_S + 2 * TIMEOUT_S
        assert took < limit, f"{path} × {mode}: {took:.2f} s (limit {limit:g} s)"
        assert proc.returncode != 0 and "Traceback" not in err, err


@pytest.mark.parametrize("mode", MODES)
def test_the_worker_answers_in_time_when_the_endpoint_is_hostile(demo_beside, mode):
    with HostileServer(mode, paths=("/chat/completions",), interval_s=0.3) as server:
        _use(demo_beside.dsn, server.url, ", context_window => 8192")
        with psycopg.connect(demo_beside.dsn, autocommit=True) as c:
            rid = c.execute("SELECT nl2sql.submit(%s)", (QUESTION,)).fetchone()[0]
            t0 = time.monotonic()
            worker.run(demo_beside.dsn, once=True, say=lambda s: None)
            took = time.monotonic() - t0
            state, error = c.execute(
                "SELECT state, error FROM nl2sql.answer(%s, 0)", (rid,)
            ).fetchone()
    _report(f"worker chat_completions\t{mode}\tdeadline\t{took:.2f}")
    assert took < 2 * TIMEOUT_S + 1.5, f"worker × {mode}: {took:.2f} s"
    assert state == "failed" and error, (state, error)
