"""What running the pipeline beside the database costs a question (docs/client.md): the same
questions on the demo database answered in the server (``SELECT nl2sql.explain(q)``) and in
this process over psycopg (``nl2sql.connect(dsn).explain(q)``), the models the scripted loopback
server (no model time: answers are immediate), alternating the two modes question by question.

Prints the median wall time per question of each mode, the pipeline's own time (the trace's
``timings.total_ms``) in each, whether both chose the same SQL every time, and ends with
``RESULT server_ms_p50=… client_ms_p50=… overhead_ms_p50=… same_sql=k/n``. The first round of
each mode (the embedding model loading) is left out.

Run it under ``scripts/dev_locked.sh`` (it uses the bench cluster of bench/common.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "py_udf"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "indexer"))

import common as C
import nl2sql
from nl2sql_indexer.dev.demo_data import demo_sql
from nl2sql_indexer.dev.loopback import LoopbackLLM

DB = "nl2sql_bench_client"
QUESTIONS = {
    "How many singers do we have?": "SELECT count(*) FROM singer",
    "Which singers are from France?": "SELECT name FROM singer WHERE country = 'France'",
    "What is the average age of singers per country?": (
        "SELECT country, avg(age) FROM singer GROUP BY country ORDER BY country"
    ),
    "Which stadium has the largest capacity?": (
        "SELECT name FROM stadium ORDER BY capacity DESC LIMIT 1"
    ),
    "How many concerts were held in each year?": (
        "SELECT year, count(*) FROM concert GROUP BY year ORDER BY year"
    ),
}


def setup(cluster, llm: LoopbackLLM) -> None:
    """The demo tables, the extension, one reindex, two loopback models (two rounds)."""
    cluster.create_database(DB, drop=True)
    with cluster.connect(DB) as conn:
        conn.execute(demo_sql())
        conn.execute("CREATE EXTENSION nl2sql CASCADE")
        conn.execute("SELECT nl2sql.reindex()")
        for i, name in enumerate(("m1", "m2")):
            conn.execute(
                "SELECT nl2sql.add_model(%s, %s, base_url => %s, priority => %s)",
                (name, name, llm.base_url, i),
            )
        # beside the server the log writer is PL/pgSQL without the pipeline's token (issue 32)
        conn.execute(
            "CREATE OR REPLACE FUNCTION nl2sql._log_query(token text, role_name name, "
            "question text, sql text, confidence float8, error text, trace jsonb, "
            "conversation text DEFAULT NULL) RETURNS bigint LANGUAGE sql SECURITY DEFINER "
            "SET search_path = pg_catalog, pg_temp AS $$ INSERT INTO nl2sql.query_log "
            "(role_name, question, sql, confidence, error, trace, conversation) VALUES "
            "(nl2sql._acting_role(role_name), question, sql, confidence, error, trace, "
            "conversation) RETURNING id $$"
        )


def one_round(server, client, llm: LoopbackLLM, out: dict[str, list]) -> None:
    """Every question once in each mode (server first, then the client)."""
    for q, sql in QUESTIONS.items():
        llm.set_default(sql)
        t0 = time.perf_counter()
        s = server.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]
        t1 = time.perf_counter()
        c = client.explain(q)
        t2 = time.perf_counter()
        out["server_ms"].append((t1 - t0) * 1000)
        out["client_ms"].append((t2 - t1) * 1000)
        out["server_pipeline_ms"].append(s["timings"]["total_ms"])
        out["client_pipeline_ms"].append(c["timings"]["total_ms"])
        out["same"].append(s["sql"] == c["sql"] and s["sql"] is not None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="passes over the questions (+1 warm-up)")
    ap.add_argument("--datadir", type=Path, default=None)
    args = ap.parse_args()
    cluster = C.start_cluster(args.datadir)
    llm = LoopbackLLM().start()
    try:
        setup(cluster, llm)
        with cluster.connect(DB) as server, nl2sql.connect(cluster.dsn(DB)) as client:
            one_round(server, client, llm, {k: [] for k in _KEYS})  # warm-up: models load
            out: dict[str, list] = {k: [] for k in _KEYS}
            for _ in range(args.rounds):
                one_round(server, client, llm, out)
    finally:
        llm.stop()
    med = {k: statistics.median(v) for k, v in out.items() if k != "same"}
    n, same = len(out["same"]), sum(out["same"])
    print(
        f"{n} questions per mode: server p50 {med['server_ms']:.1f} ms (pipeline "
        f"{med['server_pipeline_ms']:.1f} ms), client p50 {med['client_ms']:.1f} ms (pipeline "
        f"{med['client_pipeline_ms']:.1f} ms); same SQL {same}/{n}"
    )
    print(
        f"RESULT server_ms_p50={med['server_ms']:.1f} client_ms_p50={med['client_ms']:.1f} "
        f"overhead_ms_p50={med['client_ms'] - med['server_ms']:.1f} same_sql={same}/{n}"
    )


_KEYS = ("server_ms", "client_ms", "server_pipeline_ms", "client_pipeline_ms", "same")

if __name__ == "__main__":
    main()
