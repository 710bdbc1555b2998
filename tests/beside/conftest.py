"""A database as a managed PostgreSQL service gives it: an owner that is not a superuser, the
extensions vector and pg_trgm created by the service's administrator, no PL/Python
(``pg_language`` has no plpython3u). Fixtures: ``owner`` (that role), ``beside_db`` (a fresh
such database: name and the owner's DSN), ``installed`` (the same with ``nl2sql install``
run) and ``demo_template`` (installed, the demo's tables indexed: what ``demo`` copies). Helpers:
``nl2sql_admin`` (the administrative subcommands in a subprocess), ``copy_db``."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from dataclasses import dataclass

import psycopg
import pytest

import nl2sql
from conftest import ROOT, add_models
from nl2sql_indexer.dev.demo_data import demo_sql

OWNER = "nl2sql_beside_owner"
READER = "nl2sql_beside_reader"  # a login role that may read singer only
_numbers = itertools.count()
_made: list[str] = []


@dataclass
class BesideDb:
    """A fresh database owned by ``OWNER``: its name and the owner's DSN."""

    name: str
    dsn: str


def nl2sql_admin(*args: str) -> subprocess.CompletedProcess:
    """``nl2sql <args>`` (the administrative subcommands, ``python -m nl2sql.client.admin``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "py_udf")}
    return subprocess.run(
        [sys.executable, "-m", "nl2sql.client.admin", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture(scope="session")
def owner(cluster):
    """A login role that is not a superuser and may not create databases or roles."""
    with cluster.connect() as c:
        if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (OWNER,)).fetchone():
            c.execute(f"CREATE ROLE {OWNER} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
    return OWNER


def make_db(cluster, owner: str, extensions=("vector", "pg_trgm")) -> BesideDb:
    """A new database owned by ``owner``, with ``extensions`` created by the superuser."""
    name = f"nl2sql_beside_{os.getpid()}_{next(_numbers)}"
    _made.append(name)
    with cluster.connect() as c:
        c.execute(f"CREATE DATABASE {name} OWNER {owner}")
    with cluster.connect(name) as c:
        for e in extensions:
            c.execute(f"CREATE EXTENSION {e}")
        assert not c.execute(
            "SELECT lanname FROM pg_language WHERE lanname LIKE 'plpython%'"
        ).fetchall()
    return BesideDb(name, cluster.dsn(name, owner))


def copy_db(cluster, template: BesideDb, owner: str) -> BesideDb:
    """A new database copied from ``template`` (``CREATE DATABASE … TEMPLATE``: a file copy,
    its objects and their owners as they are), owned by ``owner``."""
    name = f"nl2sql_beside_{os.getpid()}_{next(_numbers)}"
    _made.append(name)
    with cluster.connect() as c:
        c.execute(f"CREATE DATABASE {name} TEMPLATE {template.name} OWNER {owner}")
    return BesideDb(name, cluster.dsn(name, owner))


@pytest.fixture(scope="session")
def demo_template(cluster, owner, llm):
    """A database as ``installed`` gives it, with the demo's tables indexed from this process,
    a loopback model and ``READER`` granted SELECT on singer; ``(database, reindex's counts)``.
    Made once a session (under pytest-xdist: a worker) and copied for each test that asks for
    ``demo`` (tests/beside/test_client_beside.py): the install in a subprocess and the reindex,
    about 2.5 s a test, are done once. No connection is left open to it (a copy needs none)."""
    db = make_db(cluster, owner)
    r = nl2sql_admin("install", "--dsn", db.dsn)
    assert r.returncode == 0, r.stderr
    with psycopg.connect(db.dsn, autocommit=True) as c:
        c.execute(demo_sql())
    with nl2sql.connect(db.dsn) as client:
        counts = client.reindex()
    with cluster.connect(db.name) as su:
        su.execute(
            f"DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER}') "
            f"THEN CREATE ROLE {READER} LOGIN; END IF; END$$"
        )
    with psycopg.connect(db.dsn, autocommit=True) as c:
        c.execute(f"GRANT SELECT ON singer TO {READER}")
        add_models(c, llm, ["beside-m1"])
    return db, counts


@pytest.fixture(scope="session", autouse=True)
def _drop_made_databases(cluster):
    """Every database ``make_db`` made, dropped when the session ends."""
    yield
    with cluster.connect() as c:
        for name in _made:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def beside_db(cluster, owner):
    """A fresh database as a managed service gives it (dropped when the session ends)."""
    return make_db(cluster, owner)


@pytest.fixture
def installed(beside_db):
    """``beside_db`` with ``nl2sql install`` run in it by its owner."""
    r = nl2sql_admin("install", "--dsn", beside_db.dsn)
    assert r.returncode == 0, r.stderr
    return beside_db
