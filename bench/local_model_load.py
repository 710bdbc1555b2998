#!/usr/bin/env python3
"""Many users, one CPU: sessions asking at once through one local model server.

The local model (``nl2sql model install/start/register``; default Qwen2.5-Coder-0.5B-Instruct, a
small model: its figures are its own) serves a demo database on this machine's CPU, under its
own state folder and port (``NL2SQL_MODEL_HOME``: a demo's server is left alone). ``--sessions``
sessions (default 8), each an ordinary role with ``statement_timeout`` (``--statement-timeout-s``,
default 120: what a DBA gives analysts), ask the demo questions in turn with ``nl2sql()`` for
``--minutes`` (default 10); ``--quota N`` gives the role ``questions_per_minute => N``.

Every call ends as one of: ``answered`` (SQL back), ``timeout`` (the statement_timeout or a model
call's deadline, said as such), ``quota`` (the role's quota, said as such), ``no answer`` (nl2sql
said why: no candidate ran, …) or ``internal`` (anything else: a message that is not nl2sql's
own — the goal is 0). A backend is *held* when its call outlasts the statement_timeout by more
than 2 s. A monitor reads the server's queue every second (``/metrics``: requests processing and
deferred, i.e. waiting for a slot).

Usage: python bench/local_model_load.py [--model qwen2.5-coder-0.5b] [--sessions 8]
       [--minutes 10] [--statement-timeout-s 120] [--quota N] [--port 8408|0] [--datadir DIR]
Run it under scripts/dev_locked.sh (it installs this checkout into the shared extension dir).
The last line printed is ``RESULT questions=<n> answered=<n> timeout=<n> quota=<n>
no_answer=<n> internal=<n> held=<n> answer_p50_s=<s> answer_p95_s=<s> slot_wait_p50_s=<s>
slot_wait_p95_s=<s> max_deferred=<n>`` (answer: asking to SQL; slot wait: of that, the time its
model calls waited for the server, from the traces' ``waited_ms``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg

import common as C
from nl2sql_indexer.dev.demo_data import DEMO_QUESTIONS, demo_sql

DB = "nl2sql_local_load"
ROLE = "nl2sql_load_user"
HELD_GRACE_S = 2.0  # nl2sql yields to a cancel within this; longer is a held backend


def log(*a) -> None:
    print(*a, flush=True)


def classify(e: Exception) -> str:
    """The outcome of a call that raised: ``timeout``, ``quota``, ``no answer`` or
    ``internal``. PL/Python puts the exception's class before a function's message
    (``plpy.Error: nl2sql: …``, ``spiexceptions.QueryCanceled: …``): it is not part of it."""
    msg = str(e).strip()
    head, sep, rest = msg.partition(": ")
    if sep and (head == "plpy.Error" or head.startswith("spiexceptions.")):
        msg = rest
    low = msg.lower()
    if isinstance(e, psycopg.errors.QueryCanceled) or "timed out" in low or "deadline" in low:
        return "timeout"
    if "quota" in low:
        return "quota"
    if msg.startswith("nl2sql"):
        return "no answer"
    return "internal"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_model(model: str, port: int) -> None:
    """The local model under a state folder of its own (NL2SQL_MODEL_HOME) on ``port`` (0: a
    free one)."""
    from nl2sql.client.local_model import install, start

    # in /tmp itself (not TMPDIR): as root the server runs as nobody, who must pass through
    # every folder above its state folder
    os.environ.setdefault(
        "NL2SQL_MODEL_HOME", tempfile.mkdtemp(prefix="nl2sql-load-model-", dir="/tmp")
    )
    install(model, quiet=True)
    s = start(port=port or _free_port(), quiet=True)
    log(
        f"{s.alias} at {s.base_url}: {s.parallel} slots of {s.slot_ctx} tokens, {s.threads} threads"
    )


def setup(cluster, sessions: int, statement_timeout_s: int, quota: int | None) -> None:
    from nl2sql.client.local_model import register

    with cluster.connect() as c:
        need = sessions + 10
        if int(c.execute("SHOW max_connections").fetchone()[0]) < need:
            c.execute(f"ALTER SYSTEM SET max_connections = {need}")
            cluster.stop()
            cluster.start()
    cluster.create_database(DB, drop=True)
    with cluster.connect(DB) as c:
        c.execute(demo_sql())
        c.execute("CREATE EXTENSION nl2sql CASCADE")
        c.execute("SELECT nl2sql.reindex()")
        log(register(conn=c))
        if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone():
            c.execute(f"CREATE ROLE {ROLE} LOGIN")
        c.execute(f"ALTER ROLE {ROLE} SET statement_timeout = '{statement_timeout_s}s'")
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {ROLE}")
        c.execute("DELETE FROM nl2sql.quota")
        if quota is not None:
            c.execute("SELECT nl2sql.set_quota(%s, questions_per_minute => %s)", (ROLE, quota))


def monitor(stop: threading.Event, depth: list[tuple[float, float]]) -> None:
    """Every second: the server's requests processing and deferred (waiting for a slot)."""
    from nl2sql.client.local_model import _probe, _service
    from nl2sql.client.local_model._paths import paths

    p = paths()
    s, key = _service.Service.load(p.state), _service.read_key(p)
    while not stop.wait(1.0):
        m = _probe.metrics(s, key)
        depth.append((m.get("requests_processing", 0.0), m.get("requests_deferred", 0.0)))


def run(cluster, args) -> tuple[list[tuple[float, str, str]], list]:
    """The sessions' calls: (seconds, outcome, message) each; and the queue depths."""
    calls: list[tuple[float, str, str]] = []
    lock = threading.Lock()
    stop = threading.Event()
    end = time.monotonic() + args.minutes * 60

    def session(i: int) -> None:
        with cluster.connect(DB, user=ROLE) as conn:
            k = 0
            while time.monotonic() < end:
                q = DEMO_QUESTIONS[(i + k) % len(DEMO_QUESTIONS)][0]
                k += 1
                t0 = time.monotonic()
                try:
                    conn.execute("SELECT nl2sql(%s)", (q,)).fetchone()
                    out, msg = "answered", ""
                except psycopg.Error as e:
                    out, msg = classify(e), str(e).strip().splitlines()[0][:200]
                with lock:
                    calls.append((time.monotonic() - t0, out, msg))

    depth: list[tuple[float, float]] = []
    mon = threading.Thread(target=monitor, args=(stop, depth))
    mon.start()
    workers = [threading.Thread(target=session, args=(i,)) for i in range(args.sessions)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    stop.set()
    mon.join()
    return calls, depth


WAITED_SQL = """
SELECT COALESCE((trace->'presql'->'reply'->'request'->>'waited_ms')::float8, 0)
     + COALESCE((SELECT sum((r->'request'->>'waited_ms')::float8)
                 FROM jsonb_array_elements(trace->'finsql'->'replies') r), 0)
FROM nl2sql.query_log WHERE role_name = %s AND sql IS NOT NULL
"""


def slot_waits(cluster) -> list[float]:
    """Per answered question, what its model calls waited (the trace's ``waited_ms``: the
    call's time less the server's own reading and writing), seconds."""
    with cluster.connect(DB) as c:
        return [r[0] / 1000 for r in c.execute(WAITED_SQL, (ROLE,)).fetchall()]


def report(calls, depth, args, waited: list[float]) -> None:
    n = Counter(out for _, out, _ in calls)
    waits = [s for s, out, _ in calls if out == "answered"]
    held = [s for s, _, _ in calls if s > args.statement_timeout_s + HELD_GRACE_S]
    for out in ("timeout", "quota", "no answer", "internal"):
        examples = Counter(m for _, o, m in calls if o == out).most_common(3)
        for m, k in examples:
            log(f"  {out} x{k}: {m}")
    p50, p95 = C.percentile(waits, 50) or 0.0, C.percentile(waits, 95) or 0.0
    longest = max((s for s, _, _ in calls), default=0.0)
    max_def = max((d for _, d in depth), default=0.0)
    log(
        f"{len(calls)} questions from {args.sessions} sessions in {args.minutes:g} min: "
        f"{dict(n)}; answered in p50 {p50:.1f} s, p95 {p95:.1f} s; longest call {longest:.1f} s "
        f"(statement_timeout {args.statement_timeout_s} s); at most {max_def:.0f} requests "
        f"waiting for a slot"
    )
    w50, w95 = C.percentile(waited, 50) or 0.0, C.percentile(waited, 95) or 0.0
    log(
        f"of which waiting for the server (the traces' waited_ms, {len(waited)} answered "
        f"questions): p50 {w50:.1f} s, p95 {w95:.1f} s"
    )
    log(
        f"RESULT questions={len(calls)} answered={n['answered']} timeout={n['timeout']} "
        f"quota={n['quota']} no_answer={n['no answer']} internal={n['internal']} "
        f"held={len(held)} answer_p50_s={p50:.1f} answer_p95_s={p95:.1f} "
        f"slot_wait_p50_s={w50:.1f} slot_wait_p95_s={w95:.1f} max_deferred={max_def:.0f}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--statement-timeout-s", type=int, default=120)
    ap.add_argument("--quota", type=int, default=None, help="the role's questions_per_minute")
    ap.add_argument("--port", type=int, default=8408, help="0: a free port")
    ap.add_argument("--datadir", type=Path, default=None)
    args = ap.parse_args(argv)
    log(f"machine speed reference: {C.machine_reference_ms():.0f} ms for 10^6 Python additions")
    start_model(args.model, args.port)
    cluster = C.start_cluster(args.datadir)
    setup(cluster, args.sessions, args.statement_timeout_s, args.quota)
    log(
        f"{args.sessions} sessions asking for {args.minutes:g} min, statement_timeout "
        f"{args.statement_timeout_s} s, quota {args.quota or 'none'}"
    )
    try:
        calls, depth = run(cluster, args)
    finally:
        from nl2sql.client.local_model import stop

        stop()
        if os.environ["NL2SQL_MODEL_HOME"].startswith("/tmp/nl2sql-load-model-"):
            shutil.rmtree(os.environ["NL2SQL_MODEL_HOME"], ignore_errors=True)
    report(calls, depth, args, slot_waits(cluster))
    return 0


if __name__ == "__main__":
    sys.exit(main())
