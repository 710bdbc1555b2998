#!/usr/bin/env python3
"""Vote misses of a replay: the questions ``bench/replay.py`` got wrong while some candidate
was right, read from its ``--json`` details, each with the groups as the vote saw them.

What the selection rules of ``selection.py`` (empty results set aside, ties, thresholds) and the
SQLite rules of ``generation/_sqlite/rules.py`` were built from: run it over every database of a data set,
never tune to one question.

Each miss is classed by what stood between the vote and a right candidate:

* ``tie``: the winning group and a right group were equally large (the tie rule chose);
* ``smaller``: the right group was smaller than the winner;
* ``dropped``: the right group fell below the confidence threshold;
* ``empty``: the right result was empty and set aside because other candidates returned rows;
* ``failed``: every right candidate was refused, failed or timed out in the pipeline (yet its
  offline execution matched: cleaning, not the vote, lost it).

Usage: python bench/misses.py REPLAY_JSON [REPLAY_JSON ...] [--config recommended] [--quiet]
Last line: ``RESULT misses=<n> tie=<n> smaller=<n> dropped=<n> empty=<n> failed=<n>``
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def questions(path: Path) -> list[tuple[str, dict]]:
    """The (database, question) pairs of one replay ``--json`` file (one database or ``all``)."""
    d = json.loads(path.read_text())
    per_db = d.get("databases") or {d.get("db", path.stem): d}
    return [(db, q) for db, dd in per_db.items() for q in dd.get("questions", [])]


def classify(run: dict) -> str | None:
    """The class of a miss (module docstring), or None when the vote was right or no
    candidate was."""
    cands = run.get("candidates") or []
    if run.get("match") or not any(c.get("match") for c in cands):
        return None
    ok = [c for c in cands if c.get("status") == "ok" and c.get("match")]
    if not ok:
        return "failed"
    if str((run.get("vote") or {}).get("reason", "")).startswith("tie"):
        return "tie"
    if all(c.get("row_count") == 0 for c in ok) and "set aside" in str(
        (run.get("vote") or {}).get("reason", "")
    ):
        return "empty"
    right = {c.get("source") for c in ok}
    if any(right & set(g.get("sources") or []) for g in run.get("dropped") or []):
        return "dropped"
    return "smaller"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("json", type=Path, nargs="+", help="bench/replay.py --json outputs")
    ap.add_argument("--config", default="recommended")
    ap.add_argument("--quiet", action="store_true", help="counts only")
    args = ap.parse_args(argv)
    counts: Counter = Counter()
    for path in args.json:
        for db, q in questions(path):
            run = (q.get("configs") or {}).get(args.config) or {}
            kind = classify(run)
            if kind is None:
                continue
            counts[kind] += 1
            if args.quiet:
                continue
            print(f"--- {db} q{q.get('question_id')} [{kind}] {q.get('question')}")
            print(f"    vote: {(run.get('vote') or {}).get('reason')}")
            groups: dict = {}
            for c in run.get("candidates") or []:
                groups.setdefault((c.get("status"), c.get("result_hash")), []).append(c)
            for (status, _), cs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
                c = cs[0]
                print(
                    f"    [{len(cs)}] {'RIGHT' if c.get('match') else 'wrong'} {status} "
                    f"rows={c.get('row_count')} {[x.get('model') for x in cs]}"
                )
                print(f"        {(c.get('sql') or c.get('reason') or '')[:200]}")
    print(
        f"RESULT misses={sum(counts.values())} "
        + " ".join(f"{k}={counts[k]}" for k in ("tie", "smaller", "dropped", "empty", "failed"))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
