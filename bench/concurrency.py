#!/usr/bin/env python3
"""Concurrency benchmark: many sessions asking at once while the index is rebuilt.

16 sessions (default) each ask 20 questions with ``nl2sql()`` as an ordinary role (SELECT on the
demo tables only), against the scripted loopback server answering every model call after
200 ms (``--latency-ms``; answers are SCRIPTED, not a model's). Meanwhile another session runs
``nl2sql.reindex(force => true)`` in a loop, and two more sessions keep querying and updating the
user tables (a reader and a writer, the database's own workload). A monitor polls ``pg_locks``
every 20 ms for lock requests that are not granted and records how long each has waited
(``pg_locks.waitstart``).

Printed: errors (failed calls or no SQL chosen; goal 0), the latency of each ``nl2sql()`` call as
the client sees it (p50/p95, ms; the first call of each session, which loads the embedding
model into its backend, is a warm-up and not counted), how many reindex passes ran, the user
workload's slowest statement, and the longest lock wait seen (goal: none; the poll misses waits
shorter than its 20 ms interval).

``--quota N`` gives the role ``questions_per_minute => N`` (a generous N measures what the
quota's bookkeeping costs: with the shared process its sessions ask at once; with
``--embedder local`` they take the role's row lock in turn, docs/guardrails.md "Quotas");
``--quiet`` leaves out the reindex loop and the user workload.

Usage: python bench/concurrency.py [--sessions 16] [--questions 20] [--latency-ms 200]
       [--datadir DIR] [--embedder shared|local] [--quota N] [--quiet]
(max_connections is raised, with a restart of the bench cluster, when the sessions need it.)
Run it under scripts/dev_locked.sh (it installs this checkout into the shared extension dir).
The last line printed is
``RESULT errors=<n> p50_ms=<ms> p95_ms=<ms> max_lock_wait_ms=<ms> wall_s=<s> quota=<N|none>``.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg

import common as C
from nl2sql_indexer.dev.demo_data import demo_sql
from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule

DB = "nl2sql_concurrency"
ROLE = "nl2sql_bench_user"
QUESTIONS = [
    ("How many singers do we have?", "SELECT count(*) FROM singer"),
    (
        "How many concerts are there per stadium?",
        "SELECT stadium_id, count(*) FROM concert GROUP BY stadium_id",
    ),
    (
        "What is the average age of singers from each country?",
        "SELECT country, avg(age) FROM singer GROUP BY country",
    ),
    (
        "Which stadium has the largest capacity?",
        "SELECT name FROM stadium ORDER BY capacity DESC LIMIT 1",
    ),
    (
        "List the names of singers who performed in a concert.",
        "SELECT DISTINCT s.name FROM singer s JOIN singer_in_concert sc ON s.singer_id = sc.singer_id",
    ),
]


def log(*a) -> None:
    print(*a, flush=True)


def ensure_connections(cluster, sessions: int) -> None:
    """Raise max_connections (ALTER SYSTEM, restart) when the sessions and the 4 helper
    connections would not fit."""
    need = sessions + 10
    with cluster.connect() as c:
        have = int(c.execute("SHOW max_connections").fetchone()[0])
        if have >= need:
            return
        c.execute(f"ALTER SYSTEM SET max_connections = {need}")
    log(f"max_connections {have} -> {need} (restarting the cluster)")
    cluster.stop()
    cluster.start()


def setup(
    cluster,
    llm: LoopbackLLM,
    embedder: str | None = None,
    quota: int | None = None,
    db: str = DB,
):
    """A fresh demo database ``db`` with the extension, its index, the loopback model and
    ``ROLE`` (SELECT on the demo tables; ``quota`` questions per minute when given)."""
    cluster.create_database(db, drop=True)
    with cluster.connect(db) as c:
        c.execute(demo_sql())
        c.execute("CREATE EXTENSION nl2sql CASCADE")
        if embedder:
            c.execute("SELECT nl2sql.set_setting('embedder', %s)", (embedder,))
        c.execute("SELECT nl2sql.reindex()")
        c.execute(
            "SELECT nl2sql.add_model('bench', 'bench', base_url => %s, timeout_s => 30)",
            (llm.base_url,),
        )
        if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone():
            c.execute(f"CREATE ROLE {ROLE} LOGIN")
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {ROLE}")
        c.execute("DELETE FROM nl2sql.quota")
        if quota is not None:
            c.execute("SELECT nl2sql.set_quota(%s, questions_per_minute => %s)", (ROLE, quota))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--latency-ms", type=float, default=200.0)
    ap.add_argument("--datadir", type=Path, default=None)
    ap.add_argument(
        "--embedder",
        choices=["shared", "local"],
        default=None,
        help="set the embedder setting (default: its default, shared)",
    )
    ap.add_argument("--quota", type=int, default=None, help="the role's questions_per_minute")
    ap.add_argument("--quiet", action="store_true", help="no reindex loop, no user workload")
    args = ap.parse_args(argv)

    log(f"machine speed reference: {C.machine_reference_ms():.0f} ms for 10^6 Python additions")
    cluster = C.start_cluster(args.datadir)
    ensure_connections(cluster, args.sessions)
    log(f"cluster {cluster.datadir} port {cluster.port}")
    llm = LoopbackLLM().start()
    for q, sql in QUESTIONS:
        llm.add_rule(Rule(question=q, response=sql, delay_s=args.latency_ms / 1000.0))
    setup(cluster, llm, args.embedder, args.quota)
    log(
        f"{args.sessions} sessions x {args.questions} questions, loopback latency "
        f"{args.latency_ms:g} ms (scripted answers), "
        + ("nothing else running" if args.quiet else "reindex(force) looping meanwhile")
        + f"; quota questions_per_minute={args.quota}, embedder={args.embedder or 'shared'}"
    )

    stop = threading.Event()
    lat_ms: list[float] = []
    errors: list[str] = []
    warmup_ms: list[float] = []
    lock = threading.Lock()
    started = threading.Barrier(args.sessions + 1)

    def session(i: int) -> None:
        try:
            conn = cluster.connect(DB, user=ROLE)
        except Exception as e:  # noqa: BLE001 - counted and reported
            with lock:
                errors.append(f"session {i}: connect: {e}")
            started.wait()
            return
        with conn:
            t0 = time.perf_counter()
            try:
                conn.execute("SELECT nl2sql(%s)", (QUESTIONS[0][0],))
            except Exception as e:  # noqa: BLE001
                with lock:
                    errors.append(f"session {i}: warm-up: {str(e).splitlines()[0]}")
            with lock:
                warmup_ms.append((time.perf_counter() - t0) * 1000)
            started.wait()
            for k in range(args.questions):
                q, _ = QUESTIONS[(i + k) % len(QUESTIONS)]
                t0 = time.perf_counter()
                try:
                    sql = conn.execute("SELECT nl2sql(%s)", (q,)).fetchone()[0]
                    ok = bool(sql)
                    err = None if ok else "no SQL"
                except Exception as e:  # noqa: BLE001
                    ok, err = False, str(e).splitlines()[0]
                ms = (time.perf_counter() - t0) * 1000
                with lock:
                    lat_ms.append(ms)
                    if not ok:
                        errors.append(f"session {i} q{k}: {err}")

    reindex_runs = [0]
    reindex_ms: list[float] = []

    reindex_pid: list[int] = []

    def reindexer() -> None:
        with cluster.connect(DB) as conn:
            reindex_pid.append(conn.info.backend_pid)
            while not stop.is_set():
                t0 = time.perf_counter()
                try:
                    conn.execute("SELECT nl2sql.reindex(force => true)")
                    reindex_runs[0] += 1
                    reindex_ms.append((time.perf_counter() - t0) * 1000)
                except psycopg.errors.QueryCanceled as e:
                    if not stop.is_set():
                        with lock:
                            errors.append(f"reindex: {str(e).splitlines()[0]}")
                except Exception as e:  # noqa: BLE001
                    with lock:
                        errors.append(f"reindex: {str(e).splitlines()[0]}")

    user_ms: list[float] = []

    def user_workload(write: bool) -> None:
        with cluster.connect(DB) as conn:
            while not stop.is_set():
                t0 = time.perf_counter()
                if write:
                    conn.execute(
                        "UPDATE stadium SET capacity = capacity WHERE stadium_id = "
                        "(SELECT min(stadium_id) FROM stadium)"
                    )
                else:
                    conn.execute(
                        "SELECT count(*) FROM singer s JOIN singer_in_concert sc "
                        "ON s.singer_id = sc.singer_id"
                    )
                with lock:
                    user_ms.append((time.perf_counter() - t0) * 1000)
                time.sleep(0.02)

    waits: dict[tuple, float] = {}

    def monitor() -> None:
        with cluster.connect(DB) as conn:
            while not stop.is_set():
                for pid, kind, rel, wait_ms in conn.execute(
                    "SELECT pid, locktype, relation::regclass::text, "
                    "EXTRACT(epoch FROM clock_timestamp() - waitstart) * 1000 "
                    "FROM pg_locks WHERE NOT granted AND waitstart IS NOT NULL"
                ).fetchall():
                    key = (pid, kind, rel)
                    waits[key] = max(waits.get(key, 0.0), float(wait_ms or 0.0))
                time.sleep(0.02)

    bg = [threading.Thread(target=monitor)]
    if not args.quiet:
        bg += [
            threading.Thread(target=reindexer),
            threading.Thread(target=user_workload, args=(False,)),
            threading.Thread(target=user_workload, args=(True,)),
        ]
    workers = [threading.Thread(target=session, args=(i,)) for i in range(args.sessions)]
    for t in workers:
        t.start()
    started.wait()  # every session has warmed up (embedding model loaded in its backend)
    log(
        f"warm-up (first call per session, loads the embedding model): "
        f"p50 {C.percentile(warmup_ms, 50):.0f} ms, max {max(warmup_ms):.0f} ms"
    )
    for t in bg:
        t.start()
    t_run = time.perf_counter()
    for t in workers:
        t.join()
    wall = time.perf_counter() - t_run
    stop.set()
    with cluster.connect(DB) as c:  # the pass in progress is not needed any more
        for pid in reindex_pid:
            c.execute("SELECT pg_cancel_backend(%s)", (pid,))
    for t in bg:
        t.join()
    llm.stop()

    p50 = C.percentile(lat_ms, 50) or 0.0
    p95 = C.percentile(lat_ms, 95) or 0.0
    max_wait = max(waits.values(), default=0.0)
    log(f"calls: {len(lat_ms)} in {wall:.1f} s ({len(lat_ms) / wall:.1f}/s); errors: {len(errors)}")
    for e in errors[:10]:
        log(f"  error: {e}")
    log(
        f"nl2sql() latency: p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {max(lat_ms, default=0):.0f} ms "
        f"(two model calls of {args.latency_ms:g} ms each per question)"
    )
    log(
        f"reindex(force) passes completed during the run: {reindex_runs[0]} (the last one "
        f"in progress was cancelled at the end)"
        + (f", p50 {C.percentile(reindex_ms, 50):.0f} ms" if reindex_ms else "")
    )
    log(f"user-table statements: {len(user_ms)}, slowest {max(user_ms, default=0):.1f} ms")
    log(
        f"lock waits seen: {len(waits)}"
        + "".join(
            f"\n  pid {k[0]} {k[1]} {k[2] or ''}: {v:.0f} ms"
            for k, v in sorted(waits.items(), key=lambda kv: -kv[1])[:10]
        )
    )
    log(
        f"RESULT errors={len(errors)} p50_ms={p50:.0f} p95_ms={p95:.0f} "
        f"max_lock_wait_ms={max_wait:.0f} wall_s={wall:.1f} "
        f"quota={args.quota if args.quota is not None else 'none'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
