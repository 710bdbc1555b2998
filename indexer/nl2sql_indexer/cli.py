"""``nl2sql-index``: run nl2sql's indexing from outside the database, with a progress bar.

Connects with psycopg 3 and drives the same server-side work as ``SELECT nl2sql.reindex()``:
``nl2sql._reindex_changed`` (change detection from the catalog and statistics, no user data
read), ``nl2sql._reindex_table`` for each changed table (each commits on its own) and
``nl2sql._reindex_finish``. The progress bar counts cell values written and shows values/s;
the server reports them while a table is indexed (NOTICEs, only in a session that sets
``nl2sql.progress``). Several DSNs may be given (one index per database).
"""

from __future__ import annotations

import argparse
import json
import sys

from tqdm import tqdm

from nl2sql.client import _jobs as jobs_
from nl2sql.ops.indexer import sum_table_counts

PROGRESS = "nl2sql-progress "


def _progress_bar(conn, disable: bool) -> tqdm:
    """A tqdm bar of cell values written (values/s), fed by the server's progress notices."""
    bar = tqdm(desc="values", unit="value", unit_scale=True, disable=disable)
    seen: dict[str, int] = {}

    def on_notice(diag) -> None:
        msg = diag.message_primary or ""
        if msg.startswith(PROGRESS):
            p = json.loads(msg[len(PROGRESS) :])
            bar.update(p["values"] - seen.get(p["table"], 0))
            seen[p["table"]] = p["values"]

    conn.add_notice_handler(on_notice)
    return bar


def _index_here(conn, todo: list[tuple[str, str]], force: bool, progress: bool) -> list[dict]:
    """Index ``todo``'s tables one after the other over ``conn`` (a values/s progress bar)."""
    bar = _progress_bar(conn, disable=not progress)
    results = []
    for i, (s, t) in enumerate(todo, 1):
        bar.set_postfix_str(f"table {i}/{len(todo)} {s}.{t}", refresh=False)
        results.append(
            conn.execute("SELECT nl2sql._reindex_table(%s, %s, %s)", (s, t, force)).fetchone()[0]
        )
    bar.close()
    return results


def _index_by_workers(
    conn, dsn: str, todo: list[tuple[str, str]], force: bool, jobs: int, progress: bool
) -> list[dict]:
    """Queue ``todo``'s tables as one run and index them by ``jobs`` worker processes (each
    a backend embedding), then wait for the run's tables held by ``--join`` workers elsewhere."""
    run = conn.execute(  # a large table in one part per worker (reindex_part_rows)
        "SELECT nl2sql._reindex_enqueue(%s::text[], %s, %s::int)",
        ([f"{s}.{t}" for s, t in todo], force, jobs),
    ).fetchone()[0]
    bar = tqdm(total=len(todo), desc="tables", unit="table", disable=not progress)

    def pending() -> int:
        return conn.execute("SELECT nl2sql._reindex_pending(%s)", (run,)).fetchone()[0]

    def tick() -> None:
        bar.update(len(todo) - pending() - bar.n)

    out = jobs_.run_pool(jobs_.server_worker, dsn, run, jobs, tick)
    out += jobs_.wait_for_others(
        pending, lambda: jobs_.server_worker(dsn, run, jobs_.worker_name(jobs))
    )
    tick()
    bar.close()
    return out


def index_database(
    dsn: str, schemas: list[str] | None, force: bool, progress: bool = True, jobs: int = 1
) -> dict:
    """Index one database through the server's fast path, with a values/s progress bar.

    Args:
        dsn: libpq connection string of the database.
        schemas: schemas to index; None uses the database's setting ``schemas``.
        force: re-read every table, not only those whose state changed.
        progress: show the progress bar (on stderr).
        jobs: worker processes (each a database backend that reads and embeds); above 1 the
            changed tables are queued (``nl2sql._reindex_enqueue``) and claimed by the workers.

    Returns:
        The summed counts (as ``nl2sql.reindex()`` returns them), plus ``values_per_s`` (new
        values embedded per second of indexing), ``tables_s`` (seconds until every table was
        written) and ``finish_s`` (seconds of ``_reindex_finish``: the HNSW build, ANALYZE).

    Raises:
        RuntimeError: the extension is not installed in that database (the message says to run
            CREATE EXTENSION nl2sql CASCADE).
        psycopg.Error: the server refused a step (e.g. no privilege to reindex).
    """
    import time

    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        has = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'nl2sql'").fetchone()
        if not has:
            raise RuntimeError(
                f"{dsn}: extension nl2sql is not installed; run "
                f"CREATE EXTENSION nl2sql CASCADE in that database first"
            )
        t0 = time.perf_counter()
        conn.execute("SET nl2sql.progress = on")
        tables = conn.execute(
            "SELECT schema_name, table_name, changed FROM nl2sql._reindex_changed(%s, %s)",
            (schemas, force),
        ).fetchall()
        todo = [(s, t) for s, t, changed in tables if changed]
        if todo:  # a first index: the vector index is built once at the end (_reindex_finish)
            conn.execute("SELECT nl2sql._reindex_begin()")
        results = [
            {"table": f"{s}.{t}", "skipped": True} for s, t, changed in tables if not changed
        ]
        if jobs > 1 and todo:
            results += _index_by_workers(conn, dsn, todo, force, jobs, progress)
        else:
            results += _index_here(conn, todo, force, progress)
        out = sum_table_counts(results)
        out["tables_s"] = round(time.perf_counter() - t0, 3)
        fin = conn.execute(
            "SELECT nl2sql._reindex_finish(%s, %s, %s)",
            (schemas, [f"{s}.{t}" for s, t, _ in tables], out["tables_indexed"] > 0),
        ).fetchone()[0]
        out.update(fin)
        secs = time.perf_counter() - t0
        out["seconds"] = round(secs, 3)
        out["finish_s"] = round(secs - out["tables_s"], 3)  # the HNSW build, tidy-up, ANALYZE
        out["values_per_s"] = round(out["values_embedded"] / secs, 1) if secs > 0 else None
        return out


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit code (1 when any database failed)."""
    ap = argparse.ArgumentParser(
        prog="nl2sql-index",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "dsn", nargs="+", help="libpq connection string(s), e.g. 'dbname=shop host=...'"
    )
    ap.add_argument(
        "--schema",
        action="append",
        dest="schemas",
        help="schema to index (repeatable; default: the setting 'schemas')",
    )
    ap.add_argument("--force", action="store_true", help="redo every table, not only changed ones")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    ap.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="worker processes claiming the changed tables from a queue in the database "
        "(default 1: one after the other)",
    )
    ap.add_argument(
        "--join",
        action="store_true",
        help="only work on the tables queued by a reindex run elsewhere (--jobs N there), "
        "with --jobs processes, then exit; that run builds the vector index at its end",
    )
    args = ap.parse_args(argv)
    rc = 0
    for dsn in args.dsn:
        try:
            if args.join:
                done = jobs_.run_pool(jobs_.server_worker, dsn, None, max(1, args.jobs))
                print(json.dumps({"dsn": dsn, **sum_table_counts(done)}))
                continue
            counts = index_database(
                dsn, args.schemas, args.force, progress=not args.quiet, jobs=max(1, args.jobs)
            )
            print(json.dumps({"dsn": dsn, **counts}))
        except Exception as e:  # noqa: BLE001 - one database's failure is reported, the others go on
            print(f"nl2sql-index: {dsn}: {e}", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
