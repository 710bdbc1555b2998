#!/usr/bin/env python3
"""What row-level security of an opted-in table costs a question (docs/safety.md "Row-level
security"): ``nl2sql.retrieve(question)`` over a table with a policy, as a role the policy
applies to (each sample value and matched value checked with ``EXISTS`` as the role) and as the
superuser (no check), p50 and p90 of the wall time per call.

The database ``nl2sql_rls_bench`` (built once in the bench cluster, kept): ``account`` with
``--rows`` rows (default 200,000), ``customer`` (``--customers`` distinct two-word names,
default 20,000, B-tree indexed), ``region`` (12 values, not indexed) and ``owner`` (one of 50
roles); the policy ``owner = current_user`` shows the bench role 1 row in 50. The table is opted
in (``set_value_policy('account', true)``) and indexed.

Usage: python bench/row_security.py [--rows 200000] [--customers 20000] [--questions 30]
                                    [--datadir DIR]
Last line: ``RESULT rls_retrieve_ms_p50=… bypass_retrieve_ms_p50=… overhead_ms_p50=…``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common as C

DB = "nl2sql_rls_bench"
ROLE = "nl2sql_rls_bench_role"
WORDS = [
    "amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "harbor", "iris", "juniper",
    "kestrel", "lumen", "maple", "nova", "onyx", "pine", "quartz", "raven", "sable", "tundra",
]  # fmt: skip


def build(conn, rows: int, customers: int) -> None:
    """Create and fill ``account`` (see the module docstring), the policy and the role."""
    if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone():
        conn.execute(f"CREATE ROLE {ROLE} LOGIN")
    words = "ARRAY[" + ", ".join(f"'{w}'" for w in WORDS) + "]"
    conn.execute(
        f"""
        DROP TABLE IF EXISTS account;
        CREATE TABLE account (account_id int PRIMARY KEY, owner text, region text, customer text);
        INSERT INTO account
        SELECT g,
               CASE WHEN g % 50 = 0 THEN '{ROLE}' ELSE 'owner_' || (g % 50) END,
               'region ' || (g % 12),
               initcap(({words})[1 + (g % {customers}) % 20]) || ' '
                 || initcap(({words})[1 + ((g % {customers}) / 20) % 20]) || ' '
                 || ((g % {customers}) / 400)
        FROM generate_series(1, {rows}) g;
        CREATE INDEX ON account (customer);
        ALTER TABLE account ENABLE ROW LEVEL SECURITY;
        CREATE POLICY own_rows ON account USING (owner = current_user);
        GRANT SELECT ON account TO {ROLE};
        ANALYZE account;
        """
    )


def timed(conn, questions: list[str]) -> list[float]:
    """Wall milliseconds of ``nl2sql.retrieve`` per question."""
    out = []
    for q in questions:
        t = time.perf_counter()
        conn.execute("SELECT nl2sql.retrieve(%s)", (q,)).fetchone()
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--customers", type=int, default=20_000)
    ap.add_argument("--questions", type=int, default=30)
    ap.add_argument("--datadir", type=Path)
    a = ap.parse_args()
    cluster = C.start_cluster(a.datadir)
    cluster.create_database(DB, drop=True)
    conn = cluster.connect(DB)
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    t = time.perf_counter()
    build(conn, a.rows, a.customers)
    conn.execute("SELECT nl2sql.set_value_policy('account', true)")
    conn.execute("SELECT nl2sql.reindex()")
    print(f"built and indexed in {time.perf_counter() - t:.1f} s", flush=True)
    names = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT customer FROM account ORDER BY customer LIMIT %s", (a.questions * 2,)
        )
    ]
    questions = [f"What did customer {n} buy in region 3?" for n in names]
    role = cluster.connect(DB, user=ROLE)
    for c in (conn, role):  # warm: the embedder, plans, the pages read
        timed(c, questions[a.questions :])
    as_role = timed(role, questions[: a.questions])
    bypass = timed(conn, questions[: a.questions])
    p50 = statistics.median
    p90 = lambda xs: sorted(xs)[int(0.9 * (len(xs) - 1))]  # noqa: E731
    print(f"as the role (policy applies): p50 {p50(as_role):.1f} ms, p90 {p90(as_role):.1f} ms")
    print(f"as the superuser (bypasses):  p50 {p50(bypass):.1f} ms, p90 {p90(bypass):.1f} ms")
    print(
        f"RESULT rls_retrieve_ms_p50={p50(as_role):.1f} bypass_retrieve_ms_p50={p50(bypass):.1f} "
        f"overhead_ms_p50={p50(as_role) - p50(bypass):.1f}"
    )


if __name__ == "__main__":
    main()
