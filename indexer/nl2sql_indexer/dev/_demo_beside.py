"""The demo beside the database (``scripts/demo.sh --beside``): the same cluster, a database
``nl2sql_demo_beside`` owned by a non-superuser login role with only ``vector`` and ``pg_trgm``
(no PL/Python, as on a managed service), ``nl2sql install`` as that role, reindex and the demo
questions through ``nl2sql.connect(dsn).ask()`` in this process."""

from __future__ import annotations

import json

import psycopg

from nl2sql.client import connect
from nl2sql.client.install import install, upgrade
from nl2sql_indexer.dev._demo_match import same_result

BESIDE_DB = "nl2sql_demo_beside"
BESIDE_ROLE = "nl2sql_demo_owner"


def make_beside_db(cluster, demo_sql: str) -> str:
    """Create (afresh) the role-owned database with the demo data; returns the role's DSN.

    Args:
        cluster: the demo's LocalCluster.
        demo_sql: the demo data's SQL script.
    Returns:
        The DSN of the owner role on the new database.
    Raises:
        SystemExit: when PL/Python is present in the new database.
    """
    with cluster.connect() as c:
        if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (BESIDE_ROLE,)).fetchone():
            c.execute(f"CREATE ROLE {BESIDE_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
        c.execute(f"DROP DATABASE IF EXISTS {BESIDE_DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {BESIDE_DB} OWNER {BESIDE_ROLE}")
    with cluster.connect(BESIDE_DB) as c:
        c.execute("CREATE EXTENSION vector; CREATE EXTENSION pg_trgm")
        if c.execute("SELECT 1 FROM pg_language WHERE lanname LIKE 'plpython%'").fetchone():
            raise SystemExit(f"nl2sql demo: {BESIDE_DB} has PL/Python; the beside demo needs none")
    dsn = cluster.dsn(BESIDE_DB, BESIDE_ROLE)
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(demo_sql)
    print(
        f"{BESIDE_DB}: owner {BESIDE_ROLE} (not a superuser), extensions vector and pg_trgm, "
        "no PL/Python in pg_language"
    )
    return dsn


def _ask(client, question: str, gold: str, n_rows: int) -> tuple[bool, bool]:
    """Ask one demo question through the Python API and print SQL, first rows and whether they
    are the reference answer's; returns (answered, matches)."""
    print(f"\nQ: {question}", flush=True)
    try:
        a = client.ask(question)
    except Exception as e:  # noqa: BLE001 - show the error, keep going
        print(f"   error: {str(e).strip()}")
        return False, False
    print(f"   SQL: {a.sql}")
    print(f"   confidence {a.confidence or 0:.2f}; first rows: {a.rows[:n_rows]}")
    with client.conn.transaction(force_rollback=True):
        gold_rows = client.conn.execute(gold).fetchall()
    matches = same_result(gold_rows, a.rows, gold)
    print(f"   {'matches the reference' if matches else 'DIFFERS from the reference: ' + gold}")
    return True, matches


def run_beside(dsn: str, configure, questions, n_rows: int) -> tuple[int, int]:
    """Install (or upgrade), configure the models, reindex and ask.

    Args:
        dsn: the owner role's DSN.
        configure: called with a psycopg connection as that role; returns a line to print.
        questions: the demo's (question, gold) pairs.
        n_rows: rows to print per answer.
    Returns:
        (how many questions got SQL and rows, how many of those match the reference).
    """
    with psycopg.connect(dsn, autocommit=True) as c:
        done = c.execute("SELECT to_regclass('nl2sql.settings') IS NOT NULL").fetchone()[0]
    (upgrade if done else install)(dsn)
    with psycopg.connect(dsn, autocommit=True) as c:
        print(configure(c))
    with connect(dsn) as client:
        print(f"reindex: {json.dumps(client.reindex(), default=str)}")
        results = [_ask(client, q, gold, n_rows) for q, gold in questions]
    return sum(a for a, _ in results), sum(m for _, m in results)
