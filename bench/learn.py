#!/usr/bin/env python3
"""Judged answers of a benchmark's questions, for ``nl2sql.calibrate(judged => …)``.

A benchmark knows each question's right answer (the gold SQL). For each question of a
``bird_minidev_<db>.jsonl`` file this scores every model's recorded prediction, cleaned and
transpiled as ``bench/replay.py``'s offline reference does, against the gold by execution, and
groups the predictions by result. One judged question is

    {"question_id": …, "level": <Spider hardness of the PreSQL writer's prediction>,
     "candidates": [{"model": <name as replay.py configures it>, "group": <result id>,
                     "right": <bool>}, …]}

which is the form ``nl2sql.calibrate(judged jsonb)`` takes (py_udf/nl2sql/selection/reliability.py). The
judged questions of one database are cached as JSON (``--cache``, default
``.nl2sql/learn-cache``) keyed by the data file's size and modification time, so a
leave-one-database-out run scores each database once.

Run alone it prints, per database, what leave-one-database-out learning gives offline (the
learned vote over the cleaned predictions; no pipeline): a quick look before a replay.

Usage: python bench/learn.py --data DIR [--models sqlite] [--first dail-sql-gpt4] [--dbs a,b]
Last line: ``RESULT ex_learned_offline=<pct> ex_majority_offline=<pct>``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C
from nl2sql.selection.hardness import hardness
from nl2sql.selection.learned_vote import learn, weighted_choice

DEFAULT_CACHE = Path(__file__).resolve().parent.parent / ".nl2sql" / "learn-cache"


def databases(data: Path) -> list[str]:
    """Names of the databases of ``data`` that have both questions and a dump."""
    out = []
    for q in sorted(data.glob("bird_minidev_*.jsonl")):
        db = q.name[len("bird_minidev_") : -len(".jsonl")]
        if (data / "pg_dumps" / f"{db}.sql").exists():
            out.append(db)
    return out


def _cache_file(cache: Path, data: Path, db: str, models: list[dict]) -> Path:
    q = data / f"bird_minidev_{db}.jsonl"
    st = q.stat()
    key = json.dumps(
        [
            str(q.resolve()),
            st.st_size,
            int(st.st_mtime),
            [(m["name"], m["dialect"]) for m in models],
        ]
    )
    return cache / f"{db}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"


def judged_questions(
    cluster, data: Path, db: str, models: list[dict], cache: Path = DEFAULT_CACHE, log=print
) -> list[dict]:
    """Judged questions of database ``db`` of ``data`` (module docstring), cached.

    ``models``: replay.py's model list (``name``, ``dialect``, ``key``), the PreSQL writer
    first. Loads the dump into ``cluster`` as database ``learn_<db>`` when not cached.
    """
    import replay as R

    cf = _cache_file(cache, data, db, models)
    if cf.exists():
        return json.loads(cf.read_text())
    rows = R.load_questions(data / f"bird_minidev_{db}.jsonl", None)
    rows = [r for r in rows if r.get("gold_ok", True)]
    name = f"learn_{db}".lower()
    C.load_dump(cluster, name, data / "pg_dumps" / f"{db}.sql")
    conn = cluster.connect(name)
    schemas = list(C.user_schemas(conn))
    C.ensure_reader_role(conn, schemas)
    conn.execute("SET search_path TO " + ", ".join(f'"{s}"' for s in schemas))
    cache_g: dict = {}
    out = []
    for r in rows:
        gold = r["gold_sql"]
        ordered = C.gold_is_ordered(gold)
        first = R.cleaned(R.prediction(r, models[0]), models[0]["dialect"])
        cands = []
        for m in models:
            sql = R.cleaned(R.prediction(r, m), m["dialect"])
            if not sql:
                continue
            s = C.score(conn, gold, sql, ordered=ordered, cache=cache_g)
            if not (s.pred and s.pred.ok):
                continue  # a failing candidate does not vote
            key = C.result_key(s.pred.rows, ordered)
            group = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
            cands.append({"model": m["name"], "group": group, "right": bool(s.match)})
        out.append(
            {
                "question_id": r.get("question_id"),
                "level": hardness(first) if first else None,
                "candidates": cands,
            }
        )
    conn.close()
    cache.mkdir(parents=True, exist_ok=True)
    cf.write_text(json.dumps(out))
    log(f"learn: {db}: {len(out)} judged questions scored and cached in {cf}")
    return out


def main(argv: list[str] | None = None) -> int:
    import replay as R

    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--models", choices=["pg", "sqlite", "all"], default="sqlite")
    ap.add_argument("--first", default=None)
    ap.add_argument("--dbs", default=None, help="comma-separated (default: every database)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--datadir", type=Path, default=None)
    args = ap.parse_args(argv)
    dbs = args.dbs.split(",") if args.dbs else databases(args.data)
    cluster = C.start_cluster(args.datadir)
    judged = {}
    for db in dbs:
        rows = R.load_questions(args.data / f"bird_minidev_{db}.jsonl", None)
        models = R.model_list(rows, args.models, args.first)
        judged[db] = judged_questions(cluster, args.data, db, models, args.cache)
    tot = n_l = n_m = 0
    for db in dbs:
        rel = learn([q for d in dbs if d != db for q in judged[d]])
        plain = learn([])
        l_ok = sum(weighted_choice(q, rel) for q in judged[db])
        m_ok = sum(weighted_choice(q, plain) for q in judged[db])
        n = len(judged[db])
        print(
            f"{db}: {n} questions; learned on the other {len(dbs) - 1}: "
            f"{C.pct(l_ok, n):.1f}%  plain majority {C.pct(m_ok, n):.1f}%"
        )
        tot, n_l, n_m = tot + n, n_l + l_ok, n_m + m_ok
    print(
        f"RESULT ex_learned_offline={C.pct(n_l, tot):.1f} ex_majority_offline={C.pct(n_m, tot):.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
