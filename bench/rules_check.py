#!/usr/bin/env python3
"""What each repair rule does to queries known right and to real systems' answers: every rule of
``nl2sql.rules.RULES`` run over all of Spider dev's gold queries and the SQL that 13 real systems
wrote for the same questions (``predictions_sqlite`` in ``bench-data/spider_dev``, cleaned as the
pipeline cleans a SQLite-dialect model's answer), no model called.

Each query is executed first (as ``bench/common.py`` scores: a SELECT-only role, read-only,
rolled back) to know its state — ``failed`` (with its SQLSTATE), ``empty`` or ``rows`` — and each
rule that runs in that state is asked for its outcome, as repair asks it. Per rule:

* ``gold``: gold queries it rewrites or flags. A gold query is right by definition: a rule that
  touches one would rewrite or question a right answer (issue 68: such a rule goes);
* ``right`` / ``wrong``: the systems' answers it touches that are right / wrong (Spider's
  official rule: columns in any order);
* ``fixed`` / ``broke``: its rewrites executed and scored: a wrong answer made right / a right
  one made wrong.

A rule worth keeping touches no gold query and touches wrong answers far more than right ones.
The last line is ``RESULT rules=… gold_touched=… fixed=… broke=…`` (totals over the rules).

Usage: bash scripts/dev_locked.sh /opt/nl2sql/venv/bin/python bench/rules_check.py \
    --data ../shared/bench-data [--dbs car_1,...] [--json OUT.json] [--datadir DIR] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C
from nl2sql.client._plpy import Plpy
from nl2sql.core.catalog import load_schema
from nl2sql.core.errors import CandidateRefused
from nl2sql.core.sqlcheck import parse_one
from nl2sql.core.types import Schema
from nl2sql.generation.cleaning import clean
from nl2sql.rules import RULES, Context

COUNTS = ("gold", "right", "wrong", "fixed", "broke")


@dataclass
class Tally:
    """One rule's counts (``COUNTS``) and a few examples of each."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    examples: dict[str, list[dict]] = field(default_factory=dict)

    def add(self, kind: str, example: dict) -> None:
        self.counts[kind] += 1
        shown = self.examples.setdefault(kind, [])
        if len(shown) < 5:
            shown.append(example)


def state_of(res: C.ExecResult) -> str:
    """``failed``, ``empty`` or ``rows``: the candidate state a rule runs in."""
    if not res.ok:
        return "failed"
    return "rows" if res.rows else "empty"


def outcomes(sql: str, res: C.ExecResult, schema: Schema, question: str) -> list:
    """Every rule's outcome for one executed query (those that run in its state and say
    something), in table order."""
    try:
        tree = parse_one(sql)
    except CandidateRefused:
        tree = None
    ctx = Context(
        sql=sql, schema=schema, question=question, sqlstate=res.sqlstate, state=state_of(res)
    )
    out = []
    for rule in RULES:
        if ctx.state in rule.states:
            got = rule.run(tree.copy() if tree is not None else None, ctx)
            if got is not None:
                out.append(got)
    return out


def answers(row: dict, schema: Schema) -> dict[str, str]:
    """The systems' answers to one question, cleaned from SQLite's dialect as the pipeline
    cleans them (answers cleaning refuses are left out)."""
    out = {}
    for system, text in (row.get("predictions_sqlite") or {}).items():
        sql = clean(text, "sqlite", schema).sql if text else None
        if sql:
            out[system] = sql
    return out


def check_db(cluster, data: Path, db: str, tallies: dict[str, Tally]) -> int:
    """Run every rule over one database's gold queries and systems' answers; returns the
    number of queries read."""
    C.load_dump(cluster, db, data / "pg_dumps" / f"{db}.sql")
    conn = cluster.connect(db)
    schemas = list(C.user_schemas(conn))
    C.ensure_reader_role(conn, schemas)
    conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
    conn.execute("SELECT nl2sql.set_setting('schemas', %s)", (",".join(schemas),))
    conn.execute("SELECT nl2sql.reindex()")
    conn.execute("SET search_path TO " + ", ".join(schemas))
    schema = load_schema(Plpy(conn), schemas)
    rows = [json.loads(x) for x in (data / f"bird_minidev_{db}.jsonl").open()]
    read, cache = 0, {}
    for r in rows:
        gold, q = r["gold_sql"], r["question"]
        g = C.score(conn, gold, gold, cache=cache)
        for o in outcomes(gold, g.gold, schema, q):
            tallies[o.rule].add("gold", {"q": q, "sql": gold, "out": o.sql or o.sentence})
        for system, sql in answers(r, schema).items():
            read += 1
            m = C.score(conn, gold, sql, cache=cache)
            for o in outcomes(sql, m.pred, schema, q):
                t = tallies[o.rule]
                t.add("right" if m.official else "wrong", {"q": q, "system": system, "sql": sql})
                if o.sql:
                    after = C.score(conn, gold, o.sql, cache=cache).official
                    if after != m.official:
                        t.add("fixed" if after else "broke", {"q": q, "sql": sql, "to": o.sql})
        read += 1
    conn.close()
    return read


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=Path("../shared/bench-data"))
    p.add_argument("--dbs", default="")
    p.add_argument("--json", type=Path)
    p.add_argument("--datadir", type=Path)
    p.add_argument("--smoke", action="store_true", help="one database")
    args = p.parse_args(argv)
    data = args.data / "spider_dev" if (args.data / "spider_dev").is_dir() else args.data
    dbs = (
        args.dbs.split(",")
        if args.dbs
        else sorted(f.stem[len("bird_minidev_") :] for f in data.glob("bird_minidev_*.jsonl"))
    )
    if args.smoke:
        dbs = dbs[:1]
    cluster = C.start_cluster(args.datadir)
    tallies = {rule.name: Tally() for rule in RULES}
    read = sum(check_db(cluster, data, db, tallies) for db in dbs)
    print(f"{'rule':<24}" + "".join(f"{k:>8}" for k in COUNTS))
    for rule in RULES:
        print(f"{rule.name:<24}" + "".join(f"{tallies[rule.name].counts[k]:>8}" for k in COUNTS))
    if args.json:
        args.json.write_text(
            json.dumps({n: t.__dict__ for n, t in tallies.items()}, indent=1, default=str)
        )
    total = {k: sum(t.counts[k] for t in tallies.values()) for k in COUNTS}
    print(
        f"RESULT rules={len(RULES)} queries={read} gold_touched={total['gold']} "
        f"right_touched={total['right']} wrong_touched={total['wrong']} fixed={total['fixed']} "
        f"broke={total['broke']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
