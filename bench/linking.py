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

With several models (``--model a,b,c``, issue 42 §5) each database is loaded once and linked
with each model's SQL as the PreSQL in turn; it prints R_s and tables linked per database and
model, the misses, and the gold tables left out counted by kind (``miss_kind``: stray column,
bridge, lookup, child, inferred join, far, no presql); last line
``RESULT models=<n> r_s=<0..1> tables_linked=<mean> tables_gold=<mean> missed=<questions>``.

Usage: python bench/linking.py [--data ../shared/bench-data] [--db superhero|all] [--model gpt-4[,m2…]]
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

import common as C
from nl2sql.core.settings import SETTINGS
from nl2sql.core.types import Column, ForeignKey, Schema, Table
from nl2sql.generation.cleaning import clean
from nl2sql.linking._schema_graph import fk_graph, inferred_joins
from nl2sql.linking.presql_reading import presql_links, presql_stray_columns

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "bench-data"


def log(*a) -> None:
    print(*a, flush=True)


def schema_of(conn, schemas: list[str]) -> Schema:
    """Tables and columns of ``schemas`` (bare names; one schema per database here)."""
    rows = conn.execute(
        "SELECT table_schema, table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = ANY(%s) ORDER BY 1, 2, ordinal_position",
        (schemas,),
    ).fetchall()
    tables: dict[tuple[str, str], Table] = {}
    for s, t, c, ty in rows:
        tables.setdefault((s, t), Table(name=t, schema=s, table=t, columns=[])).columns.append(
            Column(name=c, data_type=ty)
        )
    return Schema(tables=list(tables.values()))


def with_keys(conn, schema: Schema) -> Schema:
    """``schema`` with its primary-key flags and foreign keys from the catalog (tables by bare
    name, as ``schema_of`` names them), for ``miss_kind``'s join graph."""
    pk = conn.execute(
        "SELECT c.conrelid::regclass::text, a.attname FROM pg_constraint c JOIN pg_attribute a "
        "ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey) WHERE c.contype = 'p'"
    ).fetchall()
    pks = {(t.split(".")[-1].strip('"'), col) for t, col in pk}
    for t in schema.tables:
        for c in t.columns:
            c.is_primary_key = (t.name, c.name) in pks
    rows = conn.execute(
        "SELECT conrelid::regclass::text, confrelid::regclass::text, "
        "array(SELECT attname FROM pg_attribute WHERE attrelid = conrelid AND attnum = ANY(conkey)), "
        "array(SELECT attname FROM pg_attribute WHERE attrelid = confrelid AND attnum = ANY(confkey)) "
        "FROM pg_constraint WHERE contype = 'f'"
    ).fetchall()
    bare = [
        (a.split(".")[-1].strip('"'), b.split(".")[-1].strip('"'), ac, bc) for a, b, ac, bc in rows
    ]
    names = {t.name for t in schema.tables}
    schema.foreign_keys = [
        ForeignKey(a, list(ac), b, list(bc)) for a, b, ac, bc in bare if a in names and b in names
    ]
    return schema


def miss_kind(schema: Schema, linked: set[str], table: str, presql: str) -> str:
    """How a gold table left out stands to the linked ones (issue 42 §5): ``stray column`` (it
    has a column PreSQL reads from a table that lacks it, ``presql_stray_columns``), ``bridge``
    (joined to two linked tables), ``lookup`` (a linked table's foreign key references it),
    ``child`` (its foreign key references a linked table), ``inferred join`` (joined to one by
    an inferred join only), ``far`` (joined to none), ``no presql`` (PreSQL read no table)."""
    g = fk_graph(schema)
    for a, b, _ in inferred_joins(schema):
        g[a].add(b)
        g[b].add(a)
    near = g.get(table, set()) & linked
    if not presql_links(presql, schema)[0]:
        return "no presql"
    if set(presql_stray_columns(presql, schema)) & {
        c.name.lower() for t in schema.tables if t.name == table for c in t.columns
    }:
        return "stray column"
    if len(near) >= 2:
        return "bridge"
    if any(f.table in near and f.ref_table == table for f in schema.foreign_keys):
        return "lookup"
    if any(f.table == table and f.ref_table in near for f in schema.foreign_keys):
        return "child"
    return "inferred join" if near else "far"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument(
        "--db",
        default="superhero",
        help="database, or all: every bird_minidev_<db>.jsonl in --data",
    )
    ap.add_argument(
        "--model",
        default="gpt-4",
        help="whose recorded SQL is the PreSQL (several, comma-separated: one run each, "
        "reported per database and model): a PostgreSQL-dialect model "
        "(predictions) or a SQLite-dialect one (predictions_sqlite, transpiled "
        "as the pipeline cleans a sqlite model's PreSQL)",
    )
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--datadir", type=Path, default=None)
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="nl2sql setting for this run (repeatable), e.g. link_column_min=0.7",
    )
    ap.add_argument("--json", type=Path, default=None, help="write per-question details here")
    args = ap.parse_args(argv)
    if args.db == "all":
        dbs = sorted(
            p.name[len("bird_minidev_") : -len(".jsonl")]
            for p in args.data.glob("bird_minidev_*.jsonl")
            if (
                args.data / "pg_dumps" / (p.name[len("bird_minidev_") : -len(".jsonl")] + ".sql")
            ).exists()
        )
    else:
        dbs = [args.db]
    for db in dbs:
        if not (args.data / f"bird_minidev_{db}.jsonl").exists():
            ap.error(
                f"{args.data / f'bird_minidev_{db}.jsonl'} not found: this bench needs a real "
                "model's recorded SQL per question"
            )
    if not dbs:
        ap.error(f"no bird_minidev_<db>.jsonl with a pg_dumps/<db>.sql in {args.data}")
    cluster = C.start_cluster(args.datadir)
    models = [m.strip() for m in args.model.split(",") if m.strip()]
    runs = []
    for db in dbs:
        try:
            runs.extend(link_database(args, cluster, db, models))
        except LookupError as e:
            ap.error(str(e))
    if args.json:
        args.json.write_text(json.dumps([d for r in runs for d in r["details"]], default=str))
    if len(models) > 1:
        return _report_models(runs, models)
    if len(runs) > 1:
        log("")
        log(
            f"{'database':<24} {'n':>4} {'R_e':>6} {'R_s':>6} {'linked':>7} {'gold':>6} {'pre R_s':>8} {'pre n':>6}"
        )
        for r in runs:
            a = r["agg"]
            log(
                f"{r['db']:<24} {len(a['eq']):>4} {statistics.mean(a['eq']):>6.3f} {statistics.mean(a['sub']):>6.3f} "
                f"{statistics.mean(a['n_linked']):>7.2f} {statistics.mean(a['n_gold']):>6.2f} "
                f"{statistics.mean(a['pre_sub']):>8.3f} {statistics.mean(a['pre_n']):>6.2f}"
            )
        log(f"=== all {len(runs)} databases ===")
    agg = {k: [x for r in runs for x in r["agg"][k]] for k in runs[0]["agg"]}
    col = {k: sum(r["col"][k] for r in runs) for k in runs[0]["col"]}
    reasons: dict[str, int] = {}
    for r in runs:
        for k, v in r["reasons"].items():
            reasons[k] = reasons.get(k, 0) + v
    ms = [x for r in runs for x in r["ms"]]
    misses = [(f"{r['db']}:{m[0]}", *m[1:]) for r in runs for m in r["misses"]]
    mean = statistics.mean
    r_e, r_s = mean(agg["eq"]), mean(agg["sub"])
    tl, tg = mean(agg["n_linked"]), mean(agg["n_gold"])
    colrec = col["hit"] / col["total"] if col["total"] else 0.0
    log(
        f"PreSQL tables alone (PET-SQL linking, reference): R_e {mean(agg['pre_eq']):.3f} "
        f"R_s {mean(agg['pre_sub']):.3f} tables {mean(agg['pre_n']):.2f}; column recall "
        f"{col['pre'] / col['total'] if col['total'] else 0:.3f}"
    )
    log(
        f"nl2sql linking (PreSQL ∪ values ∪ similar columns ∪ FK bridges): R_e {r_e:.3f} "
        f"R_s {r_s:.3f} tables linked {tl:.2f} vs gold {tg:.2f} (goal: R_s >= 0.98, linked <= "
        f"{tg + 0.3:.2f}); column recall {colrec:.3f} (strict, linked columns only: "
        f"{col['strict'] / col['total'] if col['total'] else 0:.3f}) over {col['total']} gold columns"
    )
    log("link reasons (table links): " + ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())))
    log(f"retrieval ms p50 {C.percentile(ms, 50):.0f}, p90 {C.percentile(ms, 90):.0f}")
    for qid, g, lk, why in misses:
        log(f"   q{qid}: gold {g} linked {lk} why {json.dumps(why)[:300]}")
    log(
        f"RESULT r_e={r_e:.3f} r_s={r_s:.3f} tables_linked={tl:.2f} tables_gold={tg:.2f} "
        f"column_recall={colrec:.3f}"
    )
    return 0


def model_dialect(rows: list[dict], model: str) -> str | None:
    """``postgres`` when ``model`` has PostgreSQL-dialect predictions in ``rows``, ``sqlite``
    when it has SQLite-dialect ones (``predictions_sqlite``), else None."""
    if any(model in (r.get("predictions") or {}) for r in rows):
        return "postgres"
    if any(model in (r.get("predictions_sqlite") or {}) for r in rows):
        return "sqlite"
    return None


def presql_text(row: dict, model: str, dialect: str) -> str:
    """The model's recorded SQL for one question as ``nl2sql.retrieve`` takes a PreSQL: as
    recorded for a PostgreSQL-dialect model; for a SQLite-dialect one cleaned and transpiled as
    the pipeline cleans a sqlite model's PreSQL (``cleaning.clean``); empty when none."""
    key = "predictions" if dialect == "postgres" else "predictions_sqlite"
    raw = (row.get(key) or {}).get(model) or ""
    return clean(raw, dialect).sql if raw and dialect != "postgres" else raw


def _report_models(runs: list[dict], models: list[str]) -> int:
    """Print, per database and PreSQL model, R_s and tables linked (and PreSQL's own), then
    the misses of every model, and a RESULT line over all (database, model) runs."""
    log("")
    log(
        f"{'database':<24} {'model':<28} {'n':>4} {'R_s':>6} {'linked':>7} {'gold':>6} {'pre R_s':>8}"
    )
    for r in runs:
        a = r["agg"]
        log(
            f"{r['db']:<24} {r['model']:<28} {len(a['sub']):>4} {statistics.mean(a['sub']):>6.3f} "
            f"{statistics.mean(a['n_linked']):>7.2f} {statistics.mean(a['n_gold']):>6.2f} "
            f"{statistics.mean(a['pre_sub']):>8.3f}"
        )
    for r in runs:
        for qid, g, lk, why in r["misses"]:
            if not set(g) <= set(lk):
                log(
                    f"   {r['db']}:q{qid} [{r['model']}] gold {g} linked {lk} missing "
                    f"{sorted(set(g) - set(lk))} why {json.dumps(why)[:300]}"
                )
    kinds: dict[str, int] = {}
    for r in runs:
        for k, v in r["kinds"].items():
            kinds[k] = kinds.get(k, 0) + v
    log(
        "gold tables left out, by kind (miss_kind): "
        + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))
    )
    sub = [x for r in runs for x in r["agg"]["sub"]]
    nl = [x for r in runs for x in r["agg"]["n_linked"]]
    ng = [x for r in runs for x in r["agg"]["n_gold"]]
    log(
        f"RESULT models={len(models)} r_s={statistics.mean(sub):.3f} "
        f"tables_linked={statistics.mean(nl):.2f} tables_gold={statistics.mean(ng):.2f} "
        f"missed={sum(not x for x in sub)}"
    )
    return 0


def link_database(args: argparse.Namespace, cluster, db: str, models: list[str]) -> list[dict]:
    """Load one database once, link every question's PreSQL (of each model in turn) and
    compare with the gold's tables.

    Args:
        args: the command line (data, limit, set).
        cluster: the running bench cluster.
        db: the database name.
        models: whose recorded SQL is the PreSQL, one run each.

    Returns:
        One dict per model: ``{"db", "model", "agg", "col", "reasons", "ms", "misses",
        "details"}``: per-question lists under ``agg`` (eq, sub, n_linked, n_gold, pre_eq,
        pre_sub, pre_n), column counts under ``col`` (hit, strict, pre, total).

    Raises:
        LookupError: a model has no recorded SQL in the database's question file.
    """
    qfile = args.data / f"bird_minidev_{db}.jsonl"
    rows = [json.loads(x) for x in qfile.read_text().splitlines() if x.strip()]
    rows = [r for r in rows if r.get("gold_ok", True) is not False]
    rows = rows[: args.limit] if args.limit else rows
    dialects = {m: model_dialect(rows, m) for m in models}
    for m, d in dialects.items():
        if d is None:
            raise LookupError(f"no predictions of model {m!r} in {qfile}")
    rep = C.load_dump(cluster, db, args.data / "pg_dumps" / f"{db}.sql")
    conn = cluster.connect(db)
    schemas = list(C.user_schemas(conn))
    conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
    conn.execute("SELECT nl2sql.set_setting('schemas', %s)", (",".join(schemas),))
    for kv in args.set:
        k, v = kv.split("=", 1)
        conn.execute("SELECT nl2sql.set_setting(%s, %s)", (k, v))
    conn.execute("SET search_path TO " + ", ".join(f'"{s}"' for s in schemas) + ", public")
    t0 = time.perf_counter()
    conn.execute("SELECT nl2sql.reindex()")
    settings = {
        s.name: C.setting_text(conn, s.name)
        for s in SETTINGS
        if s.name.startswith(("link", "value"))
    }
    log(
        f"{db}: {len(rows)} questions; PreSQL = recorded SQL of {', '.join(models)}; dump "
        f"{rep.seconds:.1f} s, reindex {time.perf_counter() - t0:.1f} s; settings {settings}"
    )
    schema = with_keys(conn, schema_of(conn, schemas))
    runs = [link_model(conn, schema, rows, db, m, dialects[m]) for m in models]
    conn.close()
    return runs


def link_model(conn, schema: Schema, rows: list[dict], db: str, model: str, dialect: str) -> dict:
    """Link every question of ``rows`` with ``model``'s recorded SQL as the PreSQL (see
    ``link_database``, whose per-model dict this returns)."""
    all_tables = {t.name for t in schema.tables}

    n = 0
    agg = {k: [] for k in ("eq", "sub", "n_linked", "n_gold", "pre_eq", "pre_sub", "pre_n")}
    reasons: dict[str, int] = {}
    misses = []
    ms = []
    details = []
    col = {"hit": 0, "strict": 0, "pre": 0, "total": 0}
    kinds: dict[str, int] = {}
    for r in rows:
        presql = presql_text(r, model, dialect)
        gold_tabs, gold_cols = presql_links(r["gold_sql"], schema)
        gold = set(gold_tabs)
        res = conn.execute(
            "SELECT nl2sql.retrieve(%s, %s, %s)",
            (r["question"], r.get("evidence") or None, presql or None),
        ).fetchone()[0]
        ms.append(float(res["timings"]["retrieval_ms"]))
        details.append(
            {
                "db": db,
                "model": model,
                "question_id": r["question_id"],
                "gold_tables": sorted(gold),
                "gold_columns": gold_cols,
                "presql": presql,
                "retrieve": res,
            }
        )
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
            col["total"] += 1
            col["hit"] += (t, c) in linked_cols or t in linked
            col["strict"] += (t, c) in linked_cols
            col["pre"] += t in pre
        for why in ((res.get("linking") or {}).get("why") or {}).values():
            for w in why:
                kind = w.split(" ")[0] + (
                    " " + w.split(" ")[1] if w.startswith(("fk", "column")) else ""
                )
                reasons[kind] = reasons.get(kind, 0) + 1
        for t in sorted(gold - linked):
            kind = miss_kind(schema, linked, t, presql)
            kinds[kind] = kinds.get(kind, 0) + 1
        if not gold <= linked or len(linked) > len(gold) + 1:
            misses.append(
                (
                    r["question_id"],
                    sorted(gold),
                    sorted(linked),
                    (res.get("linking") or {}).get("why"),
                )
            )

    return {
        "db": db,
        "model": model,
        "agg": agg,
        "col": col,
        "reasons": reasons,
        "ms": ms,
        "misses": misses,
        "kinds": kinds,
        "details": details,
    }


if __name__ == "__main__":
    sys.exit(main())
