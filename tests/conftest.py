"""Test harness: a real PostgreSQL 15 cluster the tests start and stop (no Docker engine here,
so no testcontainers), the demo database with the extension, and the scripted loopback LLM.

Database tests need what scripts/install.sh installs (PostgreSQL 15 + plpython3u + pgvector,
the venv named by NL2SQL_VENV, default /opt/nl2sql/venv). When run as root, the fixture first
re-installs the current checkout into that venv and the extension files into PostgreSQL, so the
server runs exactly the code under test.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py_udf"))
sys.path.insert(0, str(ROOT / "indexer"))

from nl2sql_indexer.cluster import DEFAULT_VENV, PG_BIN, LocalCluster  # noqa: E402
from nl2sql_indexer.demo_data import demo_sql  # noqa: E402
from nl2sql_indexer.loopback import LoopbackLLM  # noqa: E402

DEMO_DB = "nl2sql_test"
TEST_KEY_ENV = "NL2SQL_TEST_API_KEY"
TEST_API_KEY = "sk-nl2sql-test-0123456789abcdef"
LOCK_FILE = "/tmp/nl2sql-install.lock"


def _sync_installation() -> None:
    """Install this checkout into the server's venv and the extension dir (root only)."""
    venv_pip = Path(DEFAULT_VENV) / "bin" / "pip"
    if os.geteuid() != 0 or not venv_pip.exists():
        return
    subprocess.run(
        [str(venv_pip), "install", "-q", "--no-deps", "--no-build-isolation", str(ROOT)],
        check=True,
        capture_output=True,
    )
    extdir = (
        subprocess.run(
            [str(PG_BIN / "pg_config"), "--sharedir"], capture_output=True, text=True, check=True
        ).stdout.strip()
        + "/extension"
    )
    subprocess.run(
        [sys.executable, str(ROOT / "scripts/build_extension.py"), "--install", extdir],
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="session")
def cluster():
    """A fresh cluster in /tmp for the whole session; destroyed afterwards."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL 15 is not installed ({PG_BIN}); run scripts/install.sh")
    # One test session at a time installs into the shared extension directory: hold a lock
    # for the whole session (scripts/dev_locked.sh sets NL2SQL_LOCK_HELD when it holds it).
    lock = None
    if not os.environ.get("NL2SQL_LOCK_HELD"):
        lock = open(LOCK_FILE, "a")
        fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        _sync_installation()
        base = Path(tempfile.mkdtemp(prefix="nl2sql-test-", dir="/tmp"))
        base.chmod(0o755)
        # a key in the server's environment, as a DBA would set one (tests/test_safety.py)
        c = LocalCluster(base / "data", server_env={TEST_KEY_ENV: TEST_API_KEY})
        c.start()
        yield c
        c.destroy()
        shutil.rmtree(base, ignore_errors=True)
    finally:
        if lock is not None:
            lock.close()


@pytest.fixture(scope="session")
def llm():
    """The scripted OpenAI-compatible loopback server (answers are scripted, not a model's)."""
    server = LoopbackLLM().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def demo_conn(cluster):
    """One session-long connection to the demo database with the extension installed and
    indexed (one backend, so the embedding model loads once)."""
    cluster.create_database(DEMO_DB, drop=True)
    conn = cluster.connect(DEMO_DB)
    conn.execute(demo_sql())
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    conn.execute("SELECT nl2sql.reindex()")
    yield conn
    conn.close()


@pytest.fixture
def db(demo_conn, llm):
    """The demo connection, with models, settings and the loopback script reset per test."""
    llm.clear()
    llm.set_default(None)
    demo_conn.execute("DELETE FROM nl2sql.model")
    demo_conn.execute("SELECT nl2sql.set_setting('presql_votes', 'on')")
    demo_conn.execute("SELECT nl2sql.reset_setting('candidate_timeout_ms')")
    yield demo_conn


def add_models(conn, llm, names, **kw):
    """Configure models ``names`` (in order: the first writes PreSQL) on the loopback server."""
    for i, n in enumerate(names):
        conn.execute(
            "SELECT nl2sql.add_model(%s, %s, base_url => %s, priority => %s, timeout_s => %s)",
            (n, n, kw.get("base_url", llm.base_url), i, kw.get("timeout_s", 10)),
        )


def login_role(conn, name: str, grant_select_on: str):
    """Create login role ``name`` if missing and grant it SELECT on ``grant_select_on`` (a list
    of tables as SQL text)."""
    conn.execute(
        f"DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{name}') "
        f"THEN CREATE ROLE {name} LOGIN; END IF; END$$"
    )
    conn.execute(f"GRANT SELECT ON {grant_select_on} TO {name}")


def cancel_while_model_hangs(
    cluster, admin, llm, dbname: str, question: str, model: str, user: str | None = None
) -> tuple[BaseException | None, float]:
    """Ask ``question`` on a second connection (as ``user``) while model ``model`` hangs, cancel
    that backend with pg_cancel_backend once the loopback server holds a request *for this
    model*, and return (the error the asking connection got, seconds from cancel to its
    return). ``model`` should be unique to the test: an abandoned call of an earlier test can
    still reach the server (the client retries a timed-out request), and waiting on any request
    could cancel before the question even started, when a cancel is ignored."""
    import threading
    import time

    import psycopg

    from nl2sql_indexer.loopback import Rule

    add_models(admin, llm, [model], timeout_s=60)
    llm.add_rule(Rule(model=model, hang=True))
    with cluster.connect(dbname, **({"user": user} if user else {})) as other:
        pid = other.info.backend_pid
        result: dict = {}

        def ask():
            try:
                other.execute("SELECT nl2sql(%s)", (question,))
            except psycopg.Error as e:
                result["error"] = e
            result["done"] = time.monotonic()

        th = threading.Thread(target=ask)
        th.start()
        deadline = time.monotonic() + 60
        while not any(r["model"] == model for r in llm.requests) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(r["model"] == model for r in llm.requests), (
            "the question never reached the model"
        )
        t0 = time.monotonic()
        admin.execute("SELECT pg_cancel_backend(%s)", (pid,))
        th.join(10)
        assert other.execute("SELECT 1").fetchone()[0] == 1  # the backend answers the next query
        return result.get("error"), result.get("done", float("inf")) - t0
