#!/usr/bin/env python3
"""Replay benchmark: nl2sql's selection (PreSQL → FinSQL → check → execute → vote) on BIRD
mini-dev questions, fed with REAL MODELS' RECORDED OUTPUTS.

No model is called. The SQL each model "answers" is what that real model wrote for the question
when the BIRD authors ran it (``predictions`` in ``bird_minidev_<db>.jsonl``: 9 models,
PostgreSQL dialect; ``predictions_sqlite``: 4 more, SQLite dialect). A scripted loopback
OpenAI-compatible server (``nl2sql_indexer.dev.loopback.LoopbackLLM``) serves those recorded answers by the
question it finds in the prompt, so the whole in-database path — prompts, HTTP calls, cleaning,
checks, read-only execution, voting, logging — is the real one, but the answers do not depend on
the prompt: PreSQL/FinSQL prompting and schema linking cannot change what a model says here.
What this measures is therefore the pipeline *around* the models:

* per-model EX: each model's raw recorded prediction executed directly and scored alone;
* nl2sql vote EX: the SQL ``nl2sql.explain(question, evidence)`` chooses among the candidates;
* oracle: the share of questions some model answers correctly (the bound for any selection);
* overhead: in-database time per call excluding the wait on models (``timings.overhead_ms``);
* nl2sql errors, and the questions the vote got wrong while some model was right (and why).

SQLite-dialect predictions (``--models sqlite|all``) are replayed as the models wrote them; the
models are configured with ``dialect => 'sqlite'`` so the pipeline's cleaning transpiles them.

Configurations (``--configs``, each a full pass over the questions through ``nl2sql.explain``):

* ``plain``: the selection before generation/selection work — PreSQL also votes, no confidence
  threshold, no value alignment, no repair; plain largest group, tie → fastest;
* ``selection``: MCS-SQL selection (PreSQL does not vote, threshold 0.2), no value alignment;
* ``selection+align``: the same with value alignment;
* ``selection+align+priority``: the same, ties going to the group of the highest-priority model
  instead of the fastest execution;
* ``recommended``: the settings the README recommends (the extension's defaults); its figures
  make the RESULT line.

Offline references (no pipeline): each model alone, raw and cleaned; plain majority of the raw
predictions and of the cleaned ones (with and without cleaning); the oracle.

Scoring is execution accuracy as in the bench-data README (see bench/common.py): gold and
prediction run as a SELECT-only role in a read-only transaction, results compared as multisets
(in order only when the gold has a top-level ORDER BY), values normalized like the vote does.

Usage: python bench/replay.py --data /path/to/bench-data --db superhero [--models pg|sqlite|all]
       [--configs plain,selection,selection+align,recommended] [--limit N] [--datadir DIR]
       [--json OUT]
``--abstain [T1,T2,...]`` adds a clarify-or-abstain report for the main configuration: at each
threshold, the share of questions answered (the vote's confidence at least the threshold: the
rule of setting ``abstain_below``, ``nl2sql.selection.abstain.should_abstain``) and the EX on the answered
questions, from each question's recorded vote confidence (one pipeline run serves every threshold).

The last line printed is ``RESULT ex_vote=<pct> ex_vote_official=<pct> rule=<spider|bird>
ex_best_single=<pct> overhead_ms_p50=<ms>``: ``ex_vote`` by the strict rule (columns in the gold's
order), ``ex_vote_official`` by the data's own (``official_rule``); the other figures are strict.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg

import common as C
from nl2sql.core.types import (
    Column,
    Schema,
    Table,
    Vote,
)
from nl2sql.generation.cleaning import clean
from nl2sql.selection.abstain import should_abstain
from nl2sql_indexer.dev.loopback import LoopbackLLM

# Settings per configuration; "recommended" is the extension's defaults (README).
CONFIGS: dict[str, dict[str, str]] = {
    "plain": {
        "presql_votes": "on",
        "confidence_threshold": "0",
        "value_alignment": "off",
        "repair_rounds": "0",
        "tie_break": "fastest",
    },
    "selection": {
        "presql_votes": "off",
        "confidence_threshold": "0.2",
        "value_alignment": "off",
        "repair_rounds": "0",
        "tie_break": "fastest",
    },
    "selection+align": {
        "presql_votes": "off",
        "confidence_threshold": "0.2",
        "value_alignment": "on",
        "repair_rounds": "0",
        "tie_break": "fastest",
    },
    "selection+align+priority": {
        "presql_votes": "off",
        "confidence_threshold": "0.2",
        "value_alignment": "on",
        "repair_rounds": "0",
        "tie_break": "priority",
    },
    "recommended": {},
}
PREFERRED_FIRST = {"pg": "gpt-4-turbo", "sqlite": "gpt-4-o", "all": "gpt-4-turbo"}
SQLITE_PREFIX = "sqlite/"


def log(*a: Any) -> None:
    print(*a, flush=True)


def load_questions(path: Path, limit: int | None) -> list[dict]:
    """The questions of one ``bird_minidev_<db>.jsonl`` whose gold runs (``gold_ok`` not false).

    Args:
        path: the question file (one JSON object per line).
        limit: keep only the first N questions (after the filter); None keeps all.

    Returns:
        The question objects, in file order.
    """
    rows = [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    rows = [r for r in rows if r.get("gold_ok", True) is not False]
    return rows[:limit] if limit else rows


def model_list(rows: list[dict], which: str, first: str | None) -> list[dict]:
    """Models to replay, the PreSQL writer first: ``{"name", "dialect", "key"}`` where ``name``
    is the name configured in nl2sql (SQLite ones prefixed ``sqlite/``) and ``key`` the name in
    the data file."""
    pg = list(dict.fromkeys(m for r in rows for m in r.get("predictions", {})))
    lite = list(dict.fromkeys(m for r in rows for m in r.get("predictions_sqlite", {})))
    out = []
    if which == "pg" and not pg:  # no PostgreSQL-dialect output recorded (e.g. Spider)
        which = "sqlite"
    if which in ("pg", "all"):
        out += [{"name": m, "dialect": "postgres", "key": m} for m in pg]
    if which in ("sqlite", "all"):
        out += [{"name": SQLITE_PREFIX + m, "dialect": "sqlite", "key": m} for m in lite]
    first = first or PREFERRED_FIRST[which]
    for cand in (first, SQLITE_PREFIX + first):
        idx = [i for i, m in enumerate(out) if m["name"] == cand]
        if idx:
            out.insert(0, out.pop(idx[0]))
            break
    return out


def prediction(row: dict, m: dict) -> str | None:
    src = row.get("predictions" if m["dialect"] == "postgres" else "predictions_sqlite") or {}
    return src.get(m["key"])


def cleaned(text: str | None, dialect: str, schema: Schema | None = None) -> str | None:
    """The prediction as the pipeline cleans it (reference column only): ``cleaning.clean``
    in the model's dialect, with the database's schema (SQLite semantics); None when there is
    no text or cleaning refuses it."""
    if not text:
        return None
    cl = clean(text, dialect, schema)
    return cl.sql or None


def indexed_schema(conn) -> Schema:
    """The schema nl2sql indexed (``nl2sql.visible_column``: names, types, primary keys), as
    the pipeline's cleaning sees it; call after ``nl2sql.reindex()``."""
    rows = conn.execute(
        "SELECT schema_name, table_name, column_name, data_type, is_primary_key "
        "FROM nl2sql.visible_column ORDER BY schema_name, table_name, ordinal"
    ).fetchall()
    tables: dict[tuple[str, str], Table] = {}
    for s, t, c, ty, pk in rows:
        tables.setdefault((s, t), Table(name=t, schema=s, table=t, columns=[])).columns.append(
            Column(name=c, data_type=ty, is_primary_key=bool(pk))
        )
    return Schema(tables=list(tables.values()))


def offline_majority(singles: dict[str, dict]) -> dict:
    """Plain majority over the models' raw results (grouped as multisets), tie → fastest."""
    groups: dict[Any, list[str]] = {}
    for name, s in singles.items():
        if s["key"] is not None:
            groups.setdefault(s["key"], []).append(name)
    if not groups:
        return {"match": False, "reason": "no prediction executed", "sources": []}

    def fastest(ms):
        return min(singles[m]["pred_ms"] for m in ms)

    best = sorted(groups.values(), key=lambda ms: (-len(ms), fastest(ms)))
    win = best[0]
    rep = min(win, key=lambda m: singles[m]["pred_ms"])
    return {
        "match": singles[rep]["match"],
        "sources": win,
        "size": len(win),
        "tie": len(best) > 1 and len(best[1]) == len(win),
    }


def explain_reason(
    trace: dict | None, err: str | None, cands: list[dict], correct_models: list[str]
) -> str:
    """Why the vote missed although ``correct_models`` answered correctly."""
    if err:
        return f"nl2sql call failed: {err[:200]}"
    if trace is None:
        return "no trace"
    if trace.get("error"):
        return f"nl2sql error: {trace['error'][:200]}"
    good = [c for c in cands if c.get("match")]
    if not good:
        lost = []
        for c in cands:
            if c["model"] in correct_models:
                why = c.get("reason") or (
                    c.get("score_reason") if c["status"] == "ok" else c["status"]
                )
                lost.append(f"{c['source']} {c['status']}: {str(why)[:120]}")
        return "no correct candidate survived the pipeline: " + "; ".join(lost)
    groups = (trace.get("vote") or {}).get("groups") or []
    if not groups:
        return "no vote groups"
    win = groups[0]
    good_hashes = {c["result_hash"] for c in good}
    if win["result_hash"] in good_hashes:
        return (
            "vote group holds the right result but the chosen SQL scores wrong "
            f"(ordering or normalization difference): {win['fastest_source']}"
        )
    cg = next((g for g in groups if g["result_hash"] in good_hashes), None)
    csz = cg["size"] if cg else 0
    wsrc = ",".join(s.split(":", 1)[1] if s.startswith("finsql:") else s for s in win["sources"])
    csrc = ",".join(
        s.split(":", 1)[1] if s.startswith("finsql:") else s for s in (cg or {}).get("sources", [])
    )
    n_top = sum(1 for g in groups if g["size"] == win["size"])
    if csz == win["size"]:
        return (
            f"tie between {n_top} groups of {csz} broken by the tie rule: chose [{wsrc}] over "
            f"correct [{csrc}]"
        )
    tie = (
        f" (itself a tie between {n_top} groups of {win['size']}, broken by the tie rule)"
        if n_top > 1
        else ""
    )
    return f"outvoted {win['size']} to {csz}{tie}: chose [{wsrc}] over correct [{csrc}]"


def learn_reliability(cluster, conn, args, models: list[dict]) -> dict:
    """``--learn-from DIR``: judged questions of DIR's databases (``--db`` left out when DIR
    is ``--data``) → ``nl2sql.calibrate(judged)`` in the benchmark database."""
    import learn

    same = args.learn_from.resolve() == args.data.resolve()
    dbs = [d for d in learn.databases(args.learn_from) if not (same and d == args.db)]
    judged = [
        q for d in dbs for q in learn.judged_questions(cluster, args.learn_from, d, models, log=log)
    ]
    out = conn.execute("SELECT nl2sql.calibrate(%s::jsonb)", (json.dumps(judged),)).fetchone()[0]
    log(
        f"learned from {len(judged)} judged questions of {len(dbs)} databases "
        f"({'leave-one-database-out: ' + args.db + ' left out; ' if same else ''}{', '.join(dbs)}): "
        f"mode {out['mode']}, held out (right, and won/lost against the majority) "
        f"{json.dumps(out['held_out'])}"
    )
    for r in out["models"]:
        if r["level"] == "all":
            log(
                f"   {r['model']:<30} judged {r['judged']:>4} right {r['right']:>4} "
                f"weight {r['weight']:.3f}"
            )
    return out


ABSTAIN_THRESHOLDS = "0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0"


def abstain_report(results: list[dict], thresholds: list[float]) -> list[str]:
    """Clarify or abstain on the replay: answered share and EX on the answered questions.

    Args:
        results: per-question results; ``nl2sql`` holds the main configuration's outcome
            (``sql``, ``confidence``, ``match``).
        thresholds: values of setting ``abstain_below`` to report.

    Returns:
        Report lines: per threshold, answered n/N (%), EX on the answered (%), and the EX over
        all questions counting abstentions as not answered.
    """
    outs = [r.get("nl2sql") or {} for r in results]
    n = len(outs)
    lines = [
        f"clarify or abstain (abstain_below), {n} questions, from each vote's confidence:",
        f"{'abstain_below':>13} {'answered':>15} {'EX answered':>12} {'EX all':>7}",
    ]
    for t in [0.0, *thresholds]:
        answered = [
            o
            for o in outs
            if o.get("sql")
            and not should_abstain(
                Vote(
                    sql=o["sql"],
                    winner_hash=None,
                    confidence=float(o.get("confidence") or 0.0),
                    groups=[],
                    reason="",
                ),
                t,
            )
        ]
        ok = sum(1 for o in answered if o.get("match"))
        lines.append(
            f"{t:>13.2f} {len(answered):>5}/{n:<3} {C.pct(len(answered), n):>5.1f}% "
            f"{C.pct(ok, len(answered)) if answered else 0.0:>11.1f}% "
            f"{C.pct(ok, n):>6.1f}%"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--data",
        type=Path,
        required=True,
        help="bench-data folder (pg_dumps/, bird_minidev_*.jsonl)",
    )
    ap.add_argument(
        "--db",
        default="superhero",
        help="database name (dump and question file), default superhero; 'all': every "
        "bird_minidev_<db>.jsonl in --data, one after the other, with per-database "
        "lines and one aggregate RESULT line",
    )
    ap.add_argument(
        "--datadir",
        type=Path,
        default=None,
        help="cluster folder (default .nl2sql/bench-cluster, or /var/tmp/nl2sql-bench-cluster)",
    )
    ap.add_argument(
        "--models",
        choices=["pg", "sqlite", "all"],
        default="pg",
        help="pg: the PostgreSQL-dialect models (`predictions`; where a question file has "
        "none, its `predictions_sqlite` models instead); sqlite: the SQLite-dialect "
        "ones (raw text, configured with dialect => 'sqlite'); all: both",
    )
    ap.add_argument(
        "--first",
        default=None,
        help="model that writes the PreSQL (default: gpt-4-turbo; gpt-4-o for sqlite)",
    )
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions")
    ap.add_argument(
        "--configs",
        default=",".join(CONFIGS),
        help="comma-separated configurations to run (default all; see the module "
        "docstring); the RESULT line is for 'recommended' (or the last one run)",
    )
    ap.add_argument("--json", type=Path, default=None, help="write per-question details here")
    ap.add_argument(
        "--embedding-precision",
        choices=("fp32", "int8"),
        default=None,
        help="setting embedding_precision, set before the first reindex (default: its default)",
    )
    ap.add_argument(
        "--timeout-ms", type=int, default=C.STATEMENT_TIMEOUT_MS, help="scoring statement_timeout"
    )
    ap.add_argument("--stop-cluster", action="store_true", help="stop the cluster at the end")
    ap.add_argument(
        "--learn-from",
        type=Path,
        default=None,
        metavar="DIR",
        help="learn per-model reliability (nl2sql.calibrate) from the judged "
        "questions of every database of DIR (bench/learn.py: recorded "
        "predictions scored against the gold) before the run; when DIR is "
        "--data, --db itself is left out (leave-one-database-out)",
    )
    ap.add_argument(
        "--abstain",
        nargs="?",
        const=ABSTAIN_THRESHOLDS,
        default=None,
        help="report answered share and EX on the answered questions at these "
        f"abstain_below thresholds (default {ABSTAIN_THRESHOLDS})",
    )
    args = ap.parse_args(argv)

    t_run = time.perf_counter()
    try:
        dbs = database_names(args.data, args.db)
    except FileNotFoundError as e:
        ap.error(str(e))
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    for c in configs:
        if c not in CONFIGS:
            ap.error(f"unknown configuration {c!r}; known: {', '.join(CONFIGS)}")
    cluster = C.start_cluster(args.datadir)
    log(f"cluster: {cluster.datadir} on 127.0.0.1:{cluster.port}")
    per_db: dict[str, dict] = {}
    try:
        for db in dbs:
            rows = load_questions(args.data / f"bird_minidev_{db}.jsonl", args.limit)
            if not rows:
                log(f"{db}: no questions (or none with gold_ok); skipped")
                continue
            per_db[db] = run_database(args, cluster, db, rows, configs)
    finally:
        if args.stop_cluster:
            cluster.stop()
        else:
            log(
                f"cluster left running: pg_ctl -D {cluster.datadir} stop (as user postgres) stops it"
            )
    if not per_db:
        log("ERROR: no database ran")
        return 2
    agg = aggregate(per_db)
    if len(per_db) > 1:
        print_aggregate(per_db, agg)
    log(f"run time: {time.perf_counter() - t_run:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        out = next(iter(per_db.values())) if len(per_db) == 1 else {"databases": per_db, **agg}
        args.json.write_text(json.dumps(out, indent=1, default=str))
        log(f"details: {args.json}")
    p50 = agg["overhead_ms_p50"]
    log(
        f"RESULT ex_vote={agg['ex_vote']:.1f} ex_vote_official={agg['ex_vote_official']:.1f} "
        f"rule={official_rule(args.data)} ex_best_single={agg['ex_best_single']:.1f} "
        f"overhead_ms_p50={(p50 if p50 is not None else float('nan')):.0f}"
    )
    return 0


def official_rule(data: Path) -> str:
    """The data's own rule for ``ex_vote_official`` (``bench/result_eq.py``): Spider's
    (columns in any order) for ``spider_dev``, else BIRD's (sets of rows: superhero)."""
    return "spider" if "spider_dev" in data.resolve().parts else "bird"


def database_names(data: Path, db: str) -> list[str]:
    """The databases to run: ``[db]``, or for ``all`` every ``bird_minidev_<name>.jsonl`` in
    ``data`` that has a dump ``pg_dumps/<name>.sql`` (sorted by name).

    Args:
        data: the bench-data folder.
        db: a database name or ``all``.

    Returns:
        The database names, at least one.

    Raises:
        FileNotFoundError: a named database lacks its dump or question file, or ``all`` finds none.
    """
    if db != "all":
        for p in (data / "pg_dumps" / f"{db}.sql", data / f"bird_minidev_{db}.jsonl"):
            if not p.exists():
                raise FileNotFoundError(f"{p} not found")
        return [db]
    names = sorted(
        p.name[len("bird_minidev_") : -len(".jsonl")] for p in data.glob("bird_minidev_*.jsonl")
    )
    names = [n for n in names if (data / "pg_dumps" / f"{n}.sql").exists()]
    if not names:
        raise FileNotFoundError(f"no bird_minidev_<db>.jsonl with a pg_dumps/<db>.sql in {data}")
    return names


def run_database(
    args: argparse.Namespace, cluster: Any, db: str, rows: list[dict], configs: list[str]
) -> dict:
    """Replay one database's questions: load its dump into ``cluster``, install nl2sql, score
    every model offline, run each configuration through ``nl2sql.explain``, print the
    database's summary.

    Args:
        args: the parsed command line (models, first, timeout_ms, ...).
        cluster: the running bench cluster (``common.start_cluster``).
        db: the database name (dump ``pg_dumps/<db>.sql`` in ``args.data``).
        rows: its questions (``load_questions``), at least one.
        configs: the configuration names to run (keys of ``CONFIGS``).

    Returns:
        ``{"db", "models", "n", "per_model_ex", "ex_vote", "ex_offline_majority",
        "ex_offline_majority_cleaned", "ex_oracle", "ex_by_config", "main_config",
        "overhead_ms_p50", "overhead_ms_p90", "nl2sql_errors", "questions"}``; ``questions``
        holds one record per question (its models' offline verdicts under ``models``, the
        pipeline's outcome per configuration under ``configs``, the main one under ``nl2sql``).
    """
    t_run = time.perf_counter()
    dump = args.data / "pg_dumps" / f"{db}.sql"
    models = model_list(rows, args.models, args.first)
    names = [m["name"] for m in models]
    n = len(rows)
    main_cfg = "recommended" if "recommended" in configs else configs[-1]
    log(f"nl2sql replay benchmark: {db}, {n} questions, models={args.models} ({len(models)})")
    log(
        "NOTE: every model answer is a real model's RECORDED output, served by the "
        "scripted loopback server (nl2sql_indexer.dev.loopback); no live model is called, and answers do not "
        "depend on the prompt."
    )
    if any(m["dialect"] == "sqlite" for m in models):
        log(
            "NOTE: the sqlite/* models' answers are SQLite dialect; they are configured with "
            "dialect => 'sqlite', so the pipeline transpiles them to PostgreSQL."
        )
    rep = C.load_dump(cluster, db, dump)
    log(
        f"dump: {dump} loaded in {rep.seconds:.1f} s; roles created {rep.roles_created or 'none'}; "
        f"missing extensions {rep.extensions_missing or 'none'}; harmless psql errors {len(rep.harmless_errors)}"
    )
    for e in rep.harmless_errors[:5]:
        log(f"   (ignored) {e}")

    conn = cluster.connect(db)
    schemas = list(C.user_schemas(conn))
    if not schemas:
        log("ERROR: the dump created no tables")
        return 2
    search_path = ", ".join(psycopg.sql.Identifier(s).as_string(conn) for s in schemas)
    if "public" not in schemas:
        search_path += ", public"
    C.ensure_reader_role(conn, schemas)
    conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
    conn.execute("SELECT nl2sql.set_setting('schemas', %s)", (",".join(schemas),))
    if args.embedding_precision:  # a new database: its first reindex embeds with it
        conn.execute(
            "SELECT nl2sql.set_setting('embedding_precision', %s)", (args.embedding_precision,)
        )
    conn.execute(f"SET search_path TO {search_path}")
    t0 = time.perf_counter()
    counts = conn.execute("SELECT nl2sql.reindex()").fetchone()[0]
    log(
        f"schemas: {','.join(schemas)}; reindex in {time.perf_counter() - t0:.1f} s: {json.dumps(counts)}"
    )

    score_conn = cluster.connect(db)
    score_conn.execute(f"SET search_path TO {search_path}")
    gold_cache: dict = {}
    schema = indexed_schema(conn)

    results: list[dict] = []
    llm = LoopbackLLM().start()
    try:
        conn.execute("DELETE FROM nl2sql.model")
        for m in models:
            llm.set_replay(m["name"], {r["question"]: (prediction(r, m) or "") for r in rows})
            conn.execute(
                "SELECT nl2sql.add_model(%s, %s, base_url => %s, dialect => %s)",
                (m["name"], m["name"], llm.base_url, m["dialect"]),
            )
        log(f"models (first writes the PreSQL): {', '.join(names)}; loopback at {llm.base_url}")
        if args.learn_from:
            learn_reliability(cluster, conn, args, models)

        # phase 1: each model alone, offline (raw and cleaned), plain majorities, oracle
        for i, r in enumerate(rows, 1):
            qid = r.get("question_id")
            res: dict[str, Any] = {
                "question_id": qid,
                "question": r["question"],
                "difficulty": r.get("difficulty"),
                "gold_sql": r["gold_sql"],
                "configs": {},
            }
            try:
                gold = r["gold_sql"]
                ordered = C.gold_is_ordered(gold)
                res["ordered"] = ordered
                singles: dict[str, dict] = {}
                singles_cl: dict[str, dict] = {}
                for m in models:
                    pred = prediction(r, m)
                    s = C.score(
                        score_conn,
                        gold,
                        pred,
                        ordered=ordered,
                        cache=gold_cache,
                        timeout_ms=args.timeout_ms,
                    )
                    cl = cleaned(pred, m["dialect"], schema)
                    s2 = (
                        C.score(
                            score_conn,
                            gold,
                            cl,
                            ordered=ordered,
                            cache=gold_cache,
                            timeout_ms=args.timeout_ms,
                        )
                        if cl and cl != pred
                        else s
                    )
                    singles[m["name"]] = {
                        "match": s.match,
                        "reason": s.reason,
                        "pred_ms": s.pred.ms if s.pred else float("inf"),
                        "key": C.result_key(s.pred.rows) if s.pred and s.pred.ok else None,
                        "match_cleaned": s2.match,
                    }
                    singles_cl[m["name"]] = {
                        "match": s2.match,
                        "pred_ms": s2.pred.ms if s2.pred else float("inf"),
                        "key": C.result_key(s2.pred.rows) if s2.pred and s2.pred.ok else None,
                    }
                g = gold_cache.get(gold)
                res["gold_rows"] = len(g.rows) if g and g.ok else None
                res["gold_error"] = g.error if g else None
                res["models"] = {
                    k: {kk: vv for kk, vv in v.items() if kk != "key"} for k, v in singles.items()
                }
                res["offline_majority"] = offline_majority(singles)
                res["offline_majority_cleaned"] = offline_majority(singles_cl)
            except Exception as e:  # noqa: BLE001 - one failing question must not abort the run
                res["bench_error"] = f"{type(e).__name__}: {e}"
                log(f"[{i:>3}/{n}] q{qid} BENCH ERROR {type(e).__name__}: {str(e)[:200]}")
                traceback.print_exc(limit=3)
                if score_conn.broken or score_conn.closed:
                    score_conn = cluster.connect(db)
                    score_conn.execute(f"SET search_path TO {search_path}")
            results.append(res)

        # phase 2: the pipeline, once per configuration
        for cfg in configs:
            conn.execute(
                "DELETE FROM nl2sql.setting WHERE key = ANY(%s)",
                (
                    [
                        "presql_votes",
                        "confidence_threshold",
                        "value_alignment",
                        "repair_rounds",
                        "tie_break",
                    ],
                ),
            )
            conn.execute("SELECT nl2sql.set_setting('schemas', %s)", (",".join(schemas),))
            for k, v in CONFIGS[cfg].items():
                conn.execute("SELECT nl2sql.set_setting(%s, %s)", (k, v))
            shown = {
                k: C.setting_text(conn, k)
                for k in (
                    "presql_votes",
                    "confidence_threshold",
                    "value_alignment",
                    "repair_rounds",
                    "tie_break",
                    "selection",
                    "prompt_variants",
                    "samples_per_model",
                    "hardness_voters",
                )
            }
            log(f"--- configuration {cfg}: {json.dumps(shown)}")
            # warm-up: one call not counted (imports, HTTP clients); the embedding model is
            # already loaded in this backend by reindex().
            try:
                conn.execute(
                    "SELECT nl2sql.explain(%s, %s)",
                    (rows[0]["question"], rows[0].get("evidence") or None),
                )
            except psycopg.Error as e:
                log(f"warm-up call failed: {str(e).strip()[:200]}")
                if conn.broken:
                    conn = cluster.connect(db)
                    conn.execute(f"SET search_path TO {search_path}")
            for i, (r, res) in enumerate(zip(rows, results), 1):
                if res.get("bench_error"):
                    continue
                qid = r.get("question_id")
                gold, ordered = r["gold_sql"], res["ordered"]
                correct_models = [k for k, v in res["models"].items() if v["match"]]
                out: dict[str, Any] = {}
                trace, err = None, None
                t1 = time.perf_counter()
                try:
                    trace = conn.execute(
                        "SELECT nl2sql.explain(%s, %s)", (r["question"], r.get("evidence") or None)
                    ).fetchone()[0]
                except psycopg.Error as e:
                    err = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    if conn.broken or conn.closed:
                        conn = cluster.connect(db)
                        conn.execute(f"SET search_path TO {search_path}")
                out["call_ms"] = round((time.perf_counter() - t1) * 1000, 1)
                cands: list[dict] = []
                try:
                    if trace is not None:
                        for c in trace.get("candidates") or []:
                            cd = {
                                k: c.get(k)
                                for k in (
                                    "source",
                                    "model",
                                    "status",
                                    "reason",
                                    "sql",
                                    "result_hash",
                                    "row_count",
                                    "exec_ms",
                                    "cleaning",
                                    "alignments",
                                    "repairs",
                                    "order_hash",
                                    "answer",
                                )
                            }
                            if c.get("status") == "ok" and c.get("sql"):
                                sc = C.score(
                                    score_conn,
                                    gold,
                                    c["sql"],
                                    ordered=ordered,
                                    cache=gold_cache,
                                    timeout_ms=args.timeout_ms,
                                )
                                cd["match"], cd["score_reason"] = sc.match, sc.reason
                            else:
                                cd["match"] = False
                            cands.append(cd)
                        chosen = trace.get("sql")
                        vs = (
                            C.score(
                                score_conn,
                                gold,
                                chosen,
                                ordered=ordered,
                                cache=gold_cache,
                                timeout_ms=args.timeout_ms,
                                rule=official_rule(args.data),
                            )
                            if chosen
                            else None
                        )
                        out.update(
                            {
                                "sql": chosen,
                                "match": bool(vs and vs.match),
                                "match_official": bool(vs and vs.official),
                                "score_reason": vs.reason if vs else "no SQL chosen",
                                "confidence": trace.get("confidence"),
                                "error": trace.get("error"),
                                "vote": {
                                    k: (trace.get("vote") or {}).get(k)
                                    for k in ("reason", "confidence", "method")
                                },
                                "vote_groups": (trace.get("vote") or {}).get("groups") or [],
                                "groups": [
                                    {
                                        k: g.get(k)
                                        for k in ("size", "sources", "fastest_source", "row_count")
                                    }
                                    for g in (trace.get("vote") or {}).get("groups") or []
                                ],
                                "dropped": [
                                    {k: g.get(k) for k in ("size", "sources", "confidence")}
                                    for g in (trace.get("vote") or {}).get("dropped") or []
                                ],
                                "linking": trace.get("linking"),
                                "linked_tables": trace.get("linked_tables"),
                                "timings": trace.get("timings"),
                                "candidates": cands,
                            }
                        )
                    else:
                        out.update({"sql": None, "match": False, "error": err, "candidates": []})
                except Exception as e:  # noqa: BLE001 - scoring failure: recorded, the run goes on
                    out.update(
                        {
                            "sql": None,
                            "match": False,
                            "candidates": cands,
                            "error": f"bench: {type(e).__name__}: {e}",
                        }
                    )
                    if score_conn.broken or score_conn.closed:
                        score_conn = cluster.connect(db)
                        score_conn.execute(f"SET search_path TO {search_path}")
                out["call_error"] = err
                if not out["match"] and correct_models:
                    tr = dict(trace or {})
                    if trace is not None:
                        tr["vote"] = {"groups": out.get("vote_groups") or []}
                    out["miss_reason"] = explain_reason(
                        tr if trace is not None else None, err, cands, correct_models
                    )
                out.pop("vote_groups", None)
                res["configs"][cfg] = out
                ov = (out.get("timings") or {}).get("overhead_ms")
                log(
                    f"[{cfg} {i:>3}/{n}] q{qid} {r.get('difficulty', ''):<11} vote={'OK ' if out['match'] else 'bad'} "
                    f"models {len(correct_models)}/{len(models)} "
                    f"conf={out.get('confidence') or 0:.2f} "
                    f"overhead={f'{ov:.0f} ms' if ov is not None else 'n/a'}"
                    + (
                        f"  ERROR {(err or out.get('error'))[:100]}"
                        if err or out.get("error")
                        else ""
                    )
                )
        for res in results:
            main = res["configs"].get(main_cfg)
            if main is not None:
                res["nl2sql"] = main
                res["nl2sql_call_error"] = main.get("call_error")
                if main.get("miss_reason"):
                    res["miss_reason"] = main["miss_reason"]
    finally:
        llm.stop()

    # ---------------------------------------------------------------- summary
    log("")
    log(f"=== {db}: {n} questions, EX in % of {n} ===")
    gold_fail = [r["question_id"] for r in results if r.get("gold_error")]
    if gold_fail:
        log(f"WARNING: gold SQL fails for {gold_fail} (those count as wrong for everyone)")
    per_model = {}
    log(
        f"{'model':<36} {'dialect':<8} {'EX raw':>7} {'EX cleaned' + (' /transpiled' if args.models != 'pg' else ''):>12}"
        f" {'EX in nl2sql (' + main_cfg + ')':>28}"
    )
    for m in models:
        k = m["name"]
        ok = sum(1 for r in results if r.get("models", {}).get(k, {}).get("match"))
        okc = sum(1 for r in results if r.get("models", {}).get(k, {}).get("match_cleaned"))
        okp = sum(
            1
            for r in results
            for c in (r.get("nl2sql") or {}).get("candidates") or []
            if c["source"] == f"finsql:{k}" and c.get("match")
        )
        per_model[k] = C.pct(ok, n)
        log(
            f"{k:<36} {m['dialect']:<8} {C.pct(ok, n):>6.1f}% {C.pct(okc, n):>11.1f}% "
            f"{C.pct(okp, n):>27.1f}%   ({ok}/{okc}/{okp} of {n})"
        )
    log(
        "   (EX in nl2sql: the model's FinSQL candidate as the pipeline executed it: cleaned, "
        "transpiled, values aligned, repaired)"
    )
    best_name = max(per_model, key=lambda k: per_model[k]) if per_model else None
    ex_best = per_model[best_name] if best_name else 0.0
    n_vote = sum(1 for r in results if (r.get("nl2sql") or {}).get("match"))
    n_oracle = sum(1 for r in results if any(v.get("match") for v in r.get("models", {}).values()))
    n_major = sum(1 for r in results if (r.get("offline_majority") or {}).get("match"))
    ex_vote = C.pct(n_vote, n)
    log("")
    log(f"best single model (raw): {best_name} {ex_best:.1f}%")
    log(f"nl2sql vote EX ({main_cfg}): {ex_vote:.1f}% ({n_vote}/{n})")
    n_major_cl = sum(1 for r in results if (r.get("offline_majority_cleaned") or {}).get("match"))
    log(
        f"offline plain majority of the raw predictions (ties → fastest), without cleaning: {C.pct(n_major, n):.1f}% ({n_major}/{n})"
    )
    log(
        f"offline plain majority of the cleaned/transpiled predictions, with cleaning: {C.pct(n_major_cl, n):.1f}% ({n_major_cl}/{n})"
    )
    cfg_ex: dict[str, float] = {}
    for cfg in configs:
        outs = [r["configs"][cfg] for r in results if cfg in r.get("configs", {})]
        k_ok = sum(1 for o in outs if o.get("match"))
        ov = [float(o["timings"]["overhead_ms"]) for o in outs if o.get("timings")]
        cfg_ex[cfg] = C.pct(k_ok, n)
        p50c = C.percentile(ov, 50)
        log(
            f"nl2sql [{cfg}] {json.dumps(CONFIGS[cfg]) if CONFIGS[cfg] else '(extension defaults)'}: "
            f"EX {C.pct(k_ok, n):.1f}% ({k_ok}/{n}), overhead p50 "
            f"{(p50c if p50c is not None else float('nan')):.0f} ms"
        )
    log(f"oracle (any model correct): {C.pct(n_oracle, n):.1f}% ({n_oracle}/{n})")

    ovs = [
        float(r["nl2sql"]["timings"]["overhead_ms"])
        for r in results
        if (r.get("nl2sql") or {}).get("timings")
    ]
    waits = [
        float(r["nl2sql"]["timings"]["llm_wait_ms"])
        for r in results
        if (r.get("nl2sql") or {}).get("timings")
    ]
    p50 = C.percentile(ovs, 50)
    p90 = C.percentile(ovs, 90)
    if ovs:
        log(
            f"overhead_ms (in-database time per call, excluding model waits): p50 {p50:.0f}, "
            f"p90 {p90:.0f}, max {max(ovs):.0f} (n={len(ovs)}); loopback llm_wait_ms p50 "
            f"{C.percentile(waits, 50):.0f}"
        )
        parts: dict[str, list[float]] = {}
        for r in results:
            for k, v in ((r.get("nl2sql") or {}).get("timings") or {}).items():
                if k.endswith("_ms") and k not in ("overhead_ms", "total_ms", "llm_wait_ms"):
                    parts.setdefault(k, []).append(float(v))
        log(
            "   stage p50: " + ", ".join(f"{k} {C.percentile(v, 50):.0f}" for k, v in parts.items())
        )
    n_err = sum(
        1
        for r in results
        if r.get("nl2sql_call_error")
        or (r.get("nl2sql") or {}).get("error")
        or r.get("bench_error")
    )
    log(f"nl2sql errors: {n_err}")
    for r in results:
        e = (
            r.get("nl2sql_call_error")
            or (r.get("nl2sql") or {}).get("error")
            or r.get("bench_error")
        )
        if e:
            log(f"   q{r['question_id']}: {e[:300]}")

    # candidates whose result differs from the raw prediction's verdict (what the pipeline's
    # cleaning/checking/re-rendering did to a model's answer)
    fixed, broken = [], []
    for r in results:
        for c in (r.get("nl2sql") or {}).get("candidates") or []:
            if not c["source"].startswith("finsql:"):
                continue
            raw = r.get("models", {}).get(c["model"], {}).get("match")
            if c.get("match") and not raw:
                fixed.append(f"q{r['question_id']}:{c['model']}")
            elif raw and not c.get("match"):
                broken.append(
                    f"q{r['question_id']}:{c['model']} ({c['status']}: "
                    f"{(c.get('reason') or c.get('score_reason') or '')[:100]})"
                )
    log(
        f"FinSQL candidates right where the raw prediction was wrong (cleaning helped): {len(fixed)}"
        + (f": {', '.join(fixed)}" if fixed else "")
    )
    log(
        f"FinSQL candidates wrong where the raw prediction was right (pipeline lost it): {len(broken)}"
    )
    for b in broken:
        log(f"   {b}")

    misses = [r for r in results if r.get("miss_reason")]
    log(f"vote wrong while some model was right: {len(misses)}")
    for r in misses:
        right = [k for k, v in r["models"].items() if v["match"]]
        log(
            f"   q{r['question_id']} ({len(right)} right: {','.join(right)[:80]}): {r['miss_reason']}"
        )
    if args.abstain:
        log("")
        for line in abstain_report(results, [float(x) for x in args.abstain.split(",") if x]):
            log(line)
    log(f"run time: {time.perf_counter() - t_run:.0f} s")

    for cx in (conn, score_conn):
        cx.close()
    return {
        "db": db,
        "models": names,
        "n": n,
        "per_model_ex": per_model,
        "ex_vote": ex_vote,
        "ex_offline_majority": C.pct(n_major, n),
        "ex_oracle": C.pct(n_oracle, n),
        "ex_offline_majority_cleaned": C.pct(n_major_cl, n),
        "ex_by_config": cfg_ex,
        "main_config": main_cfg,
        "overhead_ms_p50": p50,
        "overhead_ms_p90": p90,
        "nl2sql_errors": n_err,
        "overheads": ovs,
        "questions": results,
    }


def aggregate(per_db: dict[str, dict]) -> dict:
    """Figures over every question of every database run (each question counts once).

    Args:
        per_db: ``run_database``'s result per database name.

    Returns:
        ``{"n", "ex_vote", "ex_best_single", "best_single", "per_model_ex",
        "per_model_ex_in_nl2sql", "best_single_in_nl2sql", "ex_best_single_in_nl2sql",
        "ex_offline_majority", "ex_offline_majority_cleaned", "ex_oracle", "ex_by_config",
        "overhead_ms_p50"}``, EX in % of ``n``.
    """
    qs = [q for d in per_db.values() for q in d["questions"]]
    n = len(qs)
    models = list(dict.fromkeys(m for d in per_db.values() for m in d["models"]))
    per_model = {
        m: C.pct(sum(1 for q in qs if q.get("models", {}).get(m, {}).get("match")), n)
        for m in models
    }
    best = max(per_model, key=lambda k: per_model[k]) if per_model else None
    in_pipeline = {
        m: C.pct(
            sum(
                1
                for q in qs
                for c in (q.get("nl2sql") or {}).get("candidates") or []
                if c.get("source") == f"finsql:{m}" and c.get("match")
            ),
            n,
        )
        for m in models
    }
    best_in = max(in_pipeline, key=lambda k: in_pipeline[k]) if in_pipeline else None
    cfgs = list(dict.fromkeys(c for d in per_db.values() for c in d["ex_by_config"]))
    ovs = [o for d in per_db.values() for o in d.get("overheads") or []]
    return {
        "n": n,
        "ex_vote": C.pct(sum(1 for q in qs if (q.get("nl2sql") or {}).get("match")), n),
        "ex_vote_official": C.pct(
            sum(1 for q in qs if (q.get("nl2sql") or {}).get("match_official")), n
        ),
        "best_single": best,
        "ex_best_single": per_model[best] if best else 0.0,
        "per_model_ex": per_model,
        "per_model_ex_in_nl2sql": in_pipeline,
        "best_single_in_nl2sql": best_in,
        "ex_best_single_in_nl2sql": in_pipeline[best_in] if best_in else 0.0,
        "ex_offline_majority": C.pct(
            sum(1 for q in qs if (q.get("offline_majority") or {}).get("match")), n
        ),
        "ex_offline_majority_cleaned": C.pct(
            sum(1 for q in qs if (q.get("offline_majority_cleaned") or {}).get("match")), n
        ),
        "ex_oracle": C.pct(
            sum(1 for q in qs if any(v.get("match") for v in q.get("models", {}).values())), n
        ),
        "ex_by_config": {
            c: C.pct(sum(1 for q in qs if (q.get("configs", {}).get(c) or {}).get("match")), n)
            for c in cfgs
        },
        "overhead_ms_p50": C.percentile(ovs, 50),
    }


def print_aggregate(per_db: dict[str, dict], agg: dict) -> None:
    """Print one line per database and the aggregate figures (EX in %)."""
    log("")
    log(f"=== {len(per_db)} databases, {agg['n']} questions, EX in % ===")
    log(
        f"{'database':<24} {'n':>4} {'vote':>6} {'maj raw':>8} {'maj clean':>9} {'best single':>12} {'oracle':>7}"
    )
    for db, d in per_db.items():
        best = (
            max(d["per_model_ex"], key=lambda k: d["per_model_ex"][k]) if d["per_model_ex"] else ""
        )
        log(
            f"{db:<24} {d['n']:>4} {d['ex_vote']:>6.1f} {d['ex_offline_majority']:>8.1f} "
            f"{d['ex_offline_majority_cleaned']:>9.1f} {d['per_model_ex'].get(best, 0.0):>6.1f} {best[:22]:<22} "
            f"{d['ex_oracle']:>7.1f}"
        )
    log(
        f"{'ALL':<24} {agg['n']:>4} {agg['ex_vote']:>6.1f} {agg['ex_offline_majority']:>8.1f} "
        f"{agg['ex_offline_majority_cleaned']:>9.1f} {agg['ex_best_single']:>6.1f} {str(agg['best_single'])[:22]:<22} "
        f"{agg['ex_oracle']:>7.1f}"
    )
    log(
        f"best single model inside nl2sql (its FinSQL candidate as executed): "
        f"{agg['best_single_in_nl2sql']} {agg['ex_best_single_in_nl2sql']:.1f}"
    )
    log(
        "per model over all questions (raw / inside nl2sql): "
        + ", ".join(
            f"{k} {v:.1f}/{agg['per_model_ex_in_nl2sql'].get(k, 0.0):.1f}"
            for k, v in agg["per_model_ex"].items()
        )
    )
    log(
        "per configuration over all questions: "
        + ", ".join(f"{k} {v:.1f}" for k, v in agg["ex_by_config"].items())
    )


if __name__ == "__main__":
    sys.exit(main())
