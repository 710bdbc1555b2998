#!/usr/bin/env python3
"""Soak: many clients asking for minutes while the index is rebuilt, the schema changes and the
models fail, hang or write prose.

``--clients`` (16) sessions, half as ``soak_analyst`` (may read every table, the ones the soak
creates included) and half as ``soak_viewer`` (the demo tables and ``soak_events`` only), ask in
a loop for ``--seconds`` (600): ``nl2sql()``, ``nl2sql.ask``, ``nl2sql.explain`` and
conversations (a question and its follow-ups with one key, then ``nl2sql.conversation`` and
``nl2sql.forget_conversation``). Meanwhile, as the superuser: ``nl2sql.reindex()`` every
``--reindex-every`` s (60); a DDL step every ``--ddl-every`` s (20), in turn: create table
``soak_tN``, add a column, rename a column, rename the table, drop it; rows changing all the time
in ``soak_events`` (``--events-rows``, 200,000: updates, inserts, deletes). Two models on the
scripted loopback server (``nl2sql_indexer.dev.loopback``: answers SCRIPTED, not a model's; ``m1``
writes the PreSQL and follows renames, ``m2`` keeps a table's first names), and every
``--fault-every`` s (0.5) one model call is made to fail: HTTP 500, a hang past the models'
``timeout_s`` (``--model-timeout``, 5 s), garbage, or prose (``llm_max_retries`` is 0).

Printed: questions/s, latency p50/p95/p99 (every call, failed ones included), errors by kind
(``soak_checks.classify``: expected nl2sql errors against unexpected ones: raw PL/Python
exceptions, internal errors, "may not SELECT" about a readable table, deadlocks, the client's
own ``--client-timeout`` passed, lost connections), crashes (server log), VmRSS of the client
backends and of the shared embedder over time, lock waits on user tables (``pg_locks``, polled
every 0.2 s, with the waiter's and blocker's roles), ``nl2sql.query_log`` growth, and stale
names: an answer (``nl2sql()``, ``explain``, a conversation turn) whose SQL names a table or
column dropped or renamed before a reindex that finished before it was asked
(``soak_checks.StaleNames``).

The cluster (bench/common.py's datadir) imports a private venv of this checkout
(``soak_setup``), so only the setup holds the install lock; run it directly, not under
scripts/dev_locked.sh.

Usage: python bench/soak.py [--seconds 600] [--clients 16] [--venv DIR] [--datadir DIR]
The last line printed is ``RESULT qps=… p50_ms=… p95_ms=… p99_ms=… unexpected_errors=…
crashes=… stale_names=… backend_rss_mb=<start>-><end> backend_anon_mb=<start>-><end>
embedder_rss_mb=<start>-><end>`` (backends: the median of the clients' VmRSS, and of their
RssAnon, the private part: VmRSS also counts the shared buffers a backend has touched).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "py_udf"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "indexer"))

import psycopg

import common as C
import soak_setup as S
from concurrency import ensure_connections
from nl2sql_indexer.cluster import LocalCluster
from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule
from soak_checks import EXPECTED, StaleNames, classify

FAULTS = ("http500", "hang", "garbage", "prose")
PROSE = "The singers are probably in the singer table; I would count them there."
GARBAGE = "}{ SELEC FROM ;; \x00 garbage 42 ::"


def log(*a) -> None:
    print(*a, flush=True)


class Soak:
    """The run's shared state: scripted answers, questions, figures."""

    def __init__(self, args, cluster: LocalCluster, llm: LoopbackLLM):
        self.args, self.cluster, self.llm = args, cluster, llm
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.stale = StaleNames()
        self.t0 = time.monotonic()
        self.answers = {m: S.base_answers() for m in S.MODELS}
        self.churn: dict[int, list[str]] = {}  # generation -> its questions (analyst only)
        self.lat_ms: list[float] = []
        self.kinds: Counter = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)
        self.ops: Counter = Counter()
        self.stale_hits: list[str] = []
        self.faults: Counter = Counter()
        self.reindex_s: list[float] = []
        self.ddl_done: list[str] = []
        self.waits: dict[tuple, dict] = {}
        self.client_pids: dict[int, int] = {}
        # (t, backends' VmRSS, backends' RssAnon, embedder's VmRSS)
        self.rss: list[tuple[float, list[float], list[float], float | None]] = []
        self.replay()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def replay(self) -> None:
        for m in S.MODELS:
            self.llm.set_replay(m, dict(self.answers[m]), delay_s=self.args.latency_ms / 1000)

    # -- outcomes ---------------------------------------------------------------------------
    def error(self, kind: str, text: str) -> None:
        with self.lock:
            self.kinds[kind] += 1
            if len(self.examples[kind]) < 3:
                self.examples[kind].append(text[:400])

    def answered(self, op: str, ms: float, sql: str | None, asked_at: float) -> None:
        hits = self.stale.stale(sql, asked_at) if sql else []
        with self.lock:
            self.lat_ms.append(ms)
            self.ops[op] += 1
            self.kinds["ok"] += 1
            if hits:
                self.stale_hits.append(f"{op} at {asked_at:.0f}s: {hits} in {sql}")

    # -- the clients ----------------------------------------------------------------------
    def questions(self, role: str, rng: random.Random) -> tuple[str, str]:
        base = list(S.DEMO_QUESTIONS) + S.EVENT_QUESTIONS
        with self.lock:
            churn = [q for qs in self.churn.values() for q in qs]
        if role == S.ANALYST and churn and rng.random() < 0.3:
            return rng.choice(churn), ""
        return rng.choice(base)

    def call(self, conn, op: str, sql: str, params: tuple, role: str) -> object:
        """One timed call; errors classified; returns the first column or None."""
        asked_at = self.now()
        t = time.perf_counter()
        try:
            row = conn.execute(sql, params).fetchall()
        except psycopg.Error as e:
            ms = (time.perf_counter() - t) * 1000
            with self.lock:
                self.lat_ms.append(ms)
                self.ops[op] += 1
            if conn.broken or conn.closed:
                self.error("connection_lost", f"[{role} {op}] {e}")
                raise
            d = e.diag
            msg = d.message_primary or str(e)
            kind = classify(msg, e.sqlstate, d.message_hint)
            self.error(kind, f"[{role} {op}] {msg} | hint: {d.message_hint} | {d.context or ''}")
            return None
        ms = (time.perf_counter() - t) * 1000
        value = row[0][0] if row and row[0] else None
        if op == "explain":
            trace = value if isinstance(value, dict) else json.loads(value)
            if trace.get("sql") is None:
                with self.lock:
                    self.lat_ms.append(ms)
                    self.ops[op] += 1
                err = trace.get("error") or "nl2sql: no SQL chosen"
                self.error(classify(err), f"[{role} explain trace] {err}")
                return None
            value = trace["sql"]
        sql = value if op in ("nl2sql", "explain", "conversation") else None
        self.answered(op, ms, sql, asked_at)
        return value

    def client(self, i: int, ready: threading.Barrier) -> None:
        role = S.ANALYST if i % 2 == 0 else S.VIEWER
        rng = random.Random(i)
        conn = self.connect(i, role)
        try:
            conn.execute("SELECT nl2sql(%s)", (S.DEMO_QUESTIONS[0][0],))  # warm-up
        except psycopg.Error as e:
            self.error("warm-up", str(e))
        ready.wait()
        k = 0
        while not self.stop.is_set():
            try:
                k += 1
                self.one_round(conn, role, rng, f"c{i}-{k}")
            except psycopg.Error:  # the connection was lost (counted): a new backend
                time.sleep(1)
                conn = self.connect(i, role)
            except Exception as e:  # noqa: BLE001 - a fault of this bench: counted, shown
                self.error("bench_error", f"{type(e).__name__}: {e}")

    def connect(self, i: int, role: str):
        conn = self.cluster.connect(S.DB, user=role)
        conn.execute(f"SET application_name = 'soak-{role}-{i}'")
        conn.execute(f"SET statement_timeout = '{int(self.args.client_timeout * 1000)}'")
        with self.lock:
            self.client_pids[i] = conn.info.backend_pid
        return conn

    def one_round(self, conn, role: str, rng: random.Random, key: str) -> None:
        op = rng.choices(("nl2sql", "ask", "explain", "conversation"), (4, 3, 2, 2))[0]
        if op == "conversation":
            for q, _ in rng.choice(S.CONVERSATIONS):
                self.call(
                    conn, "conversation", "SELECT nl2sql(%s, conversation => %s)", (q, key), role
                )
            self.call(
                conn, "conv_list", "SELECT count(*) FROM nl2sql.conversation(%s)", (key,), role
            )
            self.call(conn, "conv_forget", "SELECT nl2sql.forget_conversation(%s)", (key,), role)
            return
        q, _ = self.questions(role, rng)
        sql = {
            "nl2sql": "SELECT nl2sql(%s)",
            "ask": "SELECT count(*) FROM nl2sql.ask(%s)",
            "explain": "SELECT nl2sql.explain(%s)",
        }[op]
        self.call(conn, op, sql, (q,), role)

    # -- the background work ----------------------------------------------------------------
    def every(self, seconds: float, fn, name: str) -> None:
        conn = self.cluster.connect(S.DB)
        conn.execute(f"SET application_name = 'soak-{name}'")
        nxt = time.monotonic() + seconds
        while not self.stop.wait(max(0.0, nxt - time.monotonic())):
            nxt += seconds
            try:
                fn(conn)
            except psycopg.Error as e:
                if self.stop.is_set() and isinstance(e, psycopg.errors.QueryCanceled):
                    break  # the pass in progress at the end, cancelled
                self.error(f"{name}_failed", f"{name}: {e}")
                if conn.broken:
                    conn = self.cluster.connect(S.DB)

    def reindex(self, conn) -> None:
        s = self.now()
        conn.execute("SELECT nl2sql.reindex()")
        e = self.now()
        self.stale.reindexed(s, e)
        self.reindex_s.append(e - s)

    def ddl(self, conn) -> None:
        step = len(self.ddl_done)
        g, what = step // 5, step % 5
        t, a = f"soak_t{g}", f"c{g}_a"
        m1 = self.answers["m1"]
        qs = [f"How many rows does soak table {g} have?", f"What is the total a of soak table {g}?"]
        if what == 0:
            conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, {a} int, note text)")
            conn.execute(
                f"INSERT INTO {t} SELECT g, g % 7, 'n' || g FROM generate_series(1, 500) g"
            )
            for m in S.MODELS:
                self.answers[m] |= {
                    qs[0]: f"SELECT count(*) FROM {t}",
                    qs[1]: f"SELECT sum({a}) FROM {t}",
                }
            with self.lock:
                self.churn[g] = qs
                self.churn.pop(g - 2, None)  # asked for two more steps after its drop
        elif what == 1:
            conn.execute(f"ALTER TABLE {t} ADD COLUMN c{g}_b int DEFAULT 1")
        elif what == 2:
            conn.execute(f"ALTER TABLE {t} RENAME COLUMN {a} TO {a}_renamed")
            self.stale.gone("column", a, self.now())
            m1[qs[1]] = f"SELECT sum({a}_renamed) FROM {t}"
        elif what == 3:
            conn.execute(f"ALTER TABLE {t} RENAME TO {t}_r")
            self.stale.gone("table", t, self.now())
            m1 |= {
                qs[0]: f"SELECT count(*) FROM {t}_r",
                qs[1]: f"SELECT sum({a}_renamed) FROM {t}_r",
            }
        else:
            conn.execute(f"DROP TABLE {t}_r")
            at = self.now()
            for kind, name in (
                ("table", f"{t}_r"),
                ("column", f"{a}_renamed"),
                ("column", f"c{g}_b"),
            ):
                self.stale.gone(kind, name, at)
        self.replay()
        self.ddl_done.append(f"{self.now():.0f}s step {what} of {t}")

    def writer(self, conn) -> None:
        n = self.args.events_rows
        conn.execute(
            "UPDATE soak_events SET amount = amount + 1 WHERE id IN "
            "(SELECT (random() * %s)::bigint FROM generate_series(1, 300))",
            (n,),
        )
        conn.execute(
            "INSERT INTO soak_events (kind, region, amount) SELECT g %% 10, "
            "(%s::text[])[1 + g %% 8], 1 FROM generate_series(1, 200) g",
            (list(S.REGIONS),),
        )
        conn.execute(
            "DELETE FROM soak_events WHERE id IN (SELECT id FROM soak_events ORDER BY id "
            "OFFSET %s LIMIT 200)",
            (n // 2,),
        )

    def fault(self, _conn) -> None:
        kind = random.choice(FAULTS)
        rule = {
            "http500": Rule(status=500, response="scripted failure", times=1),
            "hang": Rule(delay_s=self.args.model_timeout + 2, response="SELECT 1", times=1),
            "garbage": Rule(response=GARBAGE, times=1),
            "prose": Rule(response=PROSE, times=1),
        }[kind]
        self.llm.add_rule(rule)
        with self.lock:
            self.faults[kind] += 1

    def monitor(self, conn) -> None:
        rows = conn.execute(
            "SELECT l.pid, c.relname, l.mode, l.waitstart, "
            "EXTRACT(epoch FROM clock_timestamp() - l.waitstart) * 1000, a.application_name, "
            "(SELECT string_agg(DISTINCT b.application_name, ',') FROM pg_stat_activity b "
            " WHERE b.pid = ANY (pg_blocking_pids(l.pid))) "
            "FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE NOT l.granted AND l.waitstart IS NOT NULL AND n.nspname = 'public'"
        ).fetchall()
        for pid, rel, mode, start, ms, who, blockers in rows:
            w = self.waits.setdefault((pid, rel, start), {"ms": 0.0})
            w.update(ms=max(w["ms"], float(ms or 0)), rel=rel, mode=mode, who=who, by=blockers)

    def sample_rss(self, _conn=None) -> None:
        with self.lock:
            pids = list(self.client_pids.values())
        emb = self.embedder_pid()
        rss = [r for r in (S.rss_mb(p) for p in pids) if r is not None]
        anon = [r for r in (S.rss_mb(p, "RssAnon") for p in pids) if r is not None]
        self.rss.append((self.now(), rss, anon, S.rss_mb(emb)))

    def embedder_pid(self) -> int | None:
        try:
            path = self.cluster.datadir / "nl2sql_embedder" / "embedder.pid"
            return int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None


# -- the report ---------------------------------------------------------------------------------


def rss_report(soak: Soak) -> dict[str, tuple[float, float]]:
    """Print the RSS samples; returns start and end of the backends' median VmRSS and RssAnon
    and of the embedder's VmRSS (MB)."""
    log(
        "RSS over time (MB): t, client backends' VmRSS median / max, their RssAnon (private) "
        "median, shared embedder's VmRSS (a backend's VmRSS also counts the shared buffers it "
        "has touched)"
    )
    step = max(1, len(soak.rss) // 12)
    for t, rss, anon, emb in soak.rss[::step] + soak.rss[-1:]:
        med, amed = C.percentile(rss, 50) or 0.0, C.percentile(anon, 50) or 0.0
        log(f"  {t:6.0f} s  {med:6.1f} / {max(rss, default=0):6.1f}  {amed:6.1f}  {emb or 0:6.1f}")
    first, last = soak.rss[0], soak.rss[-1]
    return {
        "backend_rss_mb": (C.percentile(first[1], 50) or 0.0, C.percentile(last[1], 50) or 0.0),
        "backend_anon_mb": (C.percentile(first[2], 50) or 0.0, C.percentile(last[2], 50) or 0.0),
        "embedder_rss_mb": (first[3] or 0.0, last[3] or 0.0),
    }


def report(soak: Soak, wall: float, crash_lines: list[str], log_growth: tuple[int, int]) -> None:
    n = len(soak.lat_ms)
    p = {q: C.percentile(soak.lat_ms, q) or 0.0 for q in (50, 95, 99)}
    log(f"questions: {n} in {wall:.0f} s = {n / wall:.1f}/s; by call: {dict(soak.ops)}")
    log(f"latency: p50 {p[50]:.0f} ms, p95 {p[95]:.0f} ms, p99 {p[99]:.0f} ms")
    log(f"faults injected: {dict(soak.faults)}")
    unexpected = 0
    log("outcomes by kind (expected: nl2sql errors a failing model causes):")
    for kind, count in soak.kinds.most_common():
        exp = kind == "ok" or EXPECTED.get(kind, False)
        unexpected += 0 if exp else count
        log(f"  {kind:22} {count:6}  {'expected' if exp else 'UNEXPECTED'}")
        for ex in soak.examples.get(kind, [])[: 2 if exp else 3]:
            log(f"      e.g. {ex}")
    log(f"reindex passes: {len(soak.reindex_s)}, seconds {[round(s, 1) for s in soak.reindex_s]}")
    log(f"DDL steps: {len(soak.ddl_done)}: {', '.join(soak.ddl_done)}")
    waits = sorted(soak.waits.values(), key=lambda w: -w["ms"])
    log(f"lock waits on user tables: {len(waits)}, longest {waits[0]['ms'] if waits else 0:.0f} ms")
    for w in waits[:8]:
        log(f"  {w['ms']:7.0f} ms {w['who']} waiting {w['mode']} on {w['rel']}, held by {w['by']}")
    log(f"stale names: {len(soak.stale_hits)}")
    for s in soak.stale_hits[:5]:
        log(f"  {s}")
    log(f"crash lines in the server log: {len(crash_lines)}")
    for line in crash_lines[:5]:
        log(f"  {line}")
    mem = rss_report(soak)
    grew, ok = log_growth
    log(f"nl2sql.query_log grew {grew / 1e6:.1f} MB: {grew / max(ok, 1):.0f} bytes a question")
    log(
        f"RESULT qps={n / wall:.1f} p50_ms={p[50]:.0f} p95_ms={p[95]:.0f} p99_ms={p[99]:.0f} "
        f"unexpected_errors={unexpected} crashes={len(crash_lines) + soak.kinds['connection_lost']} "
        f"stale_names={len(soak.stale_hits)} "
        + " ".join(f"{k}={a:.0f}->{b:.0f}" for k, (a, b) in mem.items())
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--reindex-every", type=float, default=60)
    ap.add_argument("--ddl-every", type=float, default=20)
    ap.add_argument("--fault-every", type=float, default=0.5)
    ap.add_argument("--events-rows", type=int, default=200_000)
    ap.add_argument("--latency-ms", type=float, default=50)
    ap.add_argument("--model-timeout", type=float, default=5)
    ap.add_argument("--client-timeout", type=float, default=120)
    ap.add_argument("--rss-every", type=float, default=10)
    ap.add_argument("--venv", type=Path, default=Path("/var/tmp/nl2sql-soak-venv"))
    ap.add_argument("--datadir", type=Path, default=None)
    args = ap.parse_args(argv)

    venv = S.private_venv(args.venv)
    cluster = LocalCluster(args.datadir or C.default_datadir(), venv=str(venv))
    if cluster.running:  # fresh backends and a fresh shared embedder of this checkout's code
        cluster.stop()
    cluster.start()
    ensure_connections(cluster, args.clients + 8)
    digest = S.template_digest(args.events_rows)
    if not S.template_ready(cluster, digest):
        log("building the template database (holding the install lock)")
        with S.install_lock():
            S.build_template(cluster, args.events_rows, digest)
    llm = LoopbackLLM().start()
    S.create_database(cluster, llm.base_url, args.model_timeout)
    log(f"cluster {cluster.datadir} port {cluster.port}, venv {venv}")
    with cluster.connect(S.DB) as c:
        log_size0 = c.execute("SELECT pg_total_relation_size('nl2sql.query_log')").fetchone()[0]
        dead0 = c.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()[0]
    log_offset = (cluster.datadir / "server.log").stat().st_size
    soak = Soak(args, cluster, llm)
    ready = threading.Barrier(args.clients + 1)
    clients = [threading.Thread(target=soak.client, args=(i, ready)) for i in range(args.clients)]
    for t in clients:
        t.start()
    ready.wait()
    soak.sample_rss()
    ctx0 = S.context_bytes(cluster, soak.client_pids[0])
    log(f"{args.clients} clients warmed up; soaking for {args.seconds:g} s")
    bg = [
        threading.Thread(target=soak.every, args=(args.reindex_every, soak.reindex, "reindex")),
        threading.Thread(target=soak.every, args=(args.ddl_every, soak.ddl, "ddl")),
        threading.Thread(target=soak.every, args=(1.0, soak.writer, "writer")),
        threading.Thread(target=soak.every, args=(args.fault_every, soak.fault, "fault")),
        threading.Thread(target=soak.every, args=(0.2, soak.monitor, "monitor")),
        threading.Thread(target=soak.every, args=(args.rss_every, soak.sample_rss, "rss")),
    ]
    for t in bg:
        t.start()
    with soak.lock:  # the warm-up calls are not counted
        soak.lat_ms.clear()
        soak.ops.clear()
        soak.kinds.clear()
    t_run = time.perf_counter()
    soak.stop.wait(args.seconds)
    soak.sample_rss()  # the clients' backends are still there
    ctx1 = S.context_bytes(cluster, soak.client_pids[0])
    soak.stop.set()
    for t in clients:
        t.join()
    wall = time.perf_counter() - t_run
    log(
        f"client 0's PostgreSQL memory contexts: {(ctx0 or 0) / 1e6:.1f} MB after warm-up, "
        f"{(ctx1 or 0) / 1e6:.1f} MB at the end (the rest of its RSS is Python's heap, code, "
        f"shared memory)"
    )
    with cluster.connect(S.DB) as c:
        c.execute(
            "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'soak-reindex'"
        )
        for t in bg:
            t.join()
        grew = c.execute("SELECT pg_total_relation_size('nl2sql.query_log')").fetchone()[0]
        dead = c.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()[0]
    llm.stop()
    if dead > dead0:
        soak.error("deadlock", f"pg_stat_database.deadlocks rose by {dead - dead0}")
    report(soak, wall, S.crashes(cluster, log_offset), (grew - log_size0, soak.kinds["ok"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
