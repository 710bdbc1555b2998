"""Embedding throughput of cell values: fp32 against int8 ONNX models, with a profile.

Texts are 2-4 whole words of the model's WordPiece vocabulary (as ``bench/scale.py``'s values:
2-10 tokens). For each model file it reports values/s of the bulk encoder (``OnnxEncoder``,
length-sorted batches padded to their own longest), the share of time spent tokenizing and in
``session.run``, and cosine agreement of the int8 vectors with the fp32 ones.

Usage: ``python bench/embed_speed.py [--n 8192] [--threads N] [--batch-tokens 512]``
Last line: ``RESULT fp32_values_per_s=… int8_values_per_s=… speedup=… cos_p50=… cos_min=…``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "py_udf"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_reference_ms
from nl2sql.embedding import encode


def texts(n: int) -> list[str]:
    """``n`` distinct values of 2-4 vocabulary words (a fixed seed: the same texts every run)."""
    from tokenizers import Tokenizer

    vocab = Tokenizer.from_file(str(encode.model_dir() / "tokenizer.json")).get_vocab()
    words = sorted(w for w in vocab if w.isalpha() and w.isascii() and w.islower() and len(w) >= 4)
    rng = random.Random(33)
    return list(dict.fromkeys(" ".join(rng.sample(words, rng.randint(2, 4))) for _ in range(n)))


def profile(enc, vals: list[str]) -> dict:
    """Time tokenization and ``session.run`` separately, and the whole ``encode``."""
    t0 = time.perf_counter()
    toks = enc.tokenizer.encode_batch(vals)
    tok_s = time.perf_counter() - t0
    run_s = 0.0
    real = enc.session.run

    def timed(*a, **k):
        nonlocal run_s
        t = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            run_s += time.perf_counter() - t

    enc.session.run = timed
    t0 = time.perf_counter()
    vecs = enc.encode(vals)
    total = time.perf_counter() - t0
    enc.session.run = real
    lens = [len(t.ids) for t in toks]
    return {
        "values_per_s": len(vals) / total,
        "tokenize_pct": 100 * tok_s / total,
        "run_pct": 100 * run_s / total,
        "tokens_mean": sum(lens) / len(lens),
        "tokens_max": max(lens),
        "vecs": vecs,
    }


def session(path: Path, args):
    """An ONNX Runtime session as OnnxEncoder makes it, with the options under test."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = args.threads, 1
    so.graph_optimization_level = {
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[args.opt_level]
    so.enable_mem_pattern = args.mem_pattern == "on"
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def example_overlap(data: Path, k: int = 9) -> tuple[float, int]:
    """Example retrieval with int8 against fp32: each question of ``evals.jsonl`` (its first
    line: the question without BIRD's evidence) retrieves its ``k`` nearest other questions by
    cosine (how ``k_examples`` examples are found); the share of fp32's ``k`` that int8 finds
    too, over all questions."""
    import json

    qs = [json.loads(line)["question"].split("\n")[0] for line in open(data / "evals.jsonl")]
    qs = list(dict.fromkeys(qs))
    tops = []
    for prec in ("fp32", "int8"):
        v = encode.OnnxEncoder(encode.onnx_path(prec), encode.model_dir()).encode(qs)
        sim = v @ v.T
        for i in range(len(qs)):
            sim[i, i] = -2
        tops.append([set(row) for row in (-sim).argsort(1)[:, :k].tolist()])
    kept = sum(len(a & b) for a, b in zip(*tops))
    return kept / (k * len(qs)), len(qs)


def main(argv: list[str] | None = None) -> int:
    """Measure both model files back to back and print the RESULT line.

    Args:
        argv: command-line arguments without the program name.

    Returns:
        0, or 2 when a model file is missing.
    """
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--threads", type=int, default=encode.bulk_threads())
    ap.add_argument("--batch-tokens", type=int, default=encode.BATCH_TOKENS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--opt-level", choices=("basic", "extended", "all"), default="all")
    ap.add_argument("--mem-pattern", choices=("on", "off"), default="on")
    ap.add_argument("--examples", type=Path, help="bench-data folder: also example retrieval")
    args = ap.parse_args(argv)
    encode.BATCH_TOKENS = args.batch_tokens
    vals = texts(args.n)
    print(
        f"machine_reference_ms={machine_reference_ms():.1f} load={os.getloadavg()[0]:.2f} "
        f"threads={args.threads} batch_tokens={args.batch_tokens} values={len(vals)}"
    )
    figs = {}
    for prec in ("fp32", "int8"):
        path = encode.onnx_path(prec)
        if not path.exists():
            print(f"no {prec} model file: {path}")
            return 2
        enc = encode.OnnxEncoder(path, encode.model_dir(), args.threads)
        if (args.opt_level, args.mem_pattern) != ("all", "on"):
            enc.session = session(path, args)
        enc.encode(vals[:256])  # warm up
        runs = [profile(enc, vals) for _ in range(args.rounds)]
        best = max(runs, key=lambda r: r["values_per_s"])
        figs[prec] = best
        print(
            f"{prec}: {best['values_per_s']:.0f} values/s (best of {args.rounds}), "
            f"tokenize {best['tokenize_pct']:.0f} %, session.run {best['run_pct']:.0f} %, "
            f"tokens mean {best['tokens_mean']:.1f} max {best['tokens_max']}"
        )
    import numpy as np

    cos = np.sort((figs["fp32"]["vecs"] * figs["int8"]["vecs"]).sum(1))
    fp, i8 = figs["fp32"]["values_per_s"], figs["int8"]["values_per_s"]
    if args.examples:
        share, n = example_overlap(args.examples)
        print(f"example retrieval: int8 finds {share:.3f} of fp32's top-9 ({n} questions)")
    print(
        f"RESULT fp32_values_per_s={fp:.0f} int8_values_per_s={i8:.0f} speedup={i8 / fp:.2f} "
        f"cos_p50={cos[len(cos) // 2]:.4f} cos_min={cos[0]:.4f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
