#!/usr/bin/env python3
"""One model round or two (setting ``model_rounds``): EX, wall time and tokens per question on
the replay sets, with models that answer at once or after ``--delay-s`` seconds per call.

No model is called. As in ``bench/replay.py``, each configured model answers with the SQL that
real model RECORDED for the question (BIRD mini-dev ``predictions``; Spider dev systems'
``predictions_sqlite``), served by the scripted loopback server
(``nl2sql_indexer.dev.loopback``), here after ``--delay-s`` seconds per request, as a reasoning
model would take. The answers do not depend on the prompt, so what a narrower FinSQL prompt
(schema linking, DAIL selection) would change in a live model's SQL cannot show here; what can
is the selection around the answers (hardness routing, the PreSQL candidate, repair) and the
time and tokens each mode spends.

For every question, each mode of ``--modes`` (default ``two,one,auto``) is asked in turn through
``nl2sql.explain`` (interleaved, so that a change in the machine's load hits every mode alike),
with the extension's defaults otherwise. Per mode: EX (the chosen SQL scored against the gold
as bench/replay.py scores it), wall time per question as the client sees it (p50 and mean),
model time on the critical path, model requests, prompt and completion tokens per question
(the trace's ``tokens``: the loopback reports ``usage`` counted with cl100k_base), and the share
of questions answered in one round.

Usage: python bench/rounds.py --data DIR --db superhero|all [--models pg|sqlite|all]
       [--first MODEL] [--limit N] [--delay-s 8] [--modes two,one,auto] [--set KEY VALUE]
       [--json OUT]
       python bench/rounds.py --from-json OUT1 OUT2 …   (the tables of earlier runs together)
The last line printed is ``RESULT ex_<mode>=<pct> … wall_s_<mode>=<mean s> …
tokens_<mode>=<mean> …`` over every question of every database run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg

import common as C
import replay as R
from nl2sql_indexer.dev.loopback import LoopbackLLM
from parallel import cpu_reference_ms

MODES = ("two", "one", "auto")


def log(*a: Any) -> None:
    print(*a, flush=True)


def setup_database(args: argparse.Namespace, cluster: Any, db: str) -> tuple[Any, Any, str]:
    """Load ``db``'s dump, install nl2sql, index: (connection, scoring connection, search_path)."""
    rep = C.load_dump(cluster, db, args.data / "pg_dumps" / f"{db}.sql")
    conn = cluster.connect(db)
    schemas = list(C.user_schemas(conn))
    search_path = ", ".join(psycopg.sql.Identifier(s).as_string(conn) for s in schemas)
    if "public" not in schemas:
        search_path += ", public"
    C.ensure_reader_role(conn, schemas)
    conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
    conn.execute("SELECT nl2sql.set_setting('schemas', %s)", (",".join(schemas),))
    conn.execute(f"SET search_path TO {search_path}")
    t0 = time.perf_counter()
    conn.execute("SELECT nl2sql.reindex()")
    log(f"{db}: dump loaded in {rep.seconds:.1f} s, indexed in {time.perf_counter() - t0:.1f} s")
    score_conn = cluster.connect(db)
    score_conn.execute(f"SET search_path TO {search_path}")
    return conn, score_conn, search_path


def critical_path_ms(trace: dict) -> float:
    """Model time on the call's critical path: PreSQL, the slowest FinSQL call, each repair
    round's slowest call, the multiple-choice call (``bench/parallel.py``'s figure)."""
    pre = float(((trace.get("presql") or {}).get("reply") or {}).get("latency_ms") or 0.0)
    fin = [
        float(r.get("latency_ms") or 0) for r in (trace.get("finsql") or {}).get("replies") or []
    ]
    rounds: dict[int, float] = {}
    for c in trace.get("candidates") or []:
        for r in c.get("repairs") or []:
            rounds[r["round"]] = max(rounds.get(r["round"], 0.0), float(r.get("latency_ms") or 0))
    mc = float((((trace.get("multiple_choice") or {}).get("reply")) or {}).get("latency_ms") or 0)
    return pre + (max(fin) if fin else 0.0) + sum(rounds.values()) + mc


def ask(conn, score_conn, row: dict, gold_cache: dict, timeout_ms: int) -> dict:
    """One ``nl2sql.explain`` call: its wall time, rounds, requests, tokens and EX verdict."""
    t0 = time.perf_counter()
    try:
        trace = conn.execute(
            "SELECT nl2sql.explain(%s, %s)", (row["question"], row.get("evidence") or None)
        ).fetchone()[0]
    except psycopg.Error as e:
        return {"wall_ms": (time.perf_counter() - t0) * 1000, "error": str(e)[:200], "match": False}
    wall = (time.perf_counter() - t0) * 1000
    tok = trace.get("tokens") or {}
    chosen = trace.get("sql")
    ordered = C.gold_is_ordered(row["gold_sql"])
    verdict = (
        C.score(
            score_conn, row["gold_sql"], chosen, ordered=ordered, cache=gold_cache,
            timeout_ms=timeout_ms,
        )
        if chosen
        else None
    )  # fmt: skip
    return {
        "wall_ms": wall,
        "match": bool(verdict and verdict.match),
        "rounds": trace.get("rounds"),
        "rounds_reason": trace.get("rounds_reason"),
        "requests": sum(m["calls"] for m in (tok.get("by_model") or {}).values()),
        "prompt_tokens": tok.get("prompt", 0),
        "completion_tokens": tok.get("completion", 0),
        "model_path_ms": critical_path_ms(trace),
        "overhead_ms": (trace.get("timings") or {}).get("overhead_ms"),
        "error": trace.get("error"),
    }


def run_database(args: argparse.Namespace, cluster: Any, db: str, modes: list[str]) -> dict:
    """Ask every question of ``db`` once per mode, interleaved; per-mode figures."""
    rows = R.load_questions(args.data / f"bird_minidev_{db}.jsonl", args.limit)
    models = R.model_list(rows, args.models, args.first)
    conn, score_conn, _ = setup_database(args, cluster, db)
    llm = LoopbackLLM().start()
    out: dict[str, list[dict]] = {m: [] for m in modes}
    try:
        conn.execute("DELETE FROM nl2sql.model")
        for m in models:
            conn.execute(
                "SELECT nl2sql.add_model(%s, %s, base_url => %s, dialect => %s)",
                (m["name"], m["name"], llm.base_url, m["dialect"]),
            )

        def replay(delay_s: float) -> None:
            for m in models:
                answers = {r["question"]: (R.prediction(r, m) or "") for r in rows}
                llm.set_replay(m["name"], answers, delay_s)

        for key, value in args.set:
            conn.execute("SELECT nl2sql.set_setting(%s, %s)", (key, value))
        replay(0.0)  # warm-up, not counted: imports, HTTP clients
        conn.execute("SELECT nl2sql.explain(%s)", (rows[0]["question"],))
        replay(args.delay_s)
        log(
            f"--- {db}: {len(rows)} questions, {len(models)} models replaying recorded SQL "
            f"({', '.join(m['name'] for m in models)}; the first writes the PreSQL), "
            f"{args.delay_s:g} s per request"
        )
        gold_cache: dict = {}
        for i, r in enumerate(rows, 1):
            line = []
            for mode in modes:
                conn.execute("SELECT nl2sql.set_setting('model_rounds', %s)", (mode,))
                res = ask(conn, score_conn, r, gold_cache, args.timeout_ms)
                res["question_id"] = r.get("question_id")
                out[mode].append(res)
                line.append(
                    f"{mode} {'OK ' if res['match'] else 'bad'} {res['wall_ms'] / 1000:5.1f} s "
                    f"r{res.get('rounds')} {res.get('prompt_tokens', 0):>6} tok"
                )
            log(f"[{db} {i:>3}/{len(rows)}] q{r.get('question_id')}: " + " | ".join(line))
    finally:
        llm.stop()
        conn.close()
        score_conn.close()
    return {"db": db, "n": len(rows), "models": [m["name"] for m in models], "modes": out}


def summary(results: list[dict]) -> dict:
    """Per-mode figures over ``results`` (one dict per question)."""
    n = len(results)
    walls = [x["wall_ms"] for x in results]
    mean = lambda k: sum(float(x.get(k) or 0) for x in results) / n if n else 0.0  # noqa: E731
    return {
        "n": n,
        "ex": C.pct(sum(1 for x in results if x["match"]), n),
        "wall_s_p50": (C.percentile(walls, 50) or 0) / 1000,
        "wall_s_mean": mean("wall_ms") / 1000,
        "model_path_s_mean": mean("model_path_ms") / 1000,
        "overhead_ms_p50": C.percentile([float(x.get("overhead_ms") or 0) for x in results], 50),
        "requests": mean("requests"),
        "prompt_tokens": mean("prompt_tokens"),
        "completion_tokens": mean("completion_tokens"),
        "one_round_share": C.pct(sum(1 for x in results if x.get("rounds") == 1), n),
        "errors": sum(1 for x in results if x.get("error")),
    }


def print_table(title: str, per_mode: dict[str, dict]) -> None:
    log(title)
    log(
        f"{'mode':<5} {'n':>4} {'EX %':>6} {'wall p50 s':>10} {'wall mean s':>11} "
        f"{'model path s':>12} {'requests':>8} {'prompt tok':>10} {'compl tok':>9} "
        f"{'1 round %':>9} {'overhead p50 ms':>15} {'errors':>6}"
    )
    for mode, s in per_mode.items():
        log(
            f"{mode:<5} {s['n']:>4} {s['ex']:>6.1f} {s['wall_s_p50']:>10.2f} "
            f"{s['wall_s_mean']:>11.2f} {s['model_path_s_mean']:>12.2f} {s['requests']:>8.1f} "
            f"{s['prompt_tokens']:>10.0f} {s['completion_tokens']:>9.0f} "
            f"{s['one_round_share']:>9.1f} {s['overhead_ms_p50'] or 0:>15.0f} {s['errors']:>6}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, default=None, help="bench-data folder")
    ap.add_argument("--db", default="superhero", help="database name, or 'all' (as replay.py)")
    ap.add_argument("--models", choices=["pg", "sqlite", "all"], default="pg")
    ap.add_argument("--first", default=None, help="the PreSQL writer (as replay.py)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N questions per db")
    ap.add_argument("--delay-s", type=float, default=0.0, help="seconds per model request")
    ap.add_argument("--modes", default=",".join(MODES), help="model_rounds values to compare")
    ap.add_argument("--datadir", type=Path, default=None, help="cluster folder")
    ap.add_argument("--timeout-ms", type=int, default=C.STATEMENT_TIMEOUT_MS)
    ap.add_argument("--json", type=Path, default=None, help="write per-question details here")
    ap.add_argument(
        "--set",
        nargs=2,
        action="append",
        default=[],
        metavar=("KEY", "VALUE"),
        help="a further nl2sql setting for every mode (repeatable)",
    )
    ap.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        default=None,
        help="print the tables and RESULT of earlier --json outputs together (runs nothing; "
        "--data is then ignored)",
    )
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if any(m not in MODES for m in modes):
        ap.error(f"--modes takes {', '.join(MODES)}")
    t_run = time.perf_counter()
    if args.from_json is None and args.data is None:
        ap.error("--data is required (unless --from-json)")
    if args.from_json:
        per_db = [d for p in args.from_json for d in json.loads(p.read_text())]
        modes = [m for m in modes if all(m in d["modes"] for d in per_db)]
    else:
        log(
            "NOTE: every model answer is a real model's RECORDED output, served by the scripted "
            "loopback server after --delay-s seconds; no live model is called, and answers do "
            "not depend on the prompt."
        )
        cluster = C.start_cluster(args.datadir)
        dbs = R.database_names(args.data, args.db)
        per_db = [run_database(args, cluster, db, modes) for db in dbs]
        for d in per_db:
            d["delay_s"], d["settings"] = args.delay_s, dict(args.set)
    log("")
    for d in per_db:
        print_table(
            f"=== {d['db']}: {d['n']} questions, {len(d['models'])} models, "
            f"{d['delay_s']:g} s per request{''.join(f', {k} {v}' for k, v in d['settings'].items())}"
            "; per question ===",
            {m: summary(d["modes"][m]) for m in modes},
        )
    total = {m: summary([x for d in per_db for x in d["modes"][m]]) for m in modes}
    if len(per_db) > 1:
        print_table(f"=== all {len(per_db)} databases; per question ===", total)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(per_db, indent=1, default=str))
    if not args.from_json:
        log(f"run time: {time.perf_counter() - t_run:.0f} s")
        log(
            f"machine speed reference: {cpu_reference_ms():.1f} ms to embed one word in this "
            "process (about 5 ms on an idle machine of this project's kind)"
        )
    log(
        "RESULT "
        + " ".join(f"ex_{m}={total[m]['ex']:.1f}" for m in modes)
        + " "
        + " ".join(f"wall_s_{m}={total[m]['wall_s_mean']:.2f}" for m in modes)
        + " "
        + " ".join(
            f"tokens_{m}={total[m]['prompt_tokens'] + total[m]['completion_tokens']:.0f}"
            for m in modes
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
