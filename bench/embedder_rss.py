#!/usr/bin/env python3
"""The shared embedding process's memory under many distinct requests: bounded or growing?

Starts the shared embedder of this checkout (``python -m nl2sql.embedding._server``, the
package imported from ``py_udf/``, the model files from the venv) in a private folder, then
sends ``--requests`` embedding requests from ``--threads`` client threads, each request 1 to
``--texts`` distinct texts of 1 to 60 words (so every request is new to the process's cache
and the token counts vary, as questions and phrases do). With ``--relay-every K`` every K-th
request is a relayed model call (``POST /nl2sql/v1/chat``) to the scripted loopback server
(``nl2sql_indexer.dev.loopback``; SCRIPTED answers, not a model's) instead, as backends make
them. The process's ``VmRSS`` and ``RssAnon`` (``/proc/PID/status``) are sampled every
``--sample-every`` requests.

No PostgreSQL and no lock are needed: the process runs as this user, its postmaster pid is
this script's.

Usage: python bench/embedder_rss.py [--requests 20000] [--threads 4] [--texts 3]
       [--relay-every 0] [--sample-every 1000]
The last line printed is ``RESULT requests=<n> rss_mb_first=<MB> rss_mb_last=<MB>
rss_mb_growth_second_half=<MB>`` (first sample: after the first ``--sample-every`` requests).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py_udf"))
sys.path.insert(0, str(ROOT / "indexer"))

import httpx2  # noqa: E402 - after the checkout's paths

WORDS = (
    "singer stadium concert country age capacity name year average total count list which "
    "how many most least highest lowest city team player score season match goal club date "
    "price order customer product sale region month week day amount revenue invoice supplier "
    "hero power publisher gender race height weight colour eye hair alignment comic universe"
).split()


def status_kb(pid: int) -> dict[str, int]:
    """``VmRSS``, ``RssAnon``, ``VmHWM`` of a process, in kB (``/proc/PID/status``)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def text(rng: random.Random, i: int) -> str:
    """A distinct text of 1 to 60 words (its number makes it unique)."""
    n = rng.randint(1, 60)
    return f"{i} " + " ".join(rng.choice(WORDS) for _ in range(n))


def start_server(folder: Path) -> subprocess.Popen:
    """The embedder process of this checkout serving ``folder/embed.sock``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "py_udf")}
    log = open(folder / "embedder.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nl2sql.embedding._server",
            "--dir",
            str(folder),
            "--postmaster-pid",
            str(os.getpid()),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while not (folder / "embed.sock").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError((folder / "embedder.log").read_text()[-2000:])
        time.sleep(0.2)
    return proc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--texts", type=int, default=3, help="at most this many texts a request")
    ap.add_argument("--relay-every", type=int, default=0)
    ap.add_argument("--sample-every", type=int, default=1000)
    args = ap.parse_args(argv)

    llm = None
    if args.relay_every:
        from nl2sql_indexer.dev.loopback import LoopbackLLM

        llm = LoopbackLLM().start()
        llm.set_default("SELECT 1")
    folder = Path(tempfile.mkdtemp(prefix="nl2sql-embrss-"))
    proc = start_server(folder)
    print(f"embedder pid {proc.pid}: {status_kb(proc.pid)['VmRSS'] / 1024:.0f} MB after start")
    counter = iter(range(args.requests))
    lock = threading.Lock()
    samples: list[tuple[int, float, float]] = []
    errors: list[str] = []
    done = [0]

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        client = httpx2.Client(
            transport=httpx2.HTTPTransport(uds=str(folder / "embed.sock")),
            base_url="http://nl2sql-embedder",
            timeout=60,
        )
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            if args.relay_every and i % args.relay_every == 0:
                body = {
                    "config": {"name": "m", "model": "m", "base_url": llm.base_url},
                    "messages": [{"role": "user", "content": text(rng, i)}],
                    "timeout_s": 10,
                }
                r = client.post("/nl2sql/v1/chat", json=body)
            else:
                texts = [text(rng, i * 100 + k) for k in range(rng.randint(1, args.texts))]
                r = client.post(
                    "/v1/embeddings",
                    json={"input": texts, "model": "all-MiniLM-L6-v2", "encoding_format": "base64"},
                )
            with lock:
                if r.status_code != 200:
                    errors.append(f"HTTP {r.status_code}: {r.text[:200]}")
                done[0] += 1
                if done[0] % args.sample_every == 0:
                    s = status_kb(proc.pid)
                    samples.append((done[0], s["VmRSS"] / 1024, s["RssAnon"] / 1024))
                    print(
                        f"{done[0]:>7} requests: VmRSS {s['VmRSS'] / 1024:.1f} MB, "
                        f"RssAnon {s['RssAnon'] / 1024:.1f} MB",
                        flush=True,
                    )

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    hwm = status_kb(proc.pid)["VmHWM"] / 1024
    proc.terminate()
    proc.wait(10)
    if llm:
        llm.stop()
    print(f"{done[0]} requests in {wall:.0f} s ({done[0] / wall:.0f}/s); errors {len(errors)}")
    for e in errors[:5]:
        print(f"  {e}")
    first, last = samples[0][1], samples[-1][1]
    mid = samples[len(samples) // 2][1]
    print(f"VmHWM {hwm:.1f} MB")
    print(
        f"RESULT requests={done[0]} rss_mb_first={first:.1f} rss_mb_last={last:.1f} "
        f"rss_mb_growth_second_half={last - mid:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
