#!/usr/bin/env python3
"""Schema-linking benchmark: PreSQL = a real model's recorded SQL for each BIRD mini-dev
question (``predictions[<model>]`` in ``bird_minidev_<db>.jsonl``, default gpt-4); the tables
``nl2sql.retrieve(question, evidence, presql)`` links are compared with the gold SQL's tables.

* R_e: linked tables == gold tables; R_s: gold ⊆ linked (PET-SQL Table 5/6: R_s 0.98 with
  1.60 tables linked for 1.57 in gold). When nothing links (PreSQL does not parse), the
  pipeline falls back to the whole schema, and so does this count.
* mean tables linked vs mean tables in gold;
* column recall: share of the gold SQL's (table, column) pairs among the linked columns or in
  a linked table (the FinSQL prompt shows linked tables whole), and among the linked columns
  alone ("strict");
* the same figures for PreSQL's own tables alone (PET-SQL's linking), for reference.

Goal: R_s >= 0.98 and mean linked <= gold mean + 0.3.

Usage: python bench/linking.py [--data ../shared/bench-data] [--db superhero] [--model gpt-4]
       [--limit N] [--datadir DIR]
Last line: ``RESULT r_e=<0..1> r_s=<0..1> tables_linked=<mean> tables_gold=<mean> column_recall=<0..1>``
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C  # noqa: E402

from nl2sql.linking import presql_links  # noqa: E402
from nl2sql.settings import SETTINGS  # noqa: E402
from nl2sql.types import Column, Schema, Table  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "bench-data"


def log(*a) -> None:
    print(*a, flush=True)


def schema_of(conn, schemas: list[str]) -> Schema:
    """Tables and columns of ``schemas`` (bare names; one schema per database here)."""
    rows = conn.execute(
        "SELECT table_schema, table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = ANY(%s) ORDER BY 1, 2, ordinal_position", (schemas,)).fetchall()
    tables: dict[tuple[str, str], Table] = {}
    for s, t, c, ty in rows:
        tables.setdefault((s, t), Table(name=t, schema=s, table=t, columns=[])).columns.append(
            Column(name=c, data_type=ty))
    return Schema(tables=list(tables.values()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--db", default="superhero")
    ap.add_argument("--model", default="gpt-4", help="whose recorded SQL is the PreSQL")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--datadir", type=Path, default=None)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="nl2sql setting for this run (repeatable), e.g. link_column_min=0.7")
    ap.add_argument("--json", type=Path, default=None, help="write per-question details here")
    args = ap.parse_args(argv)

    qfile = args.data / f"bird_minidev_{args.db}.jsonl"
    if not qfile.exists():
        ap.error(f"{qfile} not found: this bench needs a real model's recorded SQL per question")
    rows = [json.loads(x) for x in qfile.read_text().splitlines() if x.strip()]
    rows = rows[:args.limit] if args.limit else rows
    def recorded(r: dict) -> str:  # PostgreSQL-dialect prediction, else the SQLite one
        return ((r.get("predictions") or {}).get(args.model)
                or (r.get("predictions_sqlite") or {}).get(args.model) or "")

    if not any(recorded(r) for r in rows):
        ap.error(f"no predictions of model {args.model!r} in {qfile}")

    cluster = C.start_cluster(args.datadir)
    rep = C.load_dump(cluster, args.db, args.data / "pg_dumps" / f"{args.db}.sql")
    conn = cluster.connect(args.db)
    schemas = list(C.user_schemas(conn))
    conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
    conn.execute("SELECT nl2sql.set_setting('schemas', %s)", (",".join(schemas),))
    for kv in args.set:
        k, v = kv.split("=", 1)
        conn.execute("SELECT nl2sql.set_setting(%s, %s)", (k, v))
    conn.execute("SET search_path TO " + ", ".join(f'"{s}"' for s in schemas) + ", public")
    t0 = time.perf_counter()
    conn.execute("SELECT nl2sql.reindex()")
    settings = {s.name: C.setting_text(conn, s.name) for s in SETTINGS
                if s.name.startswith(("link", "value"))}
    log(f"{args.db}: {len(rows)} questions; PreSQL = recorded SQL of {args.model}; dump "
        f"{rep.seconds:.1f} s, reindex {time.perf_counter() - t0:.1f} s; settings {settings}")
    schema = schema_of(conn, schemas)
    all_tables = {t.name for t in schema.tables}

    n = 0
    agg = {k: [] for k in ("eq", "sub", "n_linked", "n_gold", "pre_eq", "pre_sub", "pre_n")}
    col_hit = col_hit_strict = col_hit_pre = col_total = 0
    reasons: dict[str, int] = {}
    misses = []
    ms = []
    details = []
    for r in rows:
        presql = recorded(r)
        gold_tabs, gold_cols = presql_links(r["gold_sql"], schema)
        gold = set(gold_tabs)
        res = conn.execute("SELECT nl2sql.retrieve(%s, %s, %s)",
                           (r["question"], r.get("evidence") or None, presql or None)).fetchone()[0]
        ms.append(float(res["timings"]["retrieval_ms"]))
        details.append({"question_id": r["question_id"], "gold_tables": sorted(gold),
                        "gold_columns": gold_cols, "presql": presql, "retrieve": res})
        linked = set(res.get("linked_tables") or []) or set(all_tables)  # pipeline's fallback
        linked_cols = {tuple(c.split(".", 1)) for c in res.get("linked_columns") or []}
        pre_tabs, pre_cols = presql_links(presql, schema)
        pre = set(pre_tabs) or set(all_tables)
        n += 1
        agg["eq"].append(linked == gold)
        agg["sub"].append(gold <= linked)
        agg["n_linked"].append(len(linked))
        agg["n_gold"].append(len(gold))
        agg["pre_eq"].append(pre == gold)
        agg["pre_sub"].append(gold <= pre)
        agg["pre_n"].append(len(pre))
        for t, c in gold_cols:
            col_total += 1
            col_hit += (t, c) in linked_cols or t in linked
            col_hit_strict += (t, c) in linked_cols
            col_hit_pre += t in pre
        for t, why in ((res.get("linking") or {}).get("why") or {}).items():
            for w in why:
                kind = w.split(" ")[0] + (" " + w.split(" ")[1] if w.startswith(("fk", "column")) else "")
                reasons[kind] = reasons.get(kind, 0) + 1
        if not gold <= linked or len(linked) > len(gold) + 1:
            misses.append((r["question_id"], sorted(gold), sorted(linked),
                           (res.get("linking") or {}).get("why")))

    mean = statistics.mean
    r_e, r_s = mean(agg["eq"]), mean(agg["sub"])
    tl, tg = mean(agg["n_linked"]), mean(agg["n_gold"])
    colrec = col_hit / col_total if col_total else 0.0
    log(f"PreSQL tables alone (PET-SQL linking, reference): R_e {mean(agg['pre_eq']):.3f} "
        f"R_s {mean(agg['pre_sub']):.3f} tables {mean(agg['pre_n']):.2f}; column recall "
        f"{col_hit_pre / col_total if col_total else 0:.3f}")
    log(f"nl2sql linking (PreSQL ∪ values ∪ similar columns ∪ FK bridges): R_e {r_e:.3f} "
        f"R_s {r_s:.3f} tables linked {tl:.2f} vs gold {tg:.2f} (goal: R_s >= 0.98, linked <= "
        f"{tg + 0.3:.2f}); column recall {colrec:.3f} (strict, linked columns only: "
        f"{col_hit_strict / col_total if col_total else 0:.3f}) over {col_total} gold columns")
    log("link reasons (table links): " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())))
    log(f"retrieval ms p50 {C.percentile(ms, 50):.0f}, p90 {C.percentile(ms, 90):.0f}")
    for qid, g, lk, why in misses:
        log(f"   q{qid}: gold {g} linked {lk} why {json.dumps(why)[:300]}")
    conn.close()
    if args.json:
        args.json.write_text(json.dumps(details, indent=1, default=str))
    log(f"RESULT r_e={r_e:.3f} r_s={r_s:.3f} tables_linked={tl:.2f} tables_gold={tg:.2f} "
        f"column_recall={colrec:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
