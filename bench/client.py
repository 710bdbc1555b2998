"""What running the pipeline beside the database costs a question (docs/client.md): the same
questions on the demo database answered in the server (``SELECT nl2sql.explain(q)``) and in
this process over psycopg (``nl2sql.connect(dsn, in_process=True).explain(q)``), the models the
scripted loopback server (no model time: answers are immediate), alternating the two modes
question by question.

Prints the median wall time per question of each mode, the pipeline's own time (the trace's
``timings.total_ms``) in each, whether both chose the same SQL every time, and ends with
``RESULT server_ms_p50=… client_ms_p50=… overhead_ms_p50=… same_sql=k/n``. The first round of
each mode (the embedding model loading) is left out.

With ``--data DIR --db superhero`` the questions are a BIRD mini-dev database's instead, its
models the recorded predictions bench/replay.py replays (the same loopback replay, evidence
given): both modes' SQL is scored against the gold (execution accuracy, bench/common.py), and the
RESULT line adds ``ex_server=… ex_client=…``.

Run it under ``scripts/dev_locked.sh`` (it uses the bench cluster of bench/common.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "py_udf"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "indexer"))

import common as C
import nl2sql
import replay as R
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
        beside_log_writer(conn)


def beside_log_writer(conn) -> None:
    """Beside the server the log writer is PL/pgSQL without the pipeline's token (issue 32)."""
    conn.execute(
        "CREATE OR REPLACE FUNCTION nl2sql._log_query(token text, role_name name, "
        "question text, sql text, confidence float8, error text, trace jsonb, "
        "conversation text DEFAULT NULL) RETURNS bigint LANGUAGE sql SECURITY DEFINER "
        "SET search_path = pg_catalog, pg_temp AS $$ INSERT INTO nl2sql.query_log "
        "(role_name, question, sql, confidence, error, trace, conversation) VALUES "
        "(nl2sql._acting_role(role_name), question, sql, confidence, error, trace, "
        "conversation) RETURNING id $$"
    )


def setup_replay(cluster, llm: LoopbackLLM, data: Path, db: str, limit: int | None):
    """A BIRD mini-dev database loaded and indexed, its recorded predictions on the loopback.

    Returns:
        (its questions, the search_path of its schemas).
    """
    rows = R.load_questions(data / f"bird_minidev_{db}.jsonl", limit)
    C.load_dump(cluster, db, data / "pg_dumps" / f"{db}.sql")
    with cluster.connect(db) as conn:
        schemas = list(C.user_schemas(conn))
        C.ensure_reader_role(conn, schemas)  # the scoring runs the SQL as a SELECT-only role
        conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
        conn.execute("SELECT nl2sql.set_setting('schemas', %s)", (",".join(schemas),))
        conn.execute("SELECT nl2sql.reindex()")
        conn.execute("DELETE FROM nl2sql.model")
        for m in R.model_list(rows, "pg", None):
            llm.set_replay(m["name"], {r["question"]: R.prediction(r, m) or "" for r in rows})
            conn.execute(
                "SELECT nl2sql.add_model(%s, %s, base_url => %s)",
                (m["name"], m["name"], llm.base_url),
            )
        beside_log_writer(conn)
        names = [psycopg.sql.Identifier(n).as_string(conn) for n in schemas]
    return rows, ", ".join(names + ([] if "public" in schemas else ["public"]))


def replay_round(server, client, score_conn, rows, search_path: str, out: dict) -> None:
    """Every question once in each mode, both answers scored against the gold."""
    cache: dict = {}
    for r in rows:
        q, ev = r["question"], r.get("evidence") or None
        t0 = time.perf_counter()
        s = server.execute(
            "SELECT nl2sql.explain(%s, %s, search_path => %s)", (q, ev, search_path)
        ).fetchone()[0]
        t1 = time.perf_counter()
        c = client.explain(q, ev, search_path=search_path)
        t2 = time.perf_counter()
        ordered = C.gold_is_ordered(r["gold_sql"])
        keys = []
        for key, trace in (("server_ex", s), ("client_ex", c)):
            got = C.score(score_conn, r["gold_sql"], trace["sql"], ordered=ordered, cache=cache)
            out[key].append(bool(got.match))
            keys.append(C.result_key(got.pred.rows, ordered) if got.pred and got.pred.ok else None)
        out["same_result"].append(keys[0] == keys[1])
        if s["sql"] != c["sql"]:
            out["why"].append(
                (q, (s.get("vote") or {}).get("reason"), (c.get("vote") or {}).get("reason"))
            )
        out["server_ms"].append((t1 - t0) * 1000)
        out["client_ms"].append((t2 - t1) * 1000)
        out["server_pipeline_ms"].append(s["timings"]["total_ms"])
        out["client_pipeline_ms"].append(c["timings"]["total_ms"])
        out["same"].append(s["sql"] == c["sql"])


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
    ap.add_argument("--data", type=Path, default=None, help="bench-data folder (replay mode)")
    ap.add_argument("--db", default="superhero", help="the BIRD mini-dev database (replay mode)")
    ap.add_argument("--limit", type=int, default=None, help="first N questions (replay mode)")
    ap.add_argument("--datadir", type=Path, default=None)
    args = ap.parse_args()
    cluster = C.start_cluster(args.datadir)
    llm = LoopbackLLM().start()
    try:
        out = run_replay(cluster, llm, args) if args.data else run_demo(cluster, llm, args)
    finally:
        llm.stop()
    report(out)


def run_demo(cluster, llm: LoopbackLLM, args) -> dict[str, list]:
    """The demo's questions, ``args.rounds`` passes after a warm-up."""
    setup(cluster, llm)
    with cluster.connect(DB) as server, nl2sql.connect(cluster.dsn(DB), in_process=True) as client:
        one_round(server, client, llm, {k: [] for k in _KEYS})  # warm-up: models load
        out: dict[str, list] = {k: [] for k in _KEYS}
        for _ in range(args.rounds):
            one_round(server, client, llm, out)
    return out


def run_replay(cluster, llm: LoopbackLLM, args) -> dict[str, list]:
    """A BIRD mini-dev database's questions, one pass (the first question's embedding-model
    load counts in both modes' first call)."""
    rows, search_path = setup_replay(cluster, llm, args.data, args.db, args.limit)
    out: dict[str, list] = {k: [] for k in (*_KEYS, "server_ex", "client_ex", "same_result", "why")}
    with (
        cluster.connect(args.db) as server,
        cluster.connect(args.db) as score_conn,
        nl2sql.connect(cluster.dsn(args.db), in_process=True) as client,
    ):
        score_conn.execute("SELECT pg_catalog.set_config('search_path', %s, false)", (search_path,))
        replay_round(server, client, score_conn, rows, search_path, out)
    return out


def report(out: dict[str, list]) -> None:
    """The medians, the same-SQL count and, in replay mode, each mode's EX; the RESULT line."""
    med = {k: statistics.median(v) for k, v in out.items() if k.endswith("_ms")}
    n, same = len(out["same"]), sum(out["same"])
    print(
        f"{n} questions per mode: server p50 {med['server_ms']:.1f} ms (pipeline "
        f"{med['server_pipeline_ms']:.1f} ms), client p50 {med['client_ms']:.1f} ms (pipeline "
        f"{med['client_pipeline_ms']:.1f} ms); same SQL {same}/{n}"
    )
    ex = ""
    if "server_ex" in out:
        ex = " " + " ".join(f"ex_{m}={sum(out[m + '_ex']) / n:.3f}" for m in ("server", "client"))
        ex += f" same_result={sum(out['same_result'])}/{n}"
        for q, s_why, c_why in out["why"][:3]:
            print(f"different SQL for {q!r}: server vote {s_why!r}; client vote {c_why!r}")
    print(
        f"RESULT server_ms_p50={med['server_ms']:.1f} client_ms_p50={med['client_ms']:.1f} "
        f"overhead_ms_p50={med['client_ms'] - med['server_ms']:.1f} same_sql={same}/{n}{ex}"
    )


_KEYS = ("server_ms", "client_ms", "server_pipeline_ms", "client_pipeline_ms", "same")

if __name__ == "__main__":
    main()
