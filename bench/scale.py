#!/usr/bin/env python3
"""Indexing and value lookups at scale: 1,000 tables plus a 10-million-row table, about
1,000,000 distinct string cell values in the value index.

The database is built once and kept (database ``nl2sql_scale`` — ``nl2sql_scale_<scale>`` for
``--scale`` below 1 — in the cluster of ``--datadir``, default ``/var/tmp/nl2sql-scale-cluster``);
a later run reuses it and rebuilds only what is missing. Its data is generated in SQL from the
whole words of all-MiniLM-L6-v2's vocabulary (so values tokenize like real names: 2-4 words):

* ``t0001`` ... ``t1000``: 600 rows each; ``name`` (3 words, distinct everywhere), ``city``
  (150 of a pool of 5,000 two-word names shared by all tables), ``category`` (12 values shared
  by all tables), an integer ``code``: 762 values per table, 762,000 in all (605,000 distinct
  strings).
* ``events``: 10,000,000 rows with 5 string columns: ``status`` (5 values), ``country`` (200),
  ``city`` (20,000), ``customer`` (2,000,000 three-word names) and ``description`` (four words,
  nearly all distinct). The last two have more distinct values than ``values_per_column``
  (100,000): they are read from a block sample and marked partial; the others in full.

Steps and figures:

1. full reindex (``--full``, or when the index is empty) through the ``nl2sql-index`` CLI's fast
   path: seconds and **values indexed/s** (new strings embedded per second of the whole reindex:
   reading, embedding, writing, index maintenance); the per-run figure is stored in the
   database (``bench_scale.result``) and shown again by later runs;
2. **no-op reindex** (``nl2sql.reindex()`` with nothing changed; median of 3);
3. reindex after changing one small table (one row inserted);
4. **value lookup** at the index's size: ``nl2sql.retrieve(question)``'s ``values_ms`` (exact,
   trigram and vector lookups through the SECURITY DEFINER ``nl2sql._match_values``) for 40
   questions built from indexed values (half of them misspelt); p50 and p90, in steady state
   (after 40 other such questions, which read the index's common pages) before the reindex of
   ``events``, and for those 40 other questions right after it (it rewrites 220,000 rows of
   the value index, and autovacuum follows);
5. reindex after changing ``events`` (one row inserted: the 10-million-row table is read again,
   sampled).

Usage: python bench/scale.py [--scale 1.0] [--full] [--jobs N] [--datadir DIR]
                             [--questions 40] [--shared-buffers 4GB] [--precision fp32|int8]
                             [--value-embedding model|static] [--embedding-model local|loopback]
The full run (scale 1) builds ~1.5 GB of data (a few minutes) and embeds ~800,000 strings: at
~1,000 values/s, a full reindex takes about a quarter of an hour on a 2-core machine.
``--scale 0.05`` (50 tables, 500,000 rows, ~50,000 values) takes about a minute; ``--scale
0.0001`` (1 table, 1,000 rows, ~600 values) seconds: the test suite's smoke run
(tests/db/test_bench_smoke.py), whose figures mean nothing.
``--embedding-model loopback`` embeds through an embedding endpoint instead of in the backends:
the loopback server's ``/v1/embeddings`` in this process (vectors NOT a model's: hashed trigrams
and words, ~2,400 values/s of this machine's Python, docs/benchmarks.md "Embedding
endpoint: the client's cost"), added with ``nl2sql.add_embedding_model`` and made the setting ``embedding_model``
for the run: the figure is the reindex's own cost with the model's work moved off the backends,
on the same cores here (a real endpoint's speed is its model's and machine's).
Last line: ``RESULT values_per_s=… full_reindex_s=… noop_reindex_s=… lookup_ms_p50=… …
machine_reference_ms=<start>/<end>`` (``bench.common.machine_reference_ms``: this shared
machine's speed during the run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from psycopg import sql

import common as C
from nl2sql_indexer.cli import index_database
from nl2sql_indexer.cluster import LocalCluster

DEFAULT_DATADIR = Path("/var/tmp/nl2sql-scale-cluster")
LOOPBACK_MODEL = "bench_loopback"  # the nl2sql.embedding_model row of --embedding-model loopback
TABLES, TABLE_ROWS, EVENT_ROWS = 1000, 600, 10_000_000


def log(*a) -> None:
    print(*a, flush=True)


def vocabulary() -> list[str]:
    """Whole lower-case words (4+ letters) of the embedding model's WordPiece vocabulary."""
    from tokenizers import Tokenizer

    from nl2sql.embedding.encode import model_dir

    vocab = Tokenizer.from_file(str(model_dir() / "tokenizer.json")).get_vocab()
    return sorted(w for w in vocab if w.isalpha() and w.isascii() and w.islower() and len(w) >= 4)


def build(conn, scale: float) -> None:
    """Create what is missing of the bench data (each part in its own transaction)."""
    n_tables = max(1, round(TABLES * scale))
    n_events = max(1_000, round(EVENT_ROWS * scale))
    conn.execute("CREATE SCHEMA IF NOT EXISTS bench_scale")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS bench_scale.result (at timestamptz DEFAULT now(), "
        "figures jsonb)"
    )
    if not conn.execute("SELECT to_regclass('bench_scale.words')").fetchone()[0]:
        words = vocabulary()
        conn.execute("CREATE TABLE bench_scale.words (i int PRIMARY KEY, w text)")
        conn.execute(
            "INSERT INTO bench_scale.words SELECT i - 1, initcap(w) FROM "
            "unnest(%s::text[]) WITH ORDINALITY AS u(w, i)",
            (words,),
        )
    if not conn.execute("SELECT to_regclass('bench_scale.cities')").fetchone()[0]:
        conn.execute(
            "CREATE TABLE bench_scale.cities AS SELECT g.i, a.w || ' ' || b.w AS name "
            "FROM generate_series(0, 19999) g(i) JOIN bench_scale.words a ON a.i = "
            "abs(hashint4(g.i)) % (SELECT count(*) FROM bench_scale.words) "
            "JOIN bench_scale.words b ON b.i = abs(hashint4(g.i + 7777777)) % "
            "(SELECT count(*) FROM bench_scale.words)"
        )
        conn.execute("ALTER TABLE bench_scale.cities ADD PRIMARY KEY (i)")
    n_words = conn.execute("SELECT count(*) FROM bench_scale.words").fetchone()[0]
    have = {
        r[0]
        for r in conn.execute(
            "SELECT relname FROM pg_class c JOIN pg_namespace n ON "
            "n.oid = c.relnamespace WHERE n.nspname = 'public'"
        )
    }
    t0, made = time.perf_counter(), 0
    for k in range(1, n_tables + 1):
        name = f"t{k:04d}"
        if name in have:
            continue
        conn.execute(f"""
            CREATE TABLE public.{name} (id int PRIMARY KEY, name text, city text, category text,
                                        code int);
            INSERT INTO public.{name}
            SELECT g.i, a.w || ' ' || b.w || ' ' || c.w, ci.name, 'Category ' || d.w, g.i * 7
              FROM generate_series(1, {TABLE_ROWS}) g(i)
              JOIN bench_scale.words a ON a.i = abs(hashint4(g.i * 1000 + {k})) % {n_words}
              JOIN bench_scale.words b ON b.i = abs(hashint4(g.i * 1000 + {k} + 1000000000)) % {n_words}
              JOIN bench_scale.words c ON c.i = abs(hashint4(g.i * 1000 + {k} + 2000000000)) % {n_words}
              JOIN bench_scale.cities ci ON ci.i = ({k} * 150 + abs(hashint4(g.i + {k} * 7)) % 150) % 5000
              JOIN bench_scale.words d ON d.i = g.i % 12 * 101;
            COMMENT ON TABLE public.{name} IS 'generated table {k} of bench/scale.py';
        """)
        made += 1
    if made:
        log(f"built {made} tables of {TABLE_ROWS} rows in {time.perf_counter() - t0:.1f} s")
    if "events" not in have:
        t0 = time.perf_counter()
        conn.execute(f"""
            CREATE TABLE public.events (id bigint, status text, country text, city text,
                                        customer text, description text, amount numeric);
            INSERT INTO public.events
            SELECT g, (ARRAY['open','closed','pending','cancelled','refunded'])[1 + g % 5],
                   co.w, ci.name, a.w || ' ' || b.w || ' ' || c.w,
                   d1.w || ' ' || d2.w || ' ' || d3.w || ' ' || d4.w, (g % 1000) / 10.0
              FROM generate_series(1, {n_events}) g
              JOIN bench_scale.words co ON co.i = abs(hashint4(g)) % 200 * 37
              JOIN bench_scale.cities ci ON ci.i = abs(hashint4(g + 11)) % 20000
              JOIN bench_scale.words a ON a.i = abs(hashint4(abs(hashint4(g + 3)) % 2000000)) % {n_words}
              JOIN bench_scale.words b ON b.i = abs(hashint4(abs(hashint4(g + 3)) % 2000000 + 5)) % {n_words}
              JOIN bench_scale.words c ON c.i = abs(hashint4(abs(hashint4(g + 3)) % 2000000 + 9)) % {n_words}
              JOIN bench_scale.words d1 ON d1.i = abs(hashint4(g + 21)) % {n_words}
              JOIN bench_scale.words d2 ON d2.i = abs(hashint4(g + 22)) % {n_words}
              JOIN bench_scale.words d3 ON d3.i = abs(hashint4(g + 23)) % {n_words}
              JOIN bench_scale.words d4 ON d4.i = abs(hashint4(g + 24)) % {n_words};
            ANALYZE public.events;
        """)
        log(f"built events ({n_events:,} rows) in {time.perf_counter() - t0:.1f} s")
        made += 1
    if made:
        conn.execute("VACUUM ANALYZE")


def ensure_extension(conn, db: str, scale: float) -> None:
    """The extension, its settings (the value budgets scaled with ``--scale``, so a smaller run
    keeps the full run's proportions), and memory for building the HNSW index in one go."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
    conn.execute("ALTER EXTENSION nl2sql UPDATE")
    conn.execute("SELECT nl2sql.set_setting('schemas', 'public')")
    if scale < 1:
        conn.execute(
            "SELECT nl2sql.set_setting('values_per_column', %s)",
            (str(max(100, round(100_000 * scale))),),
        )
        conn.execute(
            "SELECT nl2sql.set_setting('value_sample_rows', %s)",
            (str(max(1000, round(1_000_000 * scale))),),
        )
    conn.execute(f"ALTER DATABASE \"{db}\" SET maintenance_work_mem = '2GB'")


def use_embedding_model(conn, which: str, stack: contextlib.ExitStack) -> None:
    """Make ``which`` (``local`` or ``loopback``) the setting ``embedding_model``; for
    ``loopback`` start the loopback server (kept by ``stack``) and add its endpoint."""
    if which == "loopback":
        # the dev package is loaded only for this option (the bench needs no server otherwise)
        from nl2sql_indexer.dev import _loopback_embed
        from nl2sql_indexer.dev.loopback import LoopbackLLM

        llm = stack.enter_context(LoopbackLLM())
        _loopback_embed.set_embedding(llm, "bench-loopback", 384, "openai")
        conn.execute(
            "SELECT nl2sql.add_embedding_model(%s, %s, 'bench-loopback', 384, "
            "batch_size => 256, concurrency => 2, timeout_s => 120)",
            (LOOPBACK_MODEL, llm.base_url),
        )
    name = LOOPBACK_MODEL if which == "loopback" else "local"
    conn.execute("SELECT nl2sql.set_setting('embedding_model', %s)", (name,))
    log(f"embedding model: {name}")


def model_words(which: str, precision: str) -> str:
    """What embedded the run, for the log line."""
    if which == "loopback":
        return "the loopback endpoint (not a model's vectors)"
    return f"{precision} all-MiniLM-L6-v2 in the backends"


def index_size(conn) -> tuple[int, int]:
    return conn.execute(
        "SELECT (SELECT count(*) FROM nl2sql.cell_value), "
        "(SELECT count(*) FROM nl2sql.schema_table)"
    ).fetchone()


def full_reindex(cluster: LocalCluster, conn, db: str, jobs: int = 1) -> dict:
    """Empty the index and rebuild it with the nl2sql-index CLI (progress bar on stderr), with
    ``jobs`` worker processes (``--jobs``)."""
    conn.execute(
        "TRUNCATE nl2sql.cell_value, nl2sql.schema_column, nl2sql.schema_fk, nl2sql.schema_table"
    )
    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    out = index_database(cluster.dsn(db), None, True, progress=True, jobs=jobs)
    secs = time.perf_counter() - t0
    fig = {
        "full_reindex_s": round(secs, 1),
        "values": out["values"],
        "values_embedded": out["values_embedded"],
        "values_reused": out["values_reused"],
        "values_per_s": round(out["values_embedded"] / secs, 1),
        "rows_per_s": round(out["values"] / secs, 1),
        "tables": out["tables_indexed"],
        "columns_partial": out["columns_partial"],
        "embed_s": round(out["embed_seconds"], 1),
        "tables_s": out["tables_s"],
        "finish_s": out["finish_s"],
        "jobs": jobs,
        "cores": len(os.sched_getaffinity(0)),
        "load_start": round(load0, 2),
        "load_end": round(os.getloadavg()[0], 2),
    }
    conn.execute("INSERT INTO bench_scale.result (figures) VALUES (%s)", (json.dumps(fig),))
    return fig


def embedding_ceiling(conn, n: int = 4096) -> float:
    """Strings/s of the bulk encoder alone, in this process, now: what the machine gives the
    embedding model at this moment (the figure the whole reindex can at most reach)."""

    from nl2sql.embedding.encode import embed

    texts = [
        r[0]
        for r in conn.execute(
            "SELECT a.w || ' ' || b.w || ' ' || c.w FROM generate_series(1, %s) g(i) "
            "JOIN bench_scale.words a ON a.i = g.i * 7 %% 20000 JOIN bench_scale.words b "
            "ON b.i = g.i * 13 %% 20000 JOIN bench_scale.words c ON c.i = g.i * 31 %% 20000",
            (n,),
        )
    ]
    embed(texts[:64], cache=False, bulk=True)
    t0 = time.perf_counter()
    embed(texts, cache=False, bulk=True)
    rate = len(texts) / (time.perf_counter() - t0)
    log(
        f"embedding alone (this process, {len(os.sched_getaffinity(0))} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}): {rate:.0f} strings/s"
    )
    return rate


def timed_reindex(conn) -> tuple[float, dict]:
    t0 = time.perf_counter()
    r = conn.execute("SELECT nl2sql.reindex()").fetchone()[0]
    return time.perf_counter() - t0, r


def questions(conn, n: int) -> list[str]:
    """Questions naming indexed values (of small tables and of events), half misspelt.

    The values are chosen by a hash of their text, so the same index gives the same questions
    whatever the physical order of its rows (a reindex rewrites them)."""
    rnd = random.Random(7)
    vals = [
        r[0]
        for r in conn.execute(
            "SELECT value FROM nl2sql.cell_value WHERE column_name IN ('name', 'city', 'customer') "
            "ORDER BY md5(value), value LIMIT 2000"
        )
    ]
    rnd.shuffle(vals)
    forms = [
        "How many orders did {} place?",
        "Which events are in {}?",
        "Show everything we know about {}.",
        "What is the category of {}?",
    ]
    out = []
    for i, v in enumerate(vals[:n]):
        if i % 2 and len(v) > 6:
            j = rnd.randrange(1, len(v) - 1)
            v = v[:j] + v[j + 1 :]  # one character dropped
        out.append(forms[i % len(forms)].format(v))
    return out


def lookups(conn, qs: list[str]) -> list[float]:
    conn.execute("SELECT nl2sql.retrieve('warm up')")
    ms = []
    for q in qs:
        r = conn.execute("SELECT nl2sql.retrieve(%s)", (q,)).fetchone()[0]
        ms.append(float(r["timings"]["values_ms"]))
    return ms


def set_shared_buffers(cluster: LocalCluster, size: str) -> None:
    """The cluster's shared_buffers (ALTER SYSTEM), restarting it when that changes it."""
    with cluster.connect() as c:
        before = c.execute(
            "SELECT setting FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()[0]
        c.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(size)))
        c.execute("SELECT pg_reload_conf()")
        pending = c.execute(
            "SELECT setting <> %s OR pending_restart FROM pg_settings "
            "WHERE name = 'shared_buffers'",
            (before,),
        ).fetchone()[0]
    if pending:
        cluster.stop()
        cluster.start()
    with cluster.connect() as c:
        log(f"shared_buffers {c.execute('SHOW shared_buffers').fetchone()[0]}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scale", type=float, default=1.0, help="fraction of the full size")
    ap.add_argument("--full", action="store_true", help="empty the index and reindex fully")
    ap.add_argument("--datadir", type=Path, default=DEFAULT_DATADIR)
    ap.add_argument(
        "--precision",
        choices=("fp32", "int8"),
        help="setting embedding_precision for this run (with --full: the whole index re-embedded)",
    )
    ap.add_argument(
        "--value-embedding",
        choices=("model", "static"),
        help="setting value_embedding for this run (with --full: the values re-embedded)",
    )
    ap.add_argument(
        "--embedding-model",
        choices=("local", "loopback"),
        default="local",
        help="setting embedding_model for this run: the in-process model, or the loopback "
        "server's endpoint (vectors not a model's; with --full: everything re-embedded)",
    )
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument(
        "--jobs", type=int, default=1, help="worker processes of the full reindex (--jobs N)"
    )
    ap.add_argument(
        "--venv",
        default=None,
        help="venv the cluster's PL/Python imports nl2sql from (set at its initdb)",
    )
    ap.add_argument(
        "--shared-buffers",
        default="4GB",
        help="the cluster's shared_buffers (default 4GB, about a quarter of this "
        "machine's memory as on a production server, which holds the value "
        "index; PostgreSQL's own default is 128MB)",
    )
    ap.add_argument(
        "--until",
        choices=("data", "extension", "all"),
        default="all",
        help="stop after building the data, or after creating the extension (a "
        "developer machine with several checkouts runs the extension step "
        "under scripts/dev_locked.sh)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with contextlib.ExitStack() as stack:  # the loopback server, when --embedding-model asks
        return run(args, stack)


def run(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    ref0 = C.machine_reference_ms()
    log(f"machine speed reference: {ref0:.0f} ms for 10^6 Python additions (bench.common)")
    db = "nl2sql_scale" if args.scale >= 1 else f"nl2sql_scale_{str(args.scale).replace('.', '_')}"
    cluster = LocalCluster(args.datadir, **({"venv": args.venv} if args.venv else {})).start()
    set_shared_buffers(cluster, args.shared_buffers)
    with cluster.connect() as c:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
            cluster.create_database(db)
    conn = cluster.connect(db)
    t0 = time.perf_counter()
    build(conn, args.scale)
    log(f"data ready in {time.perf_counter() - t0:.1f} s (database {db}, cluster {args.datadir})")
    if args.until == "data":
        return 0
    ensure_extension(conn, db, args.scale)
    if args.precision:  # the embedding model file; the ceiling below embeds with it too
        conn.execute("SELECT nl2sql.set_setting('embedding_precision', %s)", (args.precision,))
        os.environ["NL2SQL_EMBEDDING_PRECISION"] = args.precision
    if args.value_embedding:
        conn.execute("SELECT nl2sql.set_setting('value_embedding', %s)", (args.value_embedding,))
    use_embedding_model(conn, args.embedding_model, stack)
    if args.until == "extension":
        return 0
    precision = conn.execute(
        "SELECT COALESCE((SELECT value FROM nl2sql.setting WHERE key = 'embedding_precision'), "
        "'fp32')"
    ).fetchone()[0]
    values_by = conn.execute(
        "SELECT COALESCE((SELECT value FROM nl2sql.settings WHERE name = 'value_embedding'), "
        "'model')"
    ).fetchone()[0]
    n_values, n_tables = index_size(conn)
    ceiling = embedding_ceiling(conn, 4096 if args.scale >= 0.01 else 256)
    if args.full or n_values == 0:
        fig = full_reindex(cluster, conn, db, args.jobs)
        log(
            f"full reindex: {fig['tables']} tables, {fig['values']:,} values "
            f"({fig['values_embedded']:,} strings embedded, {fig['values_reused']:,} reused), "
            f"{fig['columns_partial']} columns partial, {fig['full_reindex_s']} s: "
            f"{fig['values_per_s']} values embedded/s, {fig['rows_per_s']} index rows/s; "
            f"of the time, embedding {fig.get('embed_s')} s (summed over workers), tables "
            f"written at {fig['tables_s']} s, then the HNSW build and ANALYZE "
            f"{fig['finish_s']} s; {fig['jobs']} jobs, {fig['cores']} cores, model "
            f"{model_words(args.embedding_model, precision)}, values by {values_by}, load average {fig['load_start']} -> {fig['load_end']}"
        )
    else:
        at, fig = conn.execute(
            "SELECT at, figures FROM bench_scale.result ORDER BY at DESC LIMIT 1"
        ).fetchone() or (None, {})
        log(
            f"index present ({n_values:,} values); full reindex figures of {at}: {fig} "
            f"(--full measures again)"
        )
    conn.close()
    conn = cluster.connect(db)  # a new session: the database's maintenance_work_mem
    n_values, n_tables = index_size(conn)
    conn.execute("SELECT nl2sql.reindex()")  # settle: statistics published since
    time.sleep(1.1)
    noop = []
    for _ in range(3):
        s, r = timed_reindex(conn)
        assert r["tables_indexed"] == 0, r
        noop.append(s)
    log(
        f"no-op reindex of {n_tables} tables: median {statistics.median(noop):.3f} s "
        f"({', '.join(f'{x:.3f}' for x in noop)})"
    )
    conn.execute(
        "INSERT INTO public.t0001 (id, name, city, category, code) VALUES "
        "((SELECT max(id) + 1 FROM public.t0001), 'Bench Changed Row ' || now(), "
        "'Bench City', 'Category Bench', 0)"
    )
    s, r = timed_reindex(conn)
    log(
        f"reindex after changing one small table: {s:.3f} s (tables indexed {r['tables_indexed']}, "
        f"values embedded {r['values_embedded']})"
    )
    qs = questions(conn, 2 * args.questions)
    lookups(conn, qs[args.questions :])  # other questions first: the index's common pages
    ms = lookups(conn, qs[: args.questions])
    p50, p90 = C.percentile(ms, 50), C.percentile(ms, 90)
    log(
        f"value lookup over {n_values:,} values, {len(ms)} questions: p50 {p50:.1f} ms, "
        f"p90 {p90:.1f} ms (retrieve()'s values_ms: exact, trigram, vector; after "
        f"{len(qs) - len(ms)} other questions)"
    )
    conn.execute(
        "INSERT INTO public.events (id, status, country, city, customer, description) "
        "VALUES (0, 'open', 'Nowhere', 'Bench City', 'Bench Customer', 'bench row')"
    )
    s_big, r = timed_reindex(conn)
    rows = conn.execute(
        "SELECT reltuples::bigint FROM pg_class WHERE oid = 'public.events'::regclass"
    ).fetchone()[0]
    log(
        f"reindex after changing events ({rows:,} rows, 5 string columns): {s_big:.1f} s "
        f"(tables indexed {r['tables_indexed']}, values {r['values']:,}, embedded "
        f"{r['values_embedded']:,}, columns partial {r['columns_partial']})"
    )
    after = lookups(conn, qs[args.questions :])
    log(
        f"value lookup right after that reindex, the {len(after)} other questions: p50 "
        f"{C.percentile(after, 50):.1f} ms, p90 {C.percentile(after, 90):.1f} ms"
    )
    conn.close()
    ref1 = C.machine_reference_ms()
    log(f"machine speed reference at the end: {ref1:.0f} ms")
    log(
        f"RESULT values_per_s={fig.get('values_per_s')} full_reindex_s={fig.get('full_reindex_s')} "
        f"noop_reindex_s={statistics.median(noop):.3f} change_one_table_s={s:.3f} "
        f"events_reindex_s={s_big:.1f} lookup_ms_p50={p50:.1f} "
        f"lookup_after_reindex_ms_p50={C.percentile(after, 50):.1f} values={n_values} "
        f"embed_only_per_s={ceiling:.0f} value_embedding={values_by} embedding_model={args.embedding_model} jobs={fig.get('jobs')} tables_s={fig.get('tables_s')} "
        f"finish_s={fig.get('finish_s')} cores={len(os.sched_getaffinity(0))} "
        f"load={os.getloadavg()[0]:.2f} machine_reference_ms={ref0:.0f}/{ref1:.0f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
