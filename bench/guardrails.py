#!/usr/bin/env python3
"""Guardrails benchmark (docs/guardrails.md): what the plan-cost limit's defaults refuse, and
what a question costs in tokens and dollars.

``plans``: the planner's estimate (``EXPLAIN (FORMAT JSON)``: total cost, rows) of every gold
query and every recorded model prediction (cleaned as the pipeline cleans it) of the replay's
question files, and how many the settings ``max_plan_cost`` / ``max_plan_rows`` (their defaults,
or ``--max-plan-cost``/``--max-plan-rows``) would refuse; then a cross join of three
200,000-row tables asked through ``nl2sql.explain`` with a scripted model, refused before it
runs (the candidate's ``exec_ms``: the EXPLAIN's time).

``cost``: ``nl2sql.explain`` on every question with the replay's recorded answers (loopback
server, REAL MODELS' RECORDED OUTPUTS; it reports ``usage`` in cl100k_base tokens as a real
endpoint does) under the recommended settings, every model priced at ``--price-in`` /
``--price-out`` US dollars per million tokens; then the same question through one single call
(the PreSQL prompt alone, DAIL-SQL style: schema, examples, question) for the ratio. A question
answered by a verified query costs 0 (tests/db/test_guardrails.py).

Usage:
    python bench/guardrails.py plans --data DIR [--db NAME|all]
    python bench/guardrails.py cost --data DIR --db superhero [--price-in 2.5 --price-out 10]

The last line printed is ``RESULT ...``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C
import replay as R
from nl2sql.core.settings import default_settings
from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule


def log(*a) -> None:
    print(*a, flush=True)


def _explain(conn, sql: str) -> tuple[float, float] | None:
    """(total cost, rows) of ``sql``'s plan, or None when it does not plan."""
    try:
        with conn.transaction():
            conn.execute("SET LOCAL transaction_read_only = on")
            plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql).fetchone()[0]
        root = (plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"]
        return float(root["Total Cost"]), float(root["Plan Rows"])
    except Exception:  # noqa: BLE001 (a prediction that does not plan is not counted)
        return None


def _load(cluster, data: Path, db: str):
    C.load_dump(cluster, db, data / "pg_dumps" / f"{db}.sql")
    conn = cluster.connect(db)
    schemas = list(C.user_schemas(conn))
    path = ", ".join(f'"{s}"' for s in schemas) + ("" if "public" in schemas else ", public")
    conn.execute(f"SET search_path TO {path}")
    return conn, schemas, path


def plans(args) -> int:
    st = default_settings()
    max_cost = args.max_plan_cost if args.max_plan_cost is not None else st.max_plan_cost
    max_rows = args.max_plan_rows if args.max_plan_rows is not None else st.max_plan_rows
    cluster = C.start_cluster(args.datadir)
    golds, preds = [], []
    for db in R.database_names(args.data, args.db) if not args.cross_join_only else []:
        rows = R.load_questions(args.data / f"bird_minidev_{db}.jsonl", None)
        conn, _schemas, _path = _load(cluster, args.data, db)
        models = R.model_list(rows, "all", None)
        for r in rows:
            if (g := _explain(conn, r["gold_sql"])) is not None:
                golds.append((db, r.get("question_id"), *g))
            for m in models:
                sql = R.cleaned(R.prediction(r, m), m["dialect"])
                if sql and (p := _explain(conn, sql)) is not None:
                    preds.append((db, r.get("question_id"), *p))
        conn.close()
        log(f"{db}: {len(rows)} questions explained")

    def over(x):
        return (max_cost > 0 and x[2] > max_cost) or (max_rows > 0 and x[3] > max_rows)

    for name, xs in (("gold", golds), ("predictions", preds)):
        if not xs:
            continue
        costs, nrows = [x[2] for x in xs], [x[3] for x in xs]
        log(
            f"{name}: {len(xs)} planned; cost p50 {statistics.median(costs):.1f} max "
            f"{max(costs):.1f}; rows p50 {statistics.median(nrows):.0f} max {max(nrows):.0f}; "
            f"refused at max_plan_cost={max_cost:g}, max_plan_rows={max_rows:g}: "
            f"{sum(1 for x in xs if over(x))}"
        )
        for x in sorted(xs, key=lambda x: -x[2])[:3]:
            log(f"   costliest: {x[0]} q{x[1]} cost {x[2]:.0f} rows {x[3]:.0f}")
    refused_ms, cross = _cross_join(cluster) if not args.no_cross_join else (float("nan"), "")
    log(f"cross join of three 200,000-row tables: {cross or 'not asked'}")
    log(
        f"RESULT gold_refused={sum(1 for x in golds if over(x))}/{len(golds)} "
        f"predictions_refused={sum(1 for x in preds if over(x))}/{len(preds)} "
        f"cross_join_refused_ms={refused_ms:.1f}"
    )
    return 0


def _cross_join(cluster) -> tuple[float, str]:
    """Ask a question a scripted model answers with a cross join of three 200,000-row tables;
    the candidate's time (its EXPLAIN) and its reason."""
    admin = cluster.connect("postgres")
    admin.execute("DROP DATABASE IF EXISTS guardrails_bench WITH (FORCE)")
    admin.execute("CREATE DATABASE guardrails_bench")
    conn = cluster.connect("guardrails_bench")
    for t in ("a", "b", "c"):
        conn.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int)")  # no text: fast reindex
        conn.execute(f"INSERT INTO {t} SELECT g, g % 1000 FROM generate_series(1, 200000) g")
        conn.execute(f"ANALYZE {t}")
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    conn.execute("SELECT nl2sql.reindex()")
    llm = LoopbackLLM().start()
    try:
        llm.add_rule(Rule(response="SELECT count(*) FROM a, b, c WHERE a.v < b.v"))
        conn.execute("SELECT nl2sql.set_setting('candidate_timeout_ms', '60000')")
        conn.execute("SELECT nl2sql.add_model('m', 'gpt-4', base_url => %s)", (llm.base_url,))
        conn.execute("SELECT nl2sql.set_setting('repair_rounds', '0')")
        t0 = time.perf_counter()
        trace = conn.execute("SELECT nl2sql.explain('how many pairs?')").fetchone()[0]
        wall = (time.perf_counter() - t0) * 1000
    finally:
        llm.stop()
        conn.close()
    c = trace["candidates"][0]
    return c["exec_ms"], f"{c['status']}: {c['reason']} (whole call {wall:.0f} ms)"


def cost(args) -> int:
    cluster = C.start_cluster(args.datadir)
    db = args.db
    rows = R.load_questions(args.data / f"bird_minidev_{db}.jsonl", args.limit)
    conn, schemas, _path = _load(cluster, args.data, db)
    C.ensure_reader_role(conn, schemas)
    conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
    conn.execute("SELECT nl2sql.set_setting('schemas', %s)", (",".join(schemas),))
    conn.execute("SELECT nl2sql.reindex()")
    models = R.model_list(rows, "pg", None)
    llm = LoopbackLLM().start()
    per_q, single = [], []
    try:
        conn.execute("DELETE FROM nl2sql.model")
        for m in models:
            llm.set_replay(m["name"], {r["question"]: (R.prediction(r, m) or "") for r in rows})
            conn.execute(
                "SELECT nl2sql.add_model(%s, %s, base_url => %s, dialect => %s, "
                "price_in_per_mtok => %s::numeric, price_out_per_mtok => %s::numeric)",
                (m["name"], m["name"], llm.base_url, m["dialect"], args.price_in, args.price_out),
            )
        for r in rows:
            t = conn.execute(
                "SELECT nl2sql.explain(%s, %s)", (r["question"], r.get("evidence"))
            ).fetchone()[0]
            tok = t["tokens"]
            pre = t.get("presql", {}).get("reply", {})
            per_q.append((tok["total"], tok["cost_usd"] or 0.0, len(tok["by_model"])))
            single.append(pre.get("cost_usd") or 0.0)
        usage = conn.execute(
            "SELECT questions, tokens, cost_usd FROM nl2sql.usage WHERE role_name = current_user"
        ).fetchone()
    finally:
        llm.stop()
    n = len(per_q)
    tpq = sum(x[0] for x in per_q) / n
    cpq = sum(x[1] for x in per_q) / n
    one = sum(single) / n
    calls = statistics.median(x[2] for x in per_q)
    log(
        f"{db}: {n} questions, {len(models)} models priced ${args.price_in}/M in, "
        f"${args.price_out}/M out; nl2sql.usage: {usage}"
    )
    log(
        f"one single call (the PreSQL prompt, DAIL-SQL style) costs ${one:.5f}; the whole "
        f"question ${cpq:.5f} = {cpq / one if one else float('nan'):.2f} x one call, with "
        f"{len(models)} models (goal: at most {len(models)} x)"
    )
    log(
        f"RESULT tokens_per_question={tpq:.0f} cost_per_question_usd={cpq:.5f} "
        f"single_call_usd={one:.5f} ratio_vs_single_call={cpq / one if one else 0:.2f} "
        f"models={len(models)} models_per_question_p50={calls:.0f}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("what", choices=("plans", "cost"))
    ap.add_argument("--data", type=Path, required=True, help="the bench-data folder")
    ap.add_argument("--db", default="all", help="a database name, or all (plans)")
    ap.add_argument("--datadir", type=Path, default=None, help="the bench cluster's folder")
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions (cost)")
    ap.add_argument("--max-plan-cost", type=float, default=None)
    ap.add_argument("--max-plan-rows", type=float, default=None)
    ap.add_argument("--cross-join-only", action="store_true", help="plans: the cross join only")
    ap.add_argument(
        "--no-cross-join", action="store_true", help="plans: no cross join (needs no nl2sql)"
    )
    ap.add_argument("--price-in", type=float, default=2.5, help="$ per million prompt tokens")
    ap.add_argument("--price-out", type=float, default=10.0, help="$ per million completion tokens")
    args = ap.parse_args(argv)
    return plans(args) if args.what == "plans" else cost(args)


if __name__ == "__main__":
    sys.exit(main())
