#!/usr/bin/env python3
"""One model call's own cost: CPU and wall time of ``openai_call.call_here``, the function the
shared embedding process runs for every relayed call (and a backend for its own calls).

The model is the loopback server (``nl2sql_indexer.dev.loopback``; its answers are SCRIPTED,
not a model's) in a child process, so that its CPU is not counted; it answers at once. This
process makes ``--calls`` calls one after the other (after 20 not counted) with a 2,000-character
prompt and reports, per call: the CPU time of this process (``time.process_time``) and the wall
time. A machine-speed reference (``common.machine_reference_ms``) is printed before and after.

Usage: python bench/model_call.py [--calls 500]
The last line printed is ``RESULT cpu_ms_per_call=… wall_ms_per_call=… calls=…``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "py_udf"))
sys.path.insert(0, str(ROOT / "indexer"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_reference_ms  # noqa: E402
from nl2sql.core.types import ModelConfig  # noqa: E402
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=500, help="calls counted (default 500)")
    args = ap.parse_args(argv)
    print(f"machine reference: {machine_reference_ms():.0f} ms", flush=True)
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(ROOT / "indexer")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        cfg = ModelConfig(name="bench", model="bench", base_url=server.stdout.readline().strip())
        for _ in range(20):
            reply = call_here(cfg, MESSAGES, 30, 1, None)
            if reply.error:
                raise SystemExit(f"the loopback call failed: {reply.error}")
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(args.calls):
            call_here(cfg, MESSAGES, 30, 1, None)
        cpu = (time.process_time() - c0) * 1000 / args.calls
        wall = (time.perf_counter() - t0) * 1000 / args.calls
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    print(f"machine reference: {machine_reference_ms():.0f} ms", flush=True)
    print(f"RESULT cpu_ms_per_call={cpu:.2f} wall_ms_per_call={wall:.2f} calls={args.calls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
