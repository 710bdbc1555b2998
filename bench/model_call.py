#!/usr/bin/env python3
"""One model call's own cost: CPU and wall time of ``openai_call.call_here``, the function the
shared embedding process runs for every relayed call (and a backend for its own calls), and the
CPU of that process for one relayed call.

The model is the loopback server (``nl2sql_indexer.dev.loopback``; its answers are SCRIPTED,
not a model's) in a child process, so that its CPU is not counted; it answers at once. Two
figures, each over ``--calls`` calls one after the other (after 20 not counted), with a
2,000-character prompt:

* in this process: per call, its CPU time (``time.process_time``) and the wall time;
* relayed: the shared embedding process (``python -m nl2sql.embedding._server``, started here in
  a temporary directory) makes the calls for this process, as it does for a backend
  (``POST /nl2sql/v1/chat``); per call, that process's CPU time (``/proc/<pid>/stat``: its HTTP
  server, the request's validation and the call) and the wall time seen here.

A machine-speed reference (``common.machine_reference_ms``) is printed before and after.

Usage: python bench/model_call.py [--calls 500]
The last line printed is ``RESULT cpu_ms_per_call=… wall_ms_per_call=… relay_cpu_ms_per_call=…
relay_wall_ms_per_call=… calls=…``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "py_udf"))
sys.path.insert(0, str(ROOT / "indexer"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_reference_ms  # noqa: E402
from nl2sql.core.types import ModelConfig  # noqa: E402
from nl2sql.embedding._unix_http import UnixClient  # noqa: E402
from nl2sql.model.openai_call import call_here  # noqa: E402

SERVER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule
llm = LoopbackLLM()
llm.add_rule(Rule(model="bench", response="SELECT count(*) FROM singer"))
llm.start()
print(llm.base_url, flush=True)
sys.stdin.read()  # until the parent closes the pipe
"""
MESSAGES = [
    {"role": "system", "content": "You write PostgreSQL. " + "CREATE TABLE singer (id int); " * 70},
    {"role": "user", "content": "How many singers are there?"},
]


def _cpu_ms(pid: int) -> float:
    """CPU time (user + system) of process ``pid`` so far, in milliseconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def in_process(cfg: ModelConfig, calls: int) -> tuple[float, float]:
    """(CPU ms, wall ms) per ``call_here`` in this process."""
    for _ in range(20):
        reply = call_here(cfg, MESSAGES, 30, 1, None)
        if reply.error:
            raise SystemExit(f"the loopback call failed: {reply.error}")
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(calls):
        call_here(cfg, MESSAGES, 30, 1, None)
    return (time.process_time() - c0) * 1000 / calls, (time.perf_counter() - t0) * 1000 / calls


def relayed(cfg: ModelConfig, calls: int) -> tuple[float, float]:
    """(CPU ms of the shared embedding process, wall ms here) per relayed call."""
    with tempfile.TemporaryDirectory() as d:
        server = subprocess.Popen(
            [sys.executable, "-m", "nl2sql.embedding._server", "--dir", d]
            + ["--postmaster-pid", str(os.getpid())],
            cwd=ROOT / "py_udf",
            env={**os.environ, "PYTHONPATH": str(ROOT / "py_udf")},
        )
        try:
            sock = Path(d) / "embed.sock"
            for _ in range(600):
                if sock.exists():
                    break
                time.sleep(0.1)
            client = UnixClient(str(sock))
            body = {"config": dataclasses.asdict(cfg), "messages": MESSAGES, "timeout_s": 30}
            for _ in range(20):
                resp = client.post("/nl2sql/v1/chat", json=body, timeout=60)
                if resp.status_code != 200 or resp.json().get("error"):
                    raise SystemExit(f"the relayed call failed: {resp.text[:300]}")
            c0, t0 = _cpu_ms(server.pid), time.perf_counter()
            for _ in range(calls):
                client.post("/nl2sql/v1/chat", json=body, timeout=60)
            wall = (time.perf_counter() - t0) * 1000 / calls
            return (_cpu_ms(server.pid) - c0) / calls, wall
        finally:
            server.terminate()
            server.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=500, help="calls counted (default 500)")
    args = ap.parse_args(argv)
    print(f"machine reference: {machine_reference_ms():.0f} ms", flush=True)
    loopback = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(ROOT / "indexer")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        cfg = ModelConfig(name="bench", model="bench", base_url=loopback.stdout.readline().strip())
        cpu, wall = in_process(cfg, args.calls)
        print(f"in this process: {cpu:.2f} ms CPU, {wall:.2f} ms wall a call", flush=True)
        relay_cpu, relay_wall = relayed(cfg, args.calls)
        print(
            f"relayed: {relay_cpu:.2f} ms CPU of the shared process, {relay_wall:.2f} ms wall",
            flush=True,
        )
    finally:
        loopback.stdin.close()
        loopback.wait(timeout=10)
    print(f"machine reference: {machine_reference_ms():.0f} ms", flush=True)
    print(
        f"RESULT cpu_ms_per_call={cpu:.2f} wall_ms_per_call={wall:.2f} "
        f"relay_cpu_ms_per_call={relay_cpu:.2f} relay_wall_ms_per_call={relay_wall:.2f} "
        f"calls={args.calls}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
