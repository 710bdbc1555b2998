"""Test harness shared by every test folder.

- ``unit/`` — no server: pure Python, grouped like ``py_udf/nl2sql/`` (core, retrieval, model,
  generation, selection, curated, ops, embedding) plus the indexer package and project-wide
  checks. ``bash scripts/test.sh --unit`` runs them without PostgreSQL; a unit test that asks
  for a cluster fixture is refused at collection (``pytest_collection_modifyitems`` below).
- ``db/`` — inside a real PostgreSQL cluster the tests start and stop (no Docker engine
  here, so no testcontainers): the demo database with the extension.
- ``upgrade/`` — released versions upgraded in place, and pg_dump / pg_restore.
- ``fixtures/`` — table-driven cases (input → expected), read by the unit tests.
- ``adversarial_corpus.py`` — hostile SQL and value-leak markers shared by unit and db tests.

Fixtures: ``cluster``, ``demo_conn`` and ``db`` (PostgreSQL: db/ and upgrade/ only); ``llm``,
the scripted loopback server (any test: it is not a model). Helpers any test imports with
``from conftest import ...``: ``ROOT``, ``FIXTURES``, ``add_models``, ``login_role``,
``cancel_while_model_hangs``, ``candidate``, ``judged`` and the embedding-socket helpers.

Database tests need what scripts/install.sh installs (PostgreSQL 15-18 + plpython3u + pgvector,
the venv named by NL2SQL_VENV, default /opt/nl2sql/venv). When run as root, the ``cluster``
fixture first re-installs the current checkout into that venv and the extension files into
PostgreSQL, so the server runs exactly the code under test.
"""

from __future__ import annotations

import array
import base64
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "py_udf"))
sys.path.insert(0, str(ROOT / "indexer"))

from nl2sql.core.types import Candidate  # noqa: E402
from nl2sql_indexer.cluster import (  # noqa: E402
    DEFAULT_VENV,
    PG_BIN,
    LocalCluster,
    install_lock_path,
)
from nl2sql_indexer.dev.demo_data import demo_sql  # noqa: E402
from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule  # noqa: E402

UNIT_DIR = ROOT / "tests" / "unit"
FIXTURES = ROOT / "tests" / "fixtures"  # table-driven cases: input -> expected
CLUSTER_FIXTURES = frozenset({"cluster", "demo_conn", "db"})
DEMO_DB = "nl2sql_test"
TEST_KEY_ENV = "NL2SQL_TEST_API_KEY"
TEST_API_KEY = "sk-nl2sql-test-0123456789abcdef"
LOCK_FILE = install_lock_path()  # one per server: suites on two servers run side by side


# The files that take longest (docs/benchmarks.md, "The test suite's time"), first: under
# pytest-xdist a worker takes the next file when it is done, so the long ones start at once and
# the short ones fill in around them (scripts/test.sh passes --no-loadscope-reorder)
SLOW_FIRST = (
    "tests/llamacpp",  # one unit: one llama-server (CPU-bound) at a time, as without workers
    "tests/db/test_hostile_backend.py",
    "tests/db/test_bench_smoke.py",
    "tests/beside/test_wheel_user.py",
    "tests/beside/test_hostile_beside.py",
    "tests/beside/test_tools_beside.py",
    "tests/db/test_safety.py",
    "tests/upgrade/test_pg_upgrade.py",
    "tests/upgrade/test_upgrade.py",
    "tests/beside/test_agent_door.py",
    "tests/db/test_reindex_jobs.py",
    "tests/db/test_client.py",
)


# Files whose cases wait more than they compute, each case on its own (its own hostile server or
# bench process; a share of the benches one cluster): split into this many units, so that workers share them. Not
# tests/beside/test_hostile_beside.py: its claims are a client process's times (Ctrl-C within
# 2 s), which two of its shares at once on a loaded machine missed (a Debian 13 run, load 16)
SPLIT_FILES = {
    "tests/db/test_hostile_backend.py": 3,
    "tests/db/test_bench_smoke.py": 3,
}


def _file_of(nodeid: str) -> str:
    """The unit's file, or tests/llamacpp for any of its files."""
    path = nodeid.split("::", 1)[0].split("#", 1)[0]
    return "tests/llamacpp" if path.startswith("tests/llamacpp/") else path


def _unit_of_work(nodeid: str) -> str:
    """What one pytest-xdist worker runs whole: the test's file (its module fixtures made
    once), all of tests/llamacpp, or a share of a file of ``SPLIT_FILES`` (by a stable hash of
    the test's id: each share makes the module fixtures once more)."""
    path = _file_of(nodeid)
    parts = SPLIT_FILES.get(path)
    if parts:
        return f"{path}#{zlib.crc32(nodeid.encode()) % parts}"
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (scripts/test.sh): a file per unit, tests/llamacpp one unit."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling  # lazy: only under pytest-xdist

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit_of_work(nodeid)

    return FileScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """Refuse a test under ``tests/unit`` that asks for a cluster fixture: unit tests run
    without PostgreSQL (``scripts/test.sh --unit``); such a test belongs in ``tests/db``.
    In a pytest-xdist worker: the slowest files first (``SLOW_FIRST``), the rest in order."""
    for item in items:
        if item.path.is_relative_to(UNIT_DIR) and CLUSTER_FIXTURES & set(item.fixturenames):
            raise pytest.UsageError(
                f"{item.nodeid} uses {sorted(CLUSTER_FIXTURES & set(item.fixturenames))}: "
                "a unit test runs without PostgreSQL; move it to tests/db/"
            )
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {u: i for i, u in enumerate(SLOW_FIRST)}
        items.sort(key=lambda item: rank.get(_file_of(item.nodeid), len(SLOW_FIRST)))


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


def _unit_only(config) -> bool:
    """True when every path pytest was given lies under tests/unit (no cluster is needed)."""
    paths = [a.split("::")[0] for a in config.args if not a.startswith("-")]
    return bool(paths) and all(
        (Path(config.invocation_params.dir) / p).resolve().is_relative_to(UNIT_DIR) for p in paths
    )


def pytest_configure(config):
    """pytest-xdist's controller (``-n N``; scripts/test.sh passes it): takes the installation
    lock and installs this checkout once, for all its workers (each a session of its own, with
    its own cluster: a port and a data directory of its own); the workers inherit
    ``NL2SQL_LOCK_HELD`` and ``NL2SQL_INSTALLED`` and do neither."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        return
    if _unit_only(config) or not (PG_BIN / "initdb").exists():
        return
    if not os.environ.get("NL2SQL_LOCK_HELD"):
        config._nl2sql_lock = open(LOCK_FILE, "a")
        fcntl.flock(config._nl2sql_lock, fcntl.LOCK_EX)
        os.environ["NL2SQL_LOCK_HELD"] = "1"
    if not os.environ.get("NL2SQL_INSTALLED"):
        _sync_installation()
        os.environ["NL2SQL_INSTALLED"] = "1"


def pytest_unconfigure(config):
    lock = getattr(config, "_nl2sql_lock", None)
    if lock is not None:
        lock.close()


@pytest.fixture(scope="session")
def cluster():
    """A fresh cluster in /tmp for the whole session (under pytest-xdist: for the worker);
    destroyed afterwards."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"PostgreSQL is not installed ({PG_BIN}/initdb); run scripts/install.sh")
    # One test session at a time installs into the shared extension directory: hold a lock
    # for the whole session (scripts/dev_locked.sh sets NL2SQL_LOCK_HELD when it holds it;
    # pytest-xdist's controller holds it for its workers and installs once: pytest_configure).
    lock = None
    if not os.environ.get("NL2SQL_LOCK_HELD"):
        lock = open(LOCK_FILE, "a")
        fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        if not os.environ.get("NL2SQL_INSTALLED"):
            _sync_installation()
        base = Path(tempfile.mkdtemp(prefix="nl2sql-test-", dir="/tmp"))
        base.chmod(0o755)
        # a key in the server's environment, as a DBA would set one (tests/db/test_safety.py)
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
    # the tests of the two stages ask in two rounds (the default, auto, takes one on the demo's
    # small schema); tests/db/test_rounds.py covers one round and auto
    demo_conn.execute("SELECT nl2sql.set_setting('model_rounds', 'two')")
    demo_conn.execute("SELECT nl2sql.reset_setting('candidate_timeout_ms')")
    demo_conn.execute("SELECT nl2sql.reset_setting('max_plan_cost')")
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


# --- builders of pipeline values, for tests of one stage ------------------------------------


def candidate(src, h, ms, status="ok", model=None, rows=1) -> Candidate:
    """An executed candidate from ``src`` (also its model unless ``model`` is given) whose
    result hashes to ``h``, took ``ms`` and returned ``rows`` rows."""
    return Candidate(
        source=src,
        model=model or src,
        raw_text="",
        sql=f"SELECT '{src}'",
        status=status,
        result_hash=h,
        exec_ms=ms,
        row_count=rows,
    )


def judged(level, **models):
    """A judged question for ``nl2sql.calibrate``: model=(group, right)."""
    return {
        "level": level,
        "candidates": [{"model": m, "group": g, "right": r} for m, (g, r) in models.items()],
    }


# --- the shared embedding process, spoken to over its Unix socket ---------------------------

EMBEDDING_TEXTS = [
    "How many singers do we have?",
    "France",
    "naïve café — 3-D Man",
    "Summer Nights",
]


def embedding_client(sock: str):
    """An OpenAI client for the embedding process listening on the Unix socket ``sock``."""
    import httpx2  # lazy: heavy, and only the embedding tests need the openai client
    import openai  # lazy: (same)

    return openai.OpenAI(
        api_key="unused",
        base_url="http://embedder/v1",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(transport=httpx2.HTTPTransport(uds=sock)),
    )


def embeddings_of(sock: str, texts: list[str]) -> list[list[float]]:
    """The vectors the embedding process on ``sock`` returns for ``texts``."""
    resp = embedding_client(sock).embeddings.create(
        input=texts, model="all-MiniLM-L6-v2", encoding_format="base64"
    )
    return [list(array.array("f", base64.b64decode(d.embedding))) for d in resp.data]


def cosines(a: list[list[float]], b: list[list[float]]) -> list[float]:
    """Pairwise dot products of unit vectors ``a[i]`` and ``b[i]``."""
    return [sum(x * y for x, y in zip(u, v)) for u, v in zip(a, b)]


# ---- MCP: the official SDK's client against nl2sql-mcp ------------------------------------------

MCP_SCRIPT = Path(sys.executable).parent / "nl2sql-mcp"


class Session:
    """One MCP client session, held open by an anyio portal so that sync tests can call it."""

    def __init__(self, portal, client):
        self.portal, self.client = portal, client

    def tools(self):
        return self.portal.call(self.client.list_tools).tools

    def call(self, name: str, args: dict | None = None):
        return self.portal.call(self.client.call_tool, name, args or {})

    def ok(self, name: str, args: dict | None = None) -> dict:
        r = self.call(name, args)
        assert not r.is_error, r.content[0].text
        return r.structured_content

    def error(self, name: str, args: dict | None = None) -> str:
        r = self.call(name, args)
        assert r.is_error, r.structured_content
        return r.content[0].text


@contextmanager
def mcp_session(server):
    """A client session with ``server``: a StdioServerParameters or an HTTP URL."""
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(Client(server, read_timeout_seconds=120)) as c:
            yield Session(portal, c)


def mcp_stdio(dsn: str) -> StdioServerParameters:
    return StdioServerParameters(command=str(MCP_SCRIPT), args=["--dsn", dsn], cwd="/")
