#!/usr/bin/env python3
"""Value retrieval benchmark: of the string literals in the gold SQL that are cell values of
the database, the share found among the top-k values ``nl2sql.retrieve(question, evidence)``
retrieves (k = setting value_top_k, default 10). Evidence (BIRD's hint text) is passed where
the dataset has it (superhero: ``bird_minidev_superhero.jsonl``); geo and world questions come
from ``evals.jsonl`` (no evidence).

A gold literal "is a cell value" when some string column of the database holds it exactly
(checked in the database itself, not in the index); it is "found" when a retrieved value is
the same string (case-sensitive). Goal: >= 0.95 on superhero and geo.

``--dbs demo`` is the project's own demo database and its 10 questions (nl2sql_indexer.dev.demo_data).

Usage: python bench/values.py [--data ../shared/bench-data] [--dbs superhero,geo,world,demo | --db all]
       [--limit N] [--datadir DIR] [--json OUT] [--set KEY=VALUE ...]
Last line: ``RESULT value_recall_at10=<0..1>`` (over all questions of the databases given).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlglot import exp

import common as C
from nl2sql.core.sqlcheck import CandidateRefused, parse_one

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "bench-data"


def log(*a) -> None:
    print(*a, flush=True)


def questions_for(data: Path, db: str) -> list[dict]:
    """``{"id", "question", "evidence", "gold"}`` for ``db``: BIRD mini-dev (with evidence) when
    there is a file for it, the project's demo questions for ``demo``, else evals.jsonl."""
    if db == "demo":
        from nl2sql_indexer.dev.demo_data import DEMO_QUESTIONS

        return [
            {"id": i, "question": q, "evidence": None, "gold": g}
            for i, (q, g) in enumerate(DEMO_QUESTIONS, 1)
        ]
    bird = data / f"bird_minidev_{db}.jsonl"
    if bird.exists():
        rows = [json.loads(x) for x in bird.read_text().splitlines() if x.strip()]
        return [
            {
                "id": r["question_id"],
                "question": r["question"],
                "evidence": r.get("evidence"),
                "gold": r["gold_sql"],
            }
            for r in rows
            if r.get("gold_ok", True) is not False
        ]
    rows = [json.loads(x) for x in (data / "evals.jsonl").read_text().splitlines() if x.strip()]
    return [
        {"id": r["eval_id"], "question": r["question"], "evidence": None, "gold": r["query"]}
        for r in rows
        if r["database"] == db
    ]


def string_literals(sql: str) -> list[str]:
    """String literals of a query (sqlglot), each once."""
    try:
        tree = parse_one(sql)
    except CandidateRefused:
        return []
    out: list[str] = []
    for lit in tree.find_all(exp.Literal):
        if lit.is_string and lit.this and lit.this not in out:
            out.append(lit.this)
    return out


def cell_values_among(conn, literals: set[str]) -> set[str]:
    """The literals some string column of the database holds exactly."""
    cols = conn.execute(
        "SELECT table_schema, table_name, column_name FROM information_schema.columns "
        "WHERE table_schema NOT IN ('pg_catalog', 'information_schema', 'nl2sql') "
        "AND data_type IN ('text', 'character varying', 'character')"
    ).fetchall()
    found: set[str] = set()
    lits = sorted(literals)
    for s, t, c in cols:
        q = f'SELECT DISTINCT "{c}"::text FROM "{s}"."{t}" WHERE "{c}"::text = ANY(%s)'
        found |= {r[0] for r in conn.execute(q, (lits,))}
    return found


def setup_db(cluster, data: Path, db: str):
    if db == "demo":  # the project's own demo database (nl2sql_indexer.dev.demo_data)
        from nl2sql_indexer.dev.demo_data import demo_sql

        t0 = time.perf_counter()
        cluster.create_database(db, drop=True)
        conn = cluster.connect(db)
        conn.execute(demo_sql())
        rep = C.LoadReport(seconds=time.perf_counter() - t0)
    else:
        rep = C.load_dump(cluster, db, data / "pg_dumps" / f"{db}.sql")
        conn = cluster.connect(db)
    schemas = list(C.user_schemas(conn))
    conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
    conn.execute("SELECT nl2sql.set_setting('schemas', %s)", (",".join(schemas),))
    conn.execute("SET search_path TO " + ", ".join(f'"{s}"' for s in schemas) + ", public")
    t0 = time.perf_counter()
    counts = conn.execute("SELECT nl2sql.reindex()").fetchone()[0]
    log(
        f"{db}: dump loaded in {rep.seconds:.1f} s; reindex {time.perf_counter() - t0:.1f} s: "
        f"tables {counts['tables_indexed']}, values {counts['values']}"
    )
    return conn


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--dbs", default="superhero,geo", help="comma-separated databases")
    ap.add_argument(
        "--db",
        default=None,
        help="one database, or all: every bird_minidev_<db>.jsonl in --data with its "
        "dump (replaces --dbs)",
    )
    ap.add_argument("--limit", type=int, default=None, help="first N questions per database")
    ap.add_argument("--datadir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="write per-question details here")
    ap.add_argument("--show-misses", type=int, default=25)
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an nl2sql setting for this run (nl2sql.set_setting), e.g. "
        "value_vector_phrases=0 to measure without vector lookups; repeatable",
    )
    args = ap.parse_args(argv)
    overrides = [kv.split("=", 1) for kv in args.set]
    if any(len(kv) != 2 for kv in overrides):
        ap.error("--set takes KEY=VALUE")

    dbs = [d.strip() for d in args.dbs.split(",") if d.strip()]
    if args.db == "all":
        dbs = sorted(
            p.name[len("bird_minidev_") : -len(".jsonl")]
            for p in args.data.glob("bird_minidev_*.jsonl")
            if (
                args.data / "pg_dumps" / (p.name[len("bird_minidev_") : -len(".jsonl")] + ".sql")
            ).exists()
        )
        if not dbs:
            ap.error(f"no bird_minidev_<db>.jsonl with a pg_dumps/<db>.sql in {args.data}")
    elif args.db:
        dbs = [args.db]

    cluster = C.start_cluster(args.datadir)
    total_found = total_gold = 0
    per_db: list[tuple[str, int, int]] = []
    details = []
    all_ms: list[float] = []
    for db in dbs:
        qs = (
            questions_for(args.data, db)[: args.limit]
            if args.limit
            else questions_for(args.data, db)
        )
        conn = setup_db(cluster, args.data, db)
        for k, v in overrides:
            conn.execute("SELECT nl2sql.set_setting(%s, %s)", (k, v))
            log(f"{db}: setting {k} = {v}")
        if any(k in ("embedding_precision", "value_embedding") for k, _ in overrides):  # re-embeds
            conn.execute("SELECT nl2sql.reindex(force => true)")
        top_k = C.setting_value(conn, "value_top_k")
        lits = {q["id"]: string_literals(q["gold"]) for q in qs}
        cells = cell_values_among(conn, {v for ls in lits.values() for v in ls})
        indexed = {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT value FROM nl2sql.cell_value WHERE value = ANY(%s)",
                (sorted(cells),),
            )
        }
        found = gold = found_ci = found_noev = 0
        has_ev = any(q["evidence"] for q in qs)
        misses_noev: list = []
        how: dict[str, int] = {}
        misses = []
        ms: list[float] = []
        conn.execute("SELECT nl2sql.retrieve('warm up')")
        for q in qs:
            want = [v for v in lits[q["id"]] if v in cells]
            r = conn.execute(
                "SELECT nl2sql.retrieve(%s, %s)", (q["question"], q["evidence"])
            ).fetchone()[0]
            ms.append(float(r["timings"]["values_ms"]))
            got = {v["value"]: v for v in r["values"]}
            got_ci = {v.lower() for v in got}
            if has_ev and want:  # reference figure: the same question without its evidence
                r2 = conn.execute("SELECT nl2sql.retrieve(%s)", (q["question"],)).fetchone()[0]
                got2 = [x["value"] for x in r2["values"]]
                found_noev += sum(1 for v in want if v in got2)
                misses_noev += [(q["id"], q["question"], v, got2) for v in want if v not in got2]
            for v in want:
                gold += 1
                if v in got:
                    found += 1
                    how[got[v]["how"]] = how.get(got[v]["how"], 0) + 1
                else:
                    misses.append(
                        (q["id"], q["question"], v, v in indexed, [x["value"] for x in r["values"]])
                    )
                if v.lower() in got_ci:
                    found_ci += 1
            details.append({"db": db, "id": q["id"], "gold_values": want, "retrieved": r["values"]})
        conn.close()
        n_q = sum(1 for q in qs if any(v in cells for v in lits[q["id"]]))
        rec = found / gold if gold else float("nan")
        log(
            f"{db}: {len(qs)} questions, {n_q} with gold cell values; {gold} gold values "
            f"({len(cells - indexed)} distinct not in the value index); found in top-{top_k}: "
            f"{found} = {rec:.3f} (case-insensitive {found_ci / gold if gold else 0:.3f}); by "
            + ", ".join(f"{k} {v}" for k, v in sorted(how.items()))
        )
        if has_ev:
            log(
                f"{db}: without the evidence text (reference): {found_noev}/{gold} = "
                f"{found_noev / gold if gold else 0:.3f}"
            )
            for qid, qq, v, got2 in misses_noev[: args.show_misses]:
                log(f"   miss without evidence q{qid}: {v!r} in {qq!r}; got {got2[:6]}")
        log(
            f"{db}: value retrieval ms p50 {C.percentile(ms, 50):.0f}, p90 {C.percentile(ms, 90):.0f}"
        )
        for qid, qq, v, idx, got in misses[: args.show_misses]:
            log(f"   miss q{qid}: {v!r}{'' if idx else ' (not indexed)'} in {qq!r}; got {got[:6]}")
        total_found += found
        total_gold += gold
        per_db.append((db, found, gold))
        all_ms += ms
    if args.json:
        args.json.write_text(json.dumps(details, indent=1, default=str))
    if len(per_db) > 1:
        for db, f, g in per_db:
            log(f"   {db:<24} {f:>4}/{g:<4} = {f / g if g else float('nan'):.3f}")
    recall = total_found / total_gold if total_gold else 0.0
    log(
        f"all: {total_found}/{total_gold} gold cell values found; value retrieval ms p50 "
        f"{C.percentile(all_ms, 50):.0f}"
    )
    log(f"RESULT value_recall_at10={recall:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
