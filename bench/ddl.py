"""What the DDL event triggers cost a DDL command (docs/indexing.md, "DDL").

Builds a database of ``--tables`` tables (5 columns each, a foreign key to the previous table,
a few rows), indexes it, then times DDL commands one by one, each in its own transaction, with
the triggers enabled and with them disabled (``ALTER EVENT TRIGGER … DISABLE``): renaming a
column there and back, renaming a table there and back (its index rows, foreign keys pointing
at it and value policy follow), adding and dropping a column, creating and dropping a table.
Prints the median per command for both and the difference, and ends with
``RESULT ddl_ms_p50=… ddl_overhead_ms_p50=… queued=…``.

Run it under ``scripts/dev_locked.sh`` (it uses the bench cluster of bench/common.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "py_udf"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "indexer"))

import common as C

DB = "nl2sql_bench_ddl"
TRIGGERS = ("nl2sql_ddl_command_end", "nl2sql_ddl_sql_drop")


def setup(conn, n: int) -> None:
    """The tables t0..t{n-1}, the extension, one reindex."""
    for i in range(n):
        ref = f", prev int REFERENCES t{i - 1} (id)" if i else ", prev int"
        conn.execute(
            f"CREATE TABLE t{i} (id int PRIMARY KEY, name text, kind text, amount numeric{ref})"
        )
        conn.execute(
            f"INSERT INTO t{i} SELECT g, 'name ' || g, 'kind ' || (g % 3), g, NULL "
            f"FROM generate_series(1, 5) g"
        )
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    conn.execute("SELECT nl2sql.reindex()")


def commands(i: int) -> list[str]:
    """The DDL commands timed on table t{i}, leaving it as it was."""
    return [
        f"ALTER TABLE t{i} RENAME COLUMN kind TO category",
        f"ALTER TABLE t{i} RENAME COLUMN category TO kind",
        f"ALTER TABLE t{i} RENAME TO t{i}_renamed",
        f"ALTER TABLE t{i}_renamed RENAME TO t{i}",
        f"ALTER TABLE t{i} ADD COLUMN note text",
        f"ALTER TABLE t{i} DROP COLUMN note",
        f"CREATE TABLE extra{i} (x int, y text)",
        f"DROP TABLE extra{i}",
    ]


def timed(conn, n: int) -> list[float]:
    """Milliseconds per command over every table."""
    out = []
    for i in range(n):
        for cmd in commands(i):
            t0 = time.perf_counter()
            conn.execute(cmd)
            out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--datadir", type=Path, default=None)
    args = ap.parse_args()
    cluster = C.start_cluster(args.datadir)
    cluster.create_database(DB, drop=True)
    with cluster.connect(DB) as conn:
        t0 = time.perf_counter()
        setup(conn, args.tables)
        print(f"{args.tables} tables created and indexed in {time.perf_counter() - t0:.1f} s")
        conn.execute("DELETE FROM nl2sql.ddl_queue")
        on = timed(conn, args.tables)
        queued = conn.execute("SELECT count(*) FROM nl2sql.ddl_queue").fetchone()[0]
        kept = conn.execute("SELECT count(*) FROM nl2sql.schema_column").fetchone()[0]
        for t in TRIGGERS:
            conn.execute(f"ALTER EVENT TRIGGER {t} DISABLE")
        off = timed(conn, args.tables)
        for t in TRIGGERS:
            conn.execute(f"ALTER EVENT TRIGGER {t} ENABLE")
    p_on, p_off = statistics.median(on), statistics.median(off)
    print(
        f"{len(on)} DDL commands with the triggers: p50 {p_on:.2f} ms, "
        f"p95 {statistics.quantiles(on, n=20)[18]:.2f} ms; queue rows {queued}; "
        f"schema_column rows afterwards {kept} (of {args.tables * 5})"
    )
    print(
        f"{len(off)} DDL commands without: p50 {p_off:.2f} ms, "
        f"p95 {statistics.quantiles(off, n=20)[18]:.2f} ms"
    )
    print(f"RESULT ddl_ms_p50={p_on:.2f} ddl_overhead_ms_p50={p_on - p_off:.2f} queued={queued}")


if __name__ == "__main__":
    main()
