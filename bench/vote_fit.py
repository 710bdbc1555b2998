#!/usr/bin/env python3
"""The vote's rules compared on a replay's candidates, and its three parameters fitted
leave-one-database-out: read from ``bench/replay.py --json`` outputs (one per database, or an
``--db all`` one), with no pipeline and no database.

Each question's candidates are the pipeline's (cleaned, aligned, repaired, executed) as the
replay recorded them, each with its verdict against the gold (``match``) and its ``answer``
(``nl2sql.answers.describe``). The vote is ``nl2sql.selection.multiple_choice.select`` run again
under each rule; the chosen group's representative scores as the replay scored it.

Rules reported per database (EX in %):

* ``time``: plain majority by result signature, every executed result voting, ties broken by
  execution time alone (the fastest group);
* ``before``: the vote before issue 42 (``select`` without a rule: empty results set aside
  while others returned rows, ties within the same speed to the highest-priority model);
* ``equal``: §1's equality alone (``VoteRule(0, 0, 2)``: answers equal whatever their column
  order, number spelling, text case and padding vote together; nothing else);
* ``fitted``: the parameters chosen on the other databases (leave-one-database-out);
* ``defaults``: ``VoteRule()`` as the extension ships it.

The grid (``--grid``): ``degenerate_weight`` × ``near_share`` × ``contender_ratio``; on each
fold the grid point with the most right answers on the other databases wins (ties: the first
in grid order, the smallest values first). A ``contender_ratio`` above 1 turns the weak-consensus
evidence off.

Usage: python bench/vote_fit.py REPLAY_JSON [REPLAY_JSON ...] [--config recommended]
Last line: ``RESULT ex_time=… ex_before=… ex_equal=… ex_fitted=… ex_defaults=…``
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

# this checkout's server package (no database: the vote is plain Python)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "py_udf"))

from nl2sql.core.types import Candidate, Status
from nl2sql.selection.consensus import VoteRule
from nl2sql.selection.multiple_choice import select

GRID = "0.1,0.15,0.25,0.33,0.5,0.75,1;0,0.25,0.5,1;0.5,0.75,1,2"
EQUAL_ONLY = VoteRule(0.0, 0.0, 2.0)


def questions(paths: list[Path], config: str) -> dict[str, list[dict]]:
    """Database -> its questions, each ``{"question", "models", "cands"}`` (``cands``: the
    configuration's candidates as the replay recorded them), from replay ``--json`` files."""
    out: dict[str, list[dict]] = {}
    for p in paths:
        d = json.loads(p.read_text())
        per_db = d.get("databases") or {d.get("db", p.stem): d}
        for db, dd in per_db.items():
            for q in dd.get("questions", []):
                run = (q.get("configs") or {}).get(config)
                if run is None or q.get("bench_error"):
                    continue
                models = list(q.get("models") or {})
                cands = run.get("candidates") or []
                out.setdefault(db, []).append(
                    {"question": q["question"], "models": models, "cands": cands}
                )
    return out


def candidates(recorded: list[dict]) -> tuple[list[Candidate], dict[str, bool]]:
    """The recorded candidates as ``Candidate`` objects, and source -> right or not."""
    cands, right = [], {}
    for c in recorded:
        cands.append(
            Candidate(
                source=c["source"],
                model=c["model"],
                raw_text=None,
                sql=c.get("sql"),
                status=Status(c["status"]),
                result_hash=c.get("result_hash"),
                row_count=c.get("row_count"),
                exec_ms=c.get("exec_ms"),
                order_hash=c.get("order_hash"),
                answer=c.get("answer"),
            )
        )
        right[c["source"]] = bool(c.get("match"))
    return cands, right


def by_time(cands: list[Candidate], right: dict[str, bool]) -> bool:
    """Plain majority by ``result_hash``, every executed result voting, ties to the fastest."""
    groups: dict[str, list[Candidate]] = {}
    for c in cands:
        if c.status == Status.OK and c.result_hash is not None:
            groups.setdefault(c.result_hash, []).append(c)
    if not groups:
        return False

    def ms(c: Candidate) -> float:
        return c.exec_ms if c.exec_ms is not None else float("inf")

    win = min(groups.values(), key=lambda ms_: (-len(ms_), min(ms(c) for c in ms_)))
    return right[min(win, key=ms).source]


def chosen_right(q: dict, rule: VoteRule | None) -> bool:
    """Whether the vote under ``rule`` (None: the vote before issue 42) answers rightly."""
    cands, right = candidates(q["cands"])
    v = select(cands, 0.2, "fastest", q["models"], None, False, rule, q["question"])
    if not v.groups:
        return False
    return right[v.groups[0]["fastest_source"]]


def grid(text: str) -> list[VoteRule]:
    """The grid points of ``--grid`` (three ``;``-separated lists of values)."""
    axes = [[float(x) for x in part.split(",")] for part in text.split(";")]
    if len(axes) != 3:
        raise SystemExit("--grid: three ;-separated lists (degenerate, near, contender)")
    return [VoteRule(*p) for p in itertools.product(*axes)]


def fit(per_db: dict[str, list[dict]], rules: list[VoteRule]) -> tuple[dict, dict]:
    """Right answers per database per grid point, and per database the rule fitted on the
    others (leave-one-database-out)."""
    right = {db: [sum(chosen_right(q, r) for q in qs) for r in rules] for db, qs in per_db.items()}
    chosen = {}
    for db in per_db:
        others = [sum(right[o][i] for o in per_db if o != db) for i in range(len(rules))]
        best = max(range(len(rules)), key=lambda i: (others[i], -i))
        chosen[db] = best
    return right, chosen


def pct(a: int, n: int) -> float:
    return 100.0 * a / n if n else 0.0


def report(per_db: dict[str, list[dict]], rules: list[VoteRule]) -> dict[str, int]:
    """Print the per-database table and the fitted rule per fold; return the totals."""
    right, chosen = fit(per_db, rules)
    default_i = rules.index(VoteRule()) if VoteRule() in rules else None
    cols = ("time", "before", "equal", "fitted", "defaults")
    tot = dict.fromkeys(cols, 0)
    print(
        f"{'database':<24}{'n':>5}" + "".join(f"{c:>10}" for c in cols) + "  fitted on the others"
    )
    for db, qs in sorted(per_db.items()):
        n = len(qs)
        row = {
            "time": sum(by_time(*candidates(q["cands"])) for q in qs),
            "before": sum(chosen_right(q, None) for q in qs),
            "equal": sum(chosen_right(q, EQUAL_ONLY) for q in qs),
            "fitted": right[db][chosen[db]],
            "defaults": right[db][default_i]
            if default_i is not None
            else sum(chosen_right(q, VoteRule()) for q in qs),
        }
        for c in cols:
            tot[c] += row[c]
        r = rules[chosen[db]]
        print(
            f"{db:<24}{n:>5}"
            + "".join(f"{pct(row[c], n):>10.1f}" for c in cols)
            + f"  ({r.degenerate_weight:g}, {r.near_share:g}, {r.contender_ratio:g})"
        )
    n = sum(len(qs) for qs in per_db.values())
    print(f"{'ALL':<24}{n:>5}" + "".join(f"{pct(tot[c], n):>10.1f}" for c in cols))
    return {**tot, "n": n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("replays", nargs="+", type=Path, help="bench/replay.py --json outputs")
    ap.add_argument("--config", default="recommended", help="the replay configuration read")
    ap.add_argument("--grid", default=GRID, help=f"degenerate;near;contender (default {GRID})")
    args = ap.parse_args(argv)
    per_db = questions(args.replays, args.config)
    if not per_db:
        print("ERROR: no question with candidates of that configuration")
        return 2
    rules = grid(args.grid)
    tot = report(per_db, rules)
    n = tot["n"]
    print(
        "RESULT "
        + " ".join(f"ex_{c}={pct(tot[c], n):.1f}" for c in ("time", "before", "equal", "fitted"))
        + f" ex_defaults={pct(tot['defaults'], n):.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
