"""Client-side cost of an embedding endpoint (``embedding.remote``): values/s through the
loopback server's ``/v1/embeddings`` (vectors NOT a model's: hashed trigrams, computed by the
server in this machine's Python) at several batch sizes and concurrencies, so the figure is
nl2sql's request, JSON and checking overhead plus the loopback's own work — an upper bound of
what the path costs, not a model's speed. A real endpoint's speed is its model's.

Usage: ``python bench/embed_endpoint.py [--n 20000] [--dims 768]``
Last line: ``RESULT values_per_s_b64_c1=… values_per_s_b256_c2=… values_per_s_b256_c4=…``.
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "py_udf"))
sys.path.insert(0, str(ROOT / "indexer"))
sys.path.insert(0, str(ROOT / "bench"))

from common import machine_reference_ms  # noqa: E402
from nl2sql.embedding import remote  # noqa: E402
from nl2sql_indexer.dev import _loopback_embed  # noqa: E402
from nl2sql_indexer.dev.loopback import LoopbackLLM  # noqa: E402

SHAPES = ((64, 1), (256, 2), (256, 4))  # (batch_size, concurrency)


def values(n: int) -> list[str]:
    """``n`` distinct values of 2-3 words (a fixed seed)."""
    rng = random.Random(43)
    word = lambda: "".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9)))  # noqa: E731
    return list(dict.fromkeys(" ".join(word() for _ in range(rng.randint(2, 3))) for _ in range(n)))


def main() -> None:
    """Measure and print one line per shape, then the RESULT line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--dims", type=int, default=768)
    args = ap.parse_args()
    texts = values(args.n)
    out = {}
    with LoopbackLLM() as llm:
        _loopback_embed.set_embedding(llm, "bench", args.dims, "openai")
        for batch, conc in SHAPES:
            cfg = remote.EmbeddingModel(
                "bench",
                llm.base_url,
                "bench",
                args.dims,
                batch_size=batch,
                concurrency=conc,
                timeout_s=60,
            )
            t0 = time.perf_counter()
            got = remote.embed(cfg, texts)
            s = time.perf_counter() - t0
            assert len(got) == len(texts)
            out[f"values_per_s_b{batch}_c{conc}"] = len(texts) / s
            print(
                f"batch {batch:4d} concurrency {conc}: {len(texts) / s:8.0f} values/s ({s:.2f} s)"
            )
    print(f"machine reference: {machine_reference_ms():.1f} ms")
    print("RESULT " + " ".join(f"{k}={v:.0f}" for k, v in out.items()))


if __name__ == "__main__":
    main()
