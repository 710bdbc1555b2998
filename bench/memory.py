#!/usr/bin/env python3
"""Memory and cold-start benchmark: N new backends each ask one question.

The demo database (``nl2sql_indexer.dev.demo_data``) with one model on the scripted loopback server
(``nl2sql_indexer.dev.loopback``: it answers every demo question with its reference SQL at once;
answers are SCRIPTED, not a model's). Each of ``--backends`` new connections (an ordinary role
that may SELECT the demo tables) does, one backend after the other:

1. ``SELECT 1``, then reads the backend's ``/proc/PID/status`` (``VmRSS``, ``RssAnon``): the
   size of a backend that has not asked anything;
2. asks one demo question with ``nl2sql()`` (question i mod 10, so consecutive backends ask
   different questions): the *first-question time*;
3. reads ``/proc/PID/status`` again (``VmRSS``, ``RssAnon``, ``VmHWM``, the peak): RSS added by
   the first question is VmRSS after minus VmRSS before;
4. asks the same question twice more: the *warm time* (the faster of the two).

First-question overhead (cold start) = first-question time - warm time: what a new backend pays
once (imports, plans, embedder start or connection, caches) before it answers like a warm one.
``--embedder shared|local`` sets the ``embedder`` setting first (when this checkout has it);
with ``shared``, the very first backend may also start the server's embedding process: that
one-off start is shown apart (``service start``) and left out of the p50 figures, which are
over the backends that found the service running. The embedding process's own RSS is shown
once (it is shared by every backend of the server).

With ``--breakdown``, one more new backend (the superuser's, for the PL/Python DO blocks)
shows where the overhead goes: importing ``nl2sql.udf`` (ms, MB), the first question with that
import done against a warm one (the first-call work), then importing ``openai`` (what a
backend pays when it calls models itself; 0 when the question imported it already).

Usage: python bench/memory.py [--backends 8] [--embedder shared|local] [--fresh-embedder]
       [--datadir DIR] [--breakdown]
Run it under scripts/dev_locked.sh (it installs this checkout into the shared extension dir).
The last line printed is
``RESULT rss_mb_p50=<VmRSS after the first question> rss_added_mb_p50=<MB>
cold_start_ms_p50=<ms> embedder=<shared|local>``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C
from nl2sql_indexer.dev.demo_data import DEMO_QUESTIONS, demo_sql
from nl2sql_indexer.dev.loopback import LoopbackLLM

DB = "nl2sql_memory"
ROLE = "nl2sql_bench_user"
MODEL = "bench"


def log(*a) -> None:
    print(*a, flush=True)


def proc_status(pid: int) -> dict[str, float]:
    """The memory lines of ``/proc/PID/status`` in MB (``VmRSS``, ``VmHWM``, ``RssAnon``,
    ``RssFile``, ``RssShmem``); {} when the process is gone."""
    out: dict[str, float] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(rest.split()[0]) / 1024.0  # kB -> MB
    return out


def setup(cluster, llm: LoopbackLLM, embedder: str | None) -> str:
    """Create the demo database with the extension, the model and the role; returns the
    effective ``embedder`` setting ('local' when this checkout has no such setting)."""
    cluster.create_database(DB, drop=True)
    with cluster.connect(DB) as c:
        c.execute(demo_sql())
        c.execute("CREATE EXTENSION nl2sql CASCADE")
        has = c.execute("SELECT 1 FROM nl2sql.settings WHERE name = 'embedder'").fetchone()
        if embedder and has:
            c.execute("SELECT nl2sql.set_setting('embedder', %s)", (embedder,))
        c.execute("SELECT nl2sql.reindex()")
        c.execute(
            "SELECT nl2sql.add_model(%s, %s, base_url => %s, timeout_s => 30)",
            (MODEL, MODEL, llm.base_url),
        )
        if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone():
            c.execute(f"CREATE ROLE {ROLE} LOGIN")
        c.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {ROLE}")
        return C.setting_text(c, "embedder") if has else "local"


def service_rss(cluster) -> tuple[int | None, dict[str, float]]:
    """The shared embedding process's pid (from its pid file in the data directory) and its
    memory lines; (None, {}) when there is none."""
    pidfile = cluster.datadir / "nl2sql_embedder" / "embedder.pid"
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None, {}
    return pid, proc_status(pid)


def one_backend(cluster, i: int) -> dict:
    """Open a new backend, ask question i (mod 10) three times; the figures of the module
    docstring."""
    q = DEMO_QUESTIONS[i % len(DEMO_QUESTIONS)][0]
    conn = cluster.connect(DB, user=ROLE)
    pid = conn.info.backend_pid
    conn.execute("SELECT 1")
    before = proc_status(pid)
    t0 = time.perf_counter()
    sql = conn.execute("SELECT nl2sql(%s)", (q,)).fetchone()[0]
    first = (time.perf_counter() - t0) * 1000
    after = proc_status(pid)
    warm = []
    for _ in range(2):
        t0 = time.perf_counter()
        conn.execute("SELECT nl2sql(%s)", (q,)).fetchone()
        warm.append((time.perf_counter() - t0) * 1000)
    return {
        "conn": conn,
        "pid": pid,
        "ok": bool(sql),
        "before": before,
        "after": after,
        "first_ms": first,
        "warm_ms": min(warm),
        "overhead_ms": first - min(warm),
    }


_STEP = """
import importlib, json, sys, time
def _rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
had = GD.get("nl2sql_bench_modules") or set(sys.modules)
r0, t0 = _rss(), time.perf_counter()
for m in %r:
    importlib.import_module(m)
plpy.notice(json.dumps({"ms": (time.perf_counter() - t0) * 1000, "mb": _rss() - r0,
                        "new": sorted(set(sys.modules) - had)}))
GD["nl2sql_bench_modules"] = set(sys.modules)
"""


def _step(conn, modules: list[str]) -> dict:
    """Import ``modules`` in the connection's backend (a DO block): ms, MB and what was new."""
    import json

    got: list[dict] = []

    def handler(d) -> None:
        got.append(json.loads(d.message_primary))

    conn.add_notice_handler(handler)
    try:
        conn.execute("DO $x$%s$x$ LANGUAGE plpython3u" % (_STEP % (modules,)))
    finally:
        conn.remove_notice_handler(handler)
    return got[-1]


def breakdown(cluster, i: int) -> None:
    """Where a new backend's first question goes, step by step, in one more new backend (as
    the superuser, who may run the PL/Python DO blocks that time the imports): importing
    ``nl2sql.udf``; the first question with that import done (the first-call work: HTTP
    client, settings, catalog, plans); and, after it, importing ``openai`` (0 when the question
    imported it already; otherwise what the backend would pay to call models itself)."""
    q = DEMO_QUESTIONS[i % len(DEMO_QUESTIONS)][0]
    with cluster.connect(DB) as conn:
        pid = conn.info.backend_pid
        conn.execute("SELECT 1")
        t0 = time.perf_counter()
        conn.execute("SELECT nl2sql._boot()")  # the venv on sys.path (every entry point's)
        boot = (time.perf_counter() - t0) * 1000
        imp = _step(conn, ["nl2sql.udf"])
        r0 = proc_status(pid).get("VmRSS", 0.0)
        t0 = time.perf_counter()
        conn.execute("SELECT nl2sql(%s)", (q,)).fetchone()
        first = (time.perf_counter() - t0) * 1000
        r1 = proc_status(pid).get("VmRSS", 0.0)
        during = _step(conn, [])["new"]  # what the first question imported
        warm = []
        for _ in range(2):
            t0 = time.perf_counter()
            conn.execute("SELECT nl2sql(%s)", (q,)).fetchone()
            warm.append((time.perf_counter() - t0) * 1000)
        oa = _step(conn, ["openai"])
        mods = [m for m in oa["new"] if m.split(".")[0] == "openai"]
    log(
        f"breakdown (backend {pid}, as superuser): nl2sql._boot() {boot:.0f} ms; "
        f"import nl2sql.udf {imp['ms']:.0f} ms "
        f"+{imp['mb']:.1f} MB; first question after it {first:.0f} ms +{r1 - r0:.1f} MB vs "
        f"warm {min(warm):.0f} ms (first-call work {first - min(warm):.0f} ms); then import "
        f"openai {oa['ms']:.0f} ms +{oa['mb']:.1f} MB "
        f"({len(mods)} openai modules new: "
        f"{'not imported by the question' if mods else 'the question had imported it'})"
    )
    tops: dict[str, int] = {}
    for m in during:
        tops[m.split(".")[0]] = tops.get(m.split(".")[0], 0) + 1
    log(
        "  modules the first question imported (package: count): "
        + ", ".join(f"{k}: {v}" for k, v in sorted(tops.items(), key=lambda kv: -kv[1]))
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--backends", type=int, default=8)
    ap.add_argument(
        "--embedder",
        choices=["shared", "local"],
        default=None,
        help="set the embedder setting first (default: leave it as it is)",
    )
    ap.add_argument("--datadir", type=Path, default=None)
    ap.add_argument(
        "--breakdown",
        action="store_true",
        help="then time, in one more new backend, importing nl2sql.udf, the first "
        "question without it, and importing openai",
    )
    ap.add_argument(
        "--fresh-embedder",
        action="store_true",
        help="stop the running embedding process first, so that the first backend "
        "starts it (its cost is shown apart)",
    )
    args = ap.parse_args(argv)

    cluster = C.start_cluster(args.datadir)
    log(
        f"cluster {cluster.datadir} port {cluster.port}; {os.cpu_count()} cores, load "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min)"
    )
    llm = LoopbackLLM().start()
    llm.set_replay(MODEL, dict(DEMO_QUESTIONS))
    try:
        embedder = setup(cluster, llm, args.embedder)
        spid, _ = service_rss(cluster)
        if args.fresh_embedder and spid and proc_status(spid):
            os.kill(spid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while proc_status(spid).get("VmRSS") and time.monotonic() < deadline:
                time.sleep(0.05)
        spid, _ = service_rss(cluster)
        log(
            f"embedder setting: {embedder}; embedding process "
            f"{'running, pid ' + str(spid) if spid and proc_status(spid) else 'not running'}"
        )
        log(
            f"{args.backends} new backends, one after the other, each asking one question "
            f"(scripted loopback answers, no model latency)"
        )
        log(
            f"{'#':>3} {'pid':>7} {'rss0':>7} {'rss1':>7} {'added':>7} {'anon1':>7} {'hwm':>7} "
            f"{'first':>8} {'warm':>7} {'overhead':>8}  (MB; ms)"
        )
        rows = []
        for i in range(args.backends):
            had_service = bool(service_rss(cluster)[1])
            r = one_backend(cluster, i)
            r["started_service"] = embedder == "shared" and not had_service
            rows.append(r)
            b, a = r["before"], r["after"]
            log(
                f"{i:>3} {r['pid']:>7} {b.get('VmRSS', 0):7.1f} {a.get('VmRSS', 0):7.1f} "
                f"{a.get('VmRSS', 0) - b.get('VmRSS', 0):7.1f} {a.get('RssAnon', 0):7.1f} "
                f"{a.get('VmHWM', 0):7.1f} {r['first_ms']:8.0f} {r['warm_ms']:7.0f} "
                f"{r['overhead_ms']:8.0f}"
                + ("  (started the embedding process)" if r["started_service"] else "")
                + ("" if r["ok"] else "  NO SQL")
            )
        spid, srss = service_rss(cluster)
        if srss:
            log(
                f"embedding process pid {spid}: VmRSS {srss['VmRSS']:.1f} MB, VmHWM "
                f"{srss['VmHWM']:.1f} MB (one per server)"
            )
        counted = [r for r in rows if not r["started_service"]] or rows
        for r in rows:
            if r["started_service"]:
                log(
                    f"service start: the backend that started the embedding process paid "
                    f"{r['overhead_ms']:.0f} ms of overhead (not in the p50 figures)"
                )
        rss = [r["after"].get("VmRSS", 0.0) for r in counted]
        added = [r["after"].get("VmRSS", 0.0) - r["before"].get("VmRSS", 0.0) for r in counted]
        anon = [r["after"].get("RssAnon", 0.0) for r in counted]
        cold = [r["overhead_ms"] for r in counted]
        first = [r["first_ms"] for r in counted]
        errors = sum(not r["ok"] for r in rows)
        total = sum(r["after"].get("VmRSS", 0.0) for r in rows) + srss.get("VmRSS", 0.0)
        log(
            f"p50 over {len(counted)} backends: VmRSS after the first question "
            f"{C.percentile(rss, 50):.1f} MB (RssAnon {C.percentile(anon, 50):.1f} MB), added "
            f"{C.percentile(added, 50):.1f} MB; first question {C.percentile(first, 50):.0f} ms, "
            f"overhead {C.percentile(cold, 50):.0f} ms (max {max(cold):.0f})"
        )
        log(
            f"all {len(rows)} backends + embedding process: {total:.0f} MB VmRSS; "
            f"questions without SQL: {errors}; load now "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        for r in rows:
            r["conn"].close()
        if args.breakdown:
            breakdown(cluster, args.backends)
    finally:
        llm.stop()
    log(
        f"RESULT rss_mb_p50={C.percentile(rss, 50):.1f} rss_added_mb_p50="
        f"{C.percentile(added, 50):.1f} cold_start_ms_p50={C.percentile(cold, 50):.0f} "
        f"embedder={embedder}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
