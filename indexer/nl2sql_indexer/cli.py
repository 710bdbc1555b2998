"""``nl2sql-index``: run nl2sql's indexing from outside the database, with a progress bar.

Connects with psycopg 3 and drives the same server-side work as ``SELECT nl2sql.reindex()``,
one table at a time (``nl2sql._reindex_plan`` / ``_reindex_table`` / ``_reindex_finish``), so a
long index shows progress and each table commits on its own. Several DSNs may be given (one
index per database).
"""
from __future__ import annotations

import argparse
import json
import sys

from tqdm import tqdm

from nl2sql.indexer import sum_table_counts


def index_database(dsn: str, schemas: list[str] | None, force: bool, progress: bool = True) -> dict:
    """Index one database; returns the summed counts. Raises psycopg.Error on failure (e.g. the
    extension is not installed: the message says to run CREATE EXTENSION nl2sql CASCADE)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        has = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'nl2sql'").fetchone()
        if not has:
            raise RuntimeError(f"{dsn}: extension nl2sql is not installed; run "
                               f"CREATE EXTENSION nl2sql CASCADE in that database first")
        tables = conn.execute("SELECT schema_name, table_name FROM nl2sql._reindex_plan(%s)",
                              (schemas,)).fetchall()
        out = sum_table_counts(
            conn.execute("SELECT nl2sql._reindex_table(%s, %s, %s)", (s, t, force)).fetchone()[0]
            for s, t in tqdm(tables, desc="tables", unit="table", disable=not progress))
        fin = conn.execute("SELECT nl2sql._reindex_finish(%s, %s, %s)",
                           (schemas, [f"{s}.{t}" for s, t in tables],
                            out["tables_indexed"] > 0)).fetchone()[0]
        out.update(fin)
        return out


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit code (1 when any database failed)."""
    ap = argparse.ArgumentParser(prog="nl2sql-index", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dsn", nargs="+", help="libpq connection string(s), e.g. 'dbname=shop host=...'")
    ap.add_argument("--schema", action="append", dest="schemas",
                    help="schema to index (repeatable; default: the setting 'schemas')")
    ap.add_argument("--force", action="store_true", help="redo every table, not only changed ones")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    rc = 0
    for dsn in args.dsn:
        try:
            counts = index_database(dsn, args.schemas, args.force, progress=not args.quiet)
            print(json.dumps({"dsn": dsn, **counts}))
        except Exception as e:
            print(f"nl2sql-index: {dsn}: {e}", file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
