#!/usr/bin/env python3
"""Throughput: questions per second with pgbench, many clients of one role, instant models.

PostgreSQL's own load generator (``pgbench``, from the server's bindir) runs ``--clients``
connections (default 16) of one ordinary role, each asking ``SELECT nl2sql(question)`` in a loop
for ``--seconds`` (default 30), the question drawn at random from five demo questions. The
model is the loopback server answering every call after ``--latency-ms`` (default 0: what the
machine, not a model, allows; answers are SCRIPTED, not a model's). Four phases, one after the
other, on one demo database (``nl2sql_throughput``, rebuilt each run):

* ``full``: the whole pipeline (retrieval, PreSQL and FinSQL calls, checks, runs, vote, log);
* ``full+quota``: the same with a generous quota on the role (``questions_per_minute`` 1,000,000:
  what the limits' bookkeeping costs, never reached);
* ``fast``: each question has a verified query (``nl2sql.add_verified_query``): retrieval,
  the verified query's check and run, the log; no model call;
* ``fast+quota``: the same with the quota.

Each phase prints pgbench's figures (``tps`` without the connections' start, latency average,
failed and aborted clients); each client's first question (its backend's start: importing the
pipeline) is inside the phase, as a new connection pays it. The cluster's shared embedding
process is stopped first (``common.stop_shared_embedder``), so that it runs this checkout's
code, which relays every model call. A machine-speed reference
(``bench.common.machine_reference_ms``) and the load average are printed before and after.

Usage: python bench/throughput.py [--clients 16] [--seconds 30] [--latency-ms 0]
       [--phases full,full+quota,fast,fast+quota] [--datadir DIR]
Run it under scripts/dev_locked.sh (it installs this checkout into the shared extension dir).
The last line printed is
``RESULT full_qps=… full_quota_qps=… fast_qps=… fast_quota_qps=… failures=… clients=…``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C
from concurrency import QUESTIONS, ROLE, ensure_connections, setup
from nl2sql_indexer.cluster import PG_BIN
from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule

DB = "nl2sql_throughput"
PHASES = ("full", "full+quota", "fast", "fast+quota")
QUOTA = 1_000_000  # questions_per_minute: never reached, so only its bookkeeping is measured


def log(*a) -> None:
    print(*a, flush=True)


def script_text() -> str:
    """The pgbench script: one ``nl2sql()`` call with a question drawn from ``QUESTIONS``."""
    quoted = ", ".join("'" + q.replace("'", "''") + "'" for q, _ in QUESTIONS)
    return f"\\set i random(1, {len(QUESTIONS)})\nSELECT nl2sql((ARRAY[{quoted}])[:i]);\n"


def parse_pgbench(out: str) -> dict[str, float]:
    """The figures of pgbench's summary: tps, latency average (ms), transactions, failures.

    Args:
        out: pgbench's standard output and error together.

    Returns:
        ``{"tps", "latency_ms", "transactions", "failed", "aborted"}``; a figure pgbench did
        not print is 0 (``aborted`` counts the "client N aborted" lines).
    """

    def num(pattern: str) -> float:
        m = re.search(pattern, out)
        return float(m.group(1)) if m else 0.0

    return {
        "tps": num(r"tps = ([\d.]+) \(without initial connection time\)"),
        "latency_ms": num(r"latency average = ([\d.]+) ms"),
        "transactions": num(r"number of transactions actually processed: (\d+)"),
        "failed": num(r"number of failed transactions: (\d+)"),
        "aborted": float(len(re.findall(r"client \d+ aborted", out))),
    }


def run_phase(cluster, script: Path, clients: int, seconds: int) -> dict[str, float]:
    """One pgbench run as ``ROLE``; its summary figures (``parse_pgbench``) and its output."""
    cmd = [
        str(PG_BIN / "pgbench"),
        "-n",  # no vacuum of pgbench's own tables: there are none
        "-c", str(clients),
        "-j", str(min(clients, max(1, len(os.sched_getaffinity(0))))),
        "-T", str(seconds),
        "-f", str(script),
        "-h", "127.0.0.1",
        "-p", str(cluster.port),
        "-U", ROLE,
        DB,
    ]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 300)
    out = p.stdout + p.stderr
    fig = parse_pgbench(out)
    if p.returncode != 0 or fig["aborted"] or fig["failed"]:
        log("   pgbench said: " + " | ".join(out.strip().splitlines()[-12:]))
    return fig


def set_phase(conn, phase: str) -> None:
    """The role's quota and the verified queries as ``phase`` needs them."""
    conn.execute("DELETE FROM nl2sql.quota")
    if phase.endswith("+quota"):
        conn.execute("SELECT nl2sql.set_quota(%s, questions_per_minute => %s)", (ROLE, QUOTA))
    conn.execute("DELETE FROM nl2sql.verified_query")
    if phase.startswith("fast"):
        for q, sql in QUESTIONS:
            conn.execute("SELECT nl2sql.add_verified_query(%s, %s)", (q, sql))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--datadir", type=Path, default=None)
    args = ap.parse_args(argv)
    phases = [p for p in args.phases.split(",") if p]
    unknown = sorted(set(phases) - set(PHASES))
    if unknown:
        ap.error(f"unknown phase(s) {', '.join(unknown)}; choose among {', '.join(PHASES)}")

    log(
        f"machine speed reference: {C.machine_reference_ms():.0f} ms for 10^6 Python additions; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    cluster = C.start_cluster(args.datadir)
    if C.stop_shared_embedder(cluster):  # it restarts with this checkout's code
        log("stopped the shared embedding process of an earlier run")
    ensure_connections(cluster, args.clients)
    llm = LoopbackLLM().start()
    for q, sql in QUESTIONS:
        llm.add_rule(Rule(question=q, response=sql, delay_s=args.latency_ms / 1000.0))
    setup(cluster, llm, db=DB)
    figs: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "nl2sql.pgbench"
        script.write_text(script_text())
        os.chmod(tmp, 0o755)
        os.chmod(script, 0o644)
        with cluster.connect(DB) as conn:
            for phase in phases:
                set_phase(conn, phase)
                fig = figs[phase] = run_phase(cluster, script, args.clients, args.seconds)
                log(
                    f"{phase:>11}: {fig['tps']:.1f} questions/s, latency average "
                    f"{fig['latency_ms']:.0f} ms, {fig['transactions']:.0f} questions, "
                    f"{fig['failed']:.0f} failed, {fig['aborted']:.0f} clients aborted "
                    f"({args.clients} clients, {args.seconds} s, models at {args.latency_ms:g} ms)"
                )
            set_phase(conn, "full")
    llm.stop()
    log(
        f"machine speed reference after: {C.machine_reference_ms():.0f} ms; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    failures = sum(f["failed"] + f["aborted"] for f in figs.values())
    qps = {p: figs[p]["tps"] if p in figs else float("nan") for p in PHASES}
    print(
        f"RESULT full_qps={qps['full']:.1f} full_quota_qps={qps['full+quota']:.1f} "
        f"fast_qps={qps['fast']:.1f} fast_quota_qps={qps['fast+quota']:.1f} "
        f"failures={failures:.0f} clients={args.clients}"
    )
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
