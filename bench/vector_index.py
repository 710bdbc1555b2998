#!/usr/bin/env python3
"""The value index's vector part alone (pgvector, no nl2sql): the HNSW build and the
nearest-value search for ``vector(384)`` against ``halfvec(384)`` storage (sql/incremental/
023-value-halfvec.sql), ``maintenance_work_mem`` and ``ef_construction``, on the same rows.

Rows: ``--rows`` unit-length 384-dimension vectors in ``--clusters`` clusters (a centre plus
noise: neighbours as close as those of real value embeddings are not, but the build's and the
search's work is the same per row). Per variant: the build's seconds, the table's and index's
size, the search's p50 (``ORDER BY embedding <=> q LIMIT 12`` as nl2sql._match_values runs it,
prepared, ``hnsw.ef_search`` 40), recall@12 against the exact answer (float32, full scan) and the
plan node and buffers of one search (EXPLAIN (ANALYZE, BUFFERS)).

Usage: python bench/vector_index.py [--rows 100000] [--queries 200] [--datadir DIR]
                                    [--variants vector,halfvec,halfvec_64MB,halfvec_efc32,
                                                halfvec_ivfflat,halfvec_ivfflat_p40,halfvec_bq,
                                                halfvec_bq_fast,halfvec_bq_fast_r40]
       python bench/vector_index.py --values-from DSN --variants …   (real value embeddings)
       python bench/vector_index.py --precision 20000   (halfvec's rounding on real embeddings)
Last line: ``RESULT build_s_vector=… build_s_halfvec=… lookup_ms_p50_vector=… ...``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C
from nl2sql_indexer.cluster import LocalCluster

DEFAULT_DATADIR = Path("/var/tmp/nl2sql-vector-bench")
# (name, column type, operator class, ef_construction, maintenance_work_mem)
VARIANTS = [
    ("vector", "vector", "vector_cosine_ops", 64, "1GB"),
    ("halfvec", "halfvec", "halfvec_cosine_ops", 64, "1GB"),
    ("halfvec_64MB", "halfvec", "halfvec_cosine_ops", 64, "64MB"),
    ("halfvec_efc32", "halfvec", "halfvec_cosine_ops", 32, "1GB"),
    ("halfvec_ivfflat", "halfvec", "", 0, "1GB"),
    ("halfvec_ivfflat_p40", "halfvec", "", 0, "1GB"),
    ("halfvec_bq", "halfvec", "", 0, "1GB"),
    ("halfvec_bq_fast", "halfvec", "", 0, "1GB"),
    ("halfvec_bq_fast_r40", "halfvec", "", 0, "1GB"),
]
K = 12
# Other index kinds on halfvec rows (issue 43: where the HNSW build dominates a reindex):
# name -> (the index's USING clause, the search, the session setting of the search). IVFFlat
# with sqrt(rows) lists, 10 probes; an HNSW graph over the sign bits (binary_quantize, Hamming
# distance: 48 bytes a vector instead of 768) whose 10 x K nearest are re-ranked by cosine.
_Q = "%(q)s::vector::halfvec(384)"
OTHER = {
    "halfvec_ivfflat": (
        "ivfflat (embedding halfvec_cosine_ops) WITH (lists = {lists})",
        f"SELECT id FROM bench.cv_{{name}} ORDER BY embedding <=> {_Q} LIMIT {K}",
        "SET ivfflat.probes = 10",
    ),
    "halfvec_ivfflat_p40": (
        "ivfflat (embedding halfvec_cosine_ops) WITH (lists = {lists})",
        f"SELECT id FROM bench.cv_{{name}} ORDER BY embedding <=> {_Q} LIMIT {K}",
        "SET ivfflat.probes = 40",
    ),
    "halfvec_bq": (
        "hnsw ((binary_quantize(embedding)::bit(384)) bit_hamming_ops)",
        f"SELECT id FROM (SELECT id, embedding FROM bench.cv_{{name}} ORDER BY "
        f"binary_quantize(embedding)::bit(384) <~> binary_quantize({_Q}) LIMIT {10 * K}) c "
        f"ORDER BY embedding <=> {_Q} LIMIT {K}",
        "SET hnsw.ef_search = 120",
    ),
    "halfvec_bq_fast": (
        "hnsw ((binary_quantize(embedding)::bit(384)) bit_hamming_ops) "
        "WITH (m = 8, ef_construction = 32)",
        f"SELECT id FROM (SELECT id, embedding FROM bench.cv_{{name}} ORDER BY "
        f"binary_quantize(embedding)::bit(384) <~> binary_quantize({_Q}) LIMIT {10 * K}) c "
        f"ORDER BY embedding <=> {_Q} LIMIT {K}",
        "SET hnsw.ef_search = 120",
    ),
    "halfvec_bq_fast_r40": (
        "hnsw ((binary_quantize(embedding)::bit(384)) bit_hamming_ops) "
        "WITH (m = 8, ef_construction = 32)",
        f"SELECT id FROM (SELECT id, embedding FROM bench.cv_{{name}} ORDER BY "
        f"binary_quantize(embedding)::bit(384) <~> binary_quantize({_Q}) LIMIT {40 * K}) c "
        f"ORDER BY embedding <=> {_Q} LIMIT {K}",
        "SET hnsw.ef_search = 480",
    ),
}


def log(*a) -> None:
    print(*a, flush=True)


def make_rows(conn, rows: int, clusters: int) -> None:
    """bench.item(id, v vector(384)): ``rows`` unit vectors around ``clusters`` centres."""
    have = conn.execute("SELECT to_regclass('bench.item') IS NOT NULL").fetchone()[0]
    if have and conn.execute("SELECT count(*) FROM bench.item").fetchone()[0] == rows:
        return
    t0 = time.perf_counter()
    conn.execute("CREATE SCHEMA IF NOT EXISTS bench")
    conn.execute("DROP TABLE IF EXISTS bench.item, bench.centre")
    conn.execute("SELECT setseed(0.33)")
    conn.execute(
        "CREATE TABLE bench.centre AS SELECT c, array_agg(random() - 0.5 ORDER BY j) AS x "
        f"FROM generate_series(0, {clusters - 1}) c, generate_series(1, 384) j GROUP BY c"
    )
    conn.execute(
        "CREATE TABLE bench.item AS SELECT i AS id, l2_normalize((SELECT array_agg("
        "c.x[j] + 0.6 * (random() - 0.5) ORDER BY j) FROM generate_series(1, 384) j)::vector) "
        f"AS v FROM generate_series(1, {rows}) i JOIN bench.centre c ON c.c = i % {clusters}"
    )
    log(f"made {rows:,} vectors in {time.perf_counter() - t0:.1f} s")


def copy_values(conn, dsn: str) -> int:
    """bench.item from the value index of the database at ``dsn`` (real all-MiniLM-L6-v2
    embeddings of ``bench/scale.py``'s values instead of synthetic vectors); returns the rows."""
    import psycopg

    with psycopg.connect(dsn) as src:
        vecs = [r[0] for r in src.execute("SELECT embedding::vector::text FROM nl2sql.cell_value")]
    conn.execute("CREATE SCHEMA IF NOT EXISTS bench")
    conn.execute("DROP TABLE IF EXISTS bench.item")
    conn.execute("CREATE TABLE bench.item (id int PRIMARY KEY, v vector(384))")
    with conn.cursor().copy("COPY bench.item (id, v) FROM STDIN") as cp:
        for i, v in enumerate(vecs):
            cp.write_row((i, v))
    log(f"copied {len(vecs):,} value embeddings from {dsn}")
    return len(vecs)


def build(conn, name: str, typ: str, ops: str, efc: int, mem: str) -> dict:
    """Table bench.cv_<name> with the rows as ``typ`` and its hnsw index, timed."""
    conn.execute(f"DROP TABLE IF EXISTS bench.cv_{name}")
    conn.execute(
        f"CREATE TABLE bench.cv_{name} AS SELECT id, v::{typ}(384) AS embedding FROM bench.item"
    )
    conn.execute(f"SET maintenance_work_mem = '{mem}'")
    using = f"hnsw (embedding {ops}) WITH (ef_construction = {efc})"
    if name in OTHER:
        n = conn.execute(f"SELECT count(*) FROM bench.cv_{name}").fetchone()[0]
        using = OTHER[name][0].format(lists=max(10, round(n**0.5)))
    t0 = time.perf_counter()
    conn.execute(f"CREATE INDEX cv_{name}_hnsw ON bench.cv_{name} USING {using}")
    secs = time.perf_counter() - t0
    conn.execute("RESET maintenance_work_mem")
    conn.execute(f"VACUUM ANALYZE bench.cv_{name}")
    table_mb, index_mb = conn.execute(
        f"SELECT pg_table_size('bench.cv_{name}') / 1048576.0, "
        f"pg_relation_size('bench.cv_{name}_hnsw') / 1048576.0"
    ).fetchone()
    return {"build_s": secs, "table_mb": float(table_mb), "index_mb": float(index_mb)}


def probes(conn, n: int) -> tuple[list[str], list[set[int]]]:
    """``n`` query vectors (rows moved a little) and their exact K nearest ids (float32)."""
    qs = [
        r[0]
        for r in conn.execute(
            "SELECT l2_normalize((SELECT array_agg(x + 0.2 * (random() - 0.5)) FROM "
            "unnest(v::real[]) x)::vector)::text FROM bench.item ORDER BY id LIMIT %s",
            (n,),
        )
    ]
    conn.execute("SET enable_indexscan = off")
    exact = [
        {
            r[0]
            for r in conn.execute(
                f"SELECT id FROM bench.item ORDER BY v <=> %s::vector LIMIT {K}", (q,)
            )
        }
        for q in qs
    ]
    conn.execute("RESET enable_indexscan")
    return qs, exact


def search(conn, name: str, typ: str, qs: list[str], exact: list[set[int]]) -> dict:
    """p50 ms of the search, recall@K, and the plan of one search."""
    sql = (
        f"SELECT id FROM bench.cv_{name} ORDER BY embedding <=> %(q)s::vector::{typ}(384) LIMIT {K}"
    )
    conn.execute("SET hnsw.ef_search = 40")
    if name in OTHER:
        sql = OTHER[name][1].format(name=name)
        conn.execute(OTHER[name][2])
    for q in qs[:20]:  # warm: the index's pages read once
        conn.execute(sql, {"q": q}, prepare=True).fetchall()
    ms, hits = [], 0
    for q, want in zip(qs, exact):
        t0 = time.perf_counter()
        got = {r[0] for r in conn.execute(sql, {"q": q}, prepare=True)}
        ms.append((time.perf_counter() - t0) * 1000)
        hits += len(got & want)
    plan = [r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, {"q": qs[0]})]
    node = next(line.strip() for line in plan if "Scan" in line)
    bufs = next((line.strip() for line in plan if "Buffers" in line), "")
    return {
        "lookup_ms_p50": statistics.median(ms),
        "recall": hits / (K * len(qs)),
        "plan": f"{node}; {bufs}",
    }


def precision(n_values: int, n_phrases: int = 300) -> str:
    """halfvec's rounding on real value embeddings, no index: the exact ranking of ``n_values``
    generated values (1-3 capitalised vocabulary words, as bench/scale.py makes them) for
    ``n_phrases`` phrases (half with two letters swapped) in float32 and in float16."""
    import random

    import numpy as np

    from nl2sql.embedding.encode import embed
    from scale import vocabulary

    rnd, words = random.Random(33), vocabulary()
    vals = sorted(
        {
            " ".join(rnd.choice(words).title() for _ in range(rnd.randint(1, 3)))
            for _ in range(n_values)
        }
    )
    sought = rnd.sample(vals, n_phrases)
    phrases = []
    for k, v in enumerate(sought):
        i = rnd.randrange(len(v) - 1)
        phrases.append(v[:i] + v[i + 1] + v[i] + v[i + 2 :] if k % 2 else v.lower())

    def cosines(dtype) -> np.ndarray:
        m = [np.array(x, dtype=np.float32).astype(dtype).astype(np.float32) for x in (q, e)]
        a, b = (x / np.linalg.norm(x, axis=1, keepdims=True) for x in m)
        return a @ b.T

    e, q = (embed(x, cache=False, bulk=True) for x in (vals, phrases))
    s32, s16 = cosines(np.float32), cosines(np.float16)
    t32, t16 = (np.argsort(-s, axis=1)[:, :K] for s in (s32, s16))
    at = {v: i for i, v in enumerate(vals)}
    found = [np.mean([at[v] in set(t[j, :10]) for j, v in enumerate(sought)]) for t in (t32, t16)]
    return (
        f"values={len(vals)} phrases={n_phrases} max_cos_change={np.abs(s32 - s16).max():.1e} "
        f"top{K}_overlap={np.mean([len(set(a) & set(b)) / K for a, b in zip(t32, t16)]):.4f} "
        f"recall10_float32={found[0]:.3f} recall10_halfvec={found[1]:.3f} "
        f"pairs_ge_0.8={int((s32 >= 0.8).sum())} differing={int(((s32 >= 0.8) != (s16 >= 0.8)).sum())}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--clusters", type=int, default=2_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--datadir", type=Path, default=DEFAULT_DATADIR)
    ap.add_argument(
        "--variants", default=",".join(v[0] for v in VARIANTS), help="names, comma-separated"
    )
    ap.add_argument(
        "--values-from",
        metavar="DSN",
        help="the rows: the value index's embeddings of that database (e.g. bench/scale.py's)",
    )
    ap.add_argument(
        "--precision", type=int, metavar="N", help="only halfvec's rounding on N real values"
    )
    args = ap.parse_args(argv)
    log(f"machine reference: {C.machine_reference_ms():.0f} ms (10^6 additions)")
    if args.precision:
        log(f"RESULT {precision(args.precision)}")
        return 0
    cluster = LocalCluster(args.datadir)
    cluster.init()
    cluster.start()
    try:
        out = run(cluster, args)
    finally:
        cluster.stop()
    log(f"machine reference: {C.machine_reference_ms():.0f} ms (10^6 additions)")
    log(
        f"RESULT rows={args.rows} "
        + " ".join(
            f"build_s_{n}={f['build_s']:.1f} lookup_ms_p50_{n}={f['lookup_ms_p50']:.2f} "
            f"recall_{n}={f['recall']:.3f}"
            for n, f in out.items()
        )
    )
    return 0


def run(cluster: LocalCluster, args) -> dict:
    """Every variant's figures (printed as they come)."""
    with cluster.connect() as c:
        have = c.execute("SELECT 1 FROM pg_database WHERE datname = 'vector_bench'").fetchone()
    if not have:
        cluster.create_database("vector_bench")
    out = {}
    with cluster.connect("vector_bench") as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        if args.values_from:
            args.rows = copy_values(conn, args.values_from)
        else:
            make_rows(conn, args.rows, args.clusters)
        qs, exact = probes(conn, args.queries)
        for name, typ, ops, efc, mem in VARIANTS:
            if name not in args.variants.split(","):
                continue
            fig = build(conn, name, typ, ops, efc, mem)
            fig.update(search(conn, name, typ, qs, exact))
            out[name] = fig
            log(
                f"{name} ({OTHER[name][0] if name in OTHER else f'ef_construction {efc}'}, "
                f"maintenance_work_mem {mem}): build "
                f"{fig['build_s']:.1f} s, table {fig['table_mb']:.0f} MB, index "
                f"{fig['index_mb']:.0f} MB, lookup p50 {fig['lookup_ms_p50']:.2f} ms, "
                f"recall@{K} {fig['recall']:.3f} | {fig['plan']}"
            )
    return out


if __name__ == "__main__":
    sys.exit(main())
