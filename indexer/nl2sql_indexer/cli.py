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


def index_database(dsn: str, schemas: list[str] | None, force: bool, progress: bool = True) -> dict:
    """Index one database through the server's fast path, with a values/s progress bar.

    Args:
        dsn: libpq connection string of the database.
        schemas: schemas to index; None uses the database's setting ``schemas``.
        force: re-read every table, not only those whose state changed.
        progress: show the progress bar (on stderr).

    Returns:
        The summed counts (as ``nl2sql.reindex()`` returns them), plus ``values_per_s`` (new
        values embedded per second of indexing).

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
        bar = _progress_bar(conn, disable=not progress)
        results = [
            {"table": f"{s}.{t}", "skipped": True} for s, t, changed in tables if not changed
        ]
        for i, (s, t) in enumerate(todo, 1):
            bar.set_postfix_str(f"table {i}/{len(todo)} {s}.{t}", refresh=False)
            results.append(
                conn.execute("SELECT nl2sql._reindex_table(%s, %s, %s)", (s, t, force)).fetchone()[
                    0
                ]
            )
        bar.close()
        out = sum_table_counts(results)
        fin = conn.execute(
            "SELECT nl2sql._reindex_finish(%s, %s, %s)",
            (schemas, [f"{s}.{t}" for s, t, _ in tables], out["tables_indexed"] > 0),
        ).fetchone()[0]
        out.update(fin)
        secs = time.perf_counter() - t0
        out["seconds"] = round(secs, 3)
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
    args = ap.parse_args(argv)
    rc = 0
    for dsn in args.dsn:
        try:
            counts = index_database(dsn, args.schemas, args.force, progress=not args.quiet)
            print(json.dumps({"dsn": dsn, **counts}))
        except Exception as e:  # noqa: BLE001 - one database's failure is reported, the others go on
            print(f"nl2sql-index: {dsn}: {e}", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
