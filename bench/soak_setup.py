"""bench/soak.py's preparation: a private venv holding this checkout (so a ten-minute run does
not hold the install lock), the soak database, its roles, models and scripted answers; and what
the run reads of the server (RSS, crash lines, memory contexts).

The private venv (default /var/tmp/nl2sql-soak-venv) has this checkout's ``nl2sql`` and
``nl2sql_indexer`` in its own site-packages and a ``.pth`` line naming the shared venv's
site-packages after them (onnxruntime, openai, the model files); the soak cluster's
``nl2sql.venv`` names it, so every backend and the shared embedder import this checkout
whatever other checkouts install meanwhile. Only installing the extension's SQL files into
PostgreSQL's shared extension directory and ``CREATE EXTENSION`` in a template database run
under the lock (``install_lock_path()``, as scripts/dev_locked.sh takes it), once for the
checkout's extension files; each run copies the template.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from psycopg import sql as psql

from nl2sql_indexer.cluster import install_lock_path
from nl2sql_indexer.dev.demo_data import DEMO_QUESTIONS, DEMO_TABLES, demo_sql

ROOT = Path(__file__).resolve().parent.parent
SHARED_VENV = Path("/opt/nl2sql/venv")
LOCK = install_lock_path()
DB = "nl2sql_soak"
TEMPLATE = "nl2sql_soak_template"  # built once per checkout's extension files, under the lock
ANALYST, VIEWER = "soak_analyst", "soak_viewer"
MODELS = ("m1", "m2")  # m1 writes the PreSQL; m2 keeps the names a table had when created
REGIONS = ("London", "Paris", "Berlin", "Madrid", "Glasgow", "Chicago", "Toronto", "Sydney")
EVENT_QUESTIONS = [
    ("How many events are there of kind 3?", "SELECT count(*) FROM soak_events WHERE kind = 3"),
    (
        "What is the total amount of the events in London?",
        "SELECT sum(amount) FROM soak_events WHERE region = 'London'",
    ),
    (
        "How many events are there per region?",
        "SELECT region, count(*) FROM soak_events GROUP BY region",
    ),
]
# conversations: a question, then follow-ups asked with the same key
CONVERSATIONS = [
    [
        ("Which singers do we have?", "SELECT name FROM singer"),
        ("and only those from France?", "SELECT name FROM singer WHERE country = 'France'"),
        ("and how many are they?", "SELECT count(*) FROM singer WHERE country = 'France'"),
    ],
    [
        ("Which stadiums are in London?", "SELECT name FROM stadium WHERE location = 'London'"),
        (
            "and which of them holds more than 30000?",
            "SELECT name FROM stadium WHERE location = 'London' AND capacity > 30000",
        ),
    ],
]


def site_packages(venv: Path) -> Path:
    """``<venv>/lib/python3.X/site-packages`` for this Python."""
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def private_venv(venv: Path) -> Path:
    """(Re)make the private venv with this checkout installed; returns it."""
    if not (venv / "pyvenv.cfg").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    sp = site_packages(venv)
    subprocess.run(
        [
            str(SHARED_VENV / "bin" / "pip"),
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--upgrade",
            "--target",
            str(sp),
            str(ROOT),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (sp / "zz_nl2sql_shared_venv.pth").write_text(f"{site_packages(SHARED_VENV)}\n")
    return venv


@contextmanager
def install_lock():
    """Hold the lock scripts/test.sh and scripts/dev_locked.sh take; nothing when the caller
    holds it already (``NL2SQL_LOCK_HELD`` set, as scripts/dev_locked.sh and the test suite's
    bench smoke runs set it: taking it again would wait forever)."""
    if os.environ.get("NL2SQL_LOCK_HELD"):
        yield
        return
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def install_extension_files() -> None:
    """Install this checkout's extension SQL files into PostgreSQL (caller holds the lock)."""
    from nl2sql_indexer.cluster import PG_BIN

    share = subprocess.run(
        [str(PG_BIN / "pg_config"), "--sharedir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_extension.py"), "--install"]
        + [f"{share}/extension"],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def base_answers() -> dict[str, str]:
    """The scripted answers of the questions that are always askable."""
    out = dict(DEMO_QUESTIONS) | dict(EVENT_QUESTIONS)
    for conv in CONVERSATIONS:
        out |= dict(conv)
    return out


def template_digest(events_rows: int) -> str:
    """What the template database was built from: this checkout's extension files and the size
    of ``soak_events`` (a template of other files is rebuilt)."""
    h = hashlib.sha256(str(events_rows).encode())
    for p in sorted((ROOT / "extension").iterdir()):
        h.update(p.name.encode() + p.read_bytes())
    return f"nl2sql soak template {h.hexdigest()[:16]}"


def template_ready(cluster, digest: str) -> bool:
    """Whether the template database exists and was built from ``digest``."""
    with cluster.connect() as c:
        row = c.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
            (TEMPLATE,),
        ).fetchone()
    return bool(row) and row[0] == digest


def build_template(cluster, events_rows: int, digest: str) -> None:
    """The template: demo tables, ``soak_events`` (``events_rows`` rows) and the extension from
    this checkout's files. Caller holds the install lock (CREATE EXTENSION reads the shared
    extension directory)."""
    install_extension_files()
    cluster.create_database(TEMPLATE, drop=True)
    with cluster.connect(TEMPLATE) as c:
        c.execute(demo_sql())
        c.execute(
            "CREATE TABLE soak_events (id bigserial PRIMARY KEY, kind int NOT NULL, "
            "region text NOT NULL, amount numeric NOT NULL, "
            "created_at timestamptz NOT NULL DEFAULT now())"
        )
        c.execute("COMMENT ON TABLE soak_events IS 'Events of each kind, in a region, with amount'")
        c.execute(
            "INSERT INTO soak_events (kind, region, amount) SELECT g %% 10, "
            "(%s::text[])[1 + g %% 8], (g %% 997) / 10.0 FROM generate_series(1, %s) g",
            (list(REGIONS), events_rows),
        )
        c.execute("ANALYZE soak_events")
        c.execute("CREATE EXTENSION nl2sql CASCADE")
        c.execute(
            psql.SQL("COMMENT ON DATABASE {} IS {}").format(
                psql.Identifier(TEMPLATE), psql.Literal(digest)
            )
        )


def create_database(cluster, llm_url: str, model_timeout_s: float) -> None:
    """The soak database, a copy of the template (no lock needed): two models on the loopback
    server, the two roles and their grants; one reindex."""
    with cluster.connect() as c:
        c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        c.execute(f"CREATE DATABASE {DB} TEMPLATE {TEMPLATE}")
    with cluster.connect(DB) as c:
        c.execute("SELECT nl2sql.set_setting('llm_max_retries', '0')")  # a scripted 500 fails
        for i, m in enumerate(MODELS, 1):
            c.execute(
                "SELECT nl2sql.add_model(%s, %s, base_url => %s, timeout_s => %s, priority => %s)",
                (m, m, llm_url, model_timeout_s, i),
            )
        for role in (ANALYST, VIEWER):
            if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                c.execute(f"CREATE ROLE {role} LOGIN")
            c.execute(f"GRANT SELECT ON {', '.join(DEMO_TABLES)}, soak_events TO {role}")
        # the analyst may read every table the soak creates; the viewer only the fixed ones
        c.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {ANALYST}")
        c.execute("SELECT nl2sql.reindex()")


# -- what the run reads of the server ------------------------------------------------------


def rss_mb(pid: int | None, field: str = "VmRSS") -> float | None:
    """``VmRSS`` (or another ``/proc/PID/status`` field: ``RssAnon``, the private part) of a
    process in MB, None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except (OSError, TypeError):
        return None
    return None


def crashes(cluster, offset: int) -> list[str]:
    """Server log lines since ``offset`` telling of a backend crash or a restart."""
    try:
        with open(cluster.datadir / "server.log", "rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    marks = ("terminated by signal", "PANIC", "was terminated", "all server processes terminated")
    return [line for line in text.splitlines() if any(m in line for m in marks)]


def context_bytes(cluster, pid: int) -> int | None:
    """The ``Grand total`` of a backend's PostgreSQL memory contexts (``pg_log_backend_memory_
    contexts`` writes them to the server log): memory PostgreSQL itself holds, as against
    Python's heap, which no context counts. None when the backend is gone."""
    log = cluster.datadir / "server.log"
    offset = log.stat().st_size
    with cluster.connect(DB) as c:
        if not c.execute("SELECT pg_log_backend_memory_contexts(%s)", (pid,)).fetchone()[0]:
            return None
    time.sleep(2)
    with open(log, "rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
    found = [
        line.split("Grand total:")[1].split()[0]
        for line in text.splitlines()
        if f"[{pid}]" in line and "Grand total:" in line
    ]
    return int(found[-1]) if found else None
