"""Shared helpers for the benchmarks in bench/: a local cluster, loading a PostgreSQL dump, a
SELECT-only role, and execution-accuracy (EX) scoring.

Scoring (``score``) reports two verdicts per prediction: ``match``, the strict rule (columns in
the gold's order), and ``official``, the data's own rule (``result_eq.RULES``): Spider's official
rule (columns in any order, test-suite-sql-eval's ``result_eq``) by default, BIRD's (sets of rows)
for BIRD's questions. The headline figure of a Spider benchmark is the official one. The gold SQL
and the predicted SQL are each executed as a SELECT-only role (``bench_reader``) in a read-only transaction that is always rolled back, under a statement
timeout; their results are compared as multisets of rows (as sequences only when the gold has a
top-level ORDER BY), with every value normalized as the pipeline's vote normalizes it
(``nl2sql.generation.execute.normalize_value``: numbers as floats rounded to 6 significant digits). A
prediction that errors, times out or returns more than ``max_rows`` rows is wrong.

The connection passed to the scoring functions must be in autocommit mode (as
``LocalCluster.connect`` returns it) and idle: each execution opens and rolls back its own
read-only transaction on it.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql as psql

from nl2sql.core.sqlcheck import CandidateRefused, has_top_level_order
from nl2sql.generation.execute import normalize_value
from nl2sql_indexer.cluster import PG_BIN, LocalCluster, postgres_can_access
from result_eq import RULES, strict_eq

READER_ROLE = "bench_reader"
STATEMENT_TIMEOUT_MS = 30_000
MAX_ROWS = 200_000
FALLBACK_DATADIR = Path("/var/tmp/nl2sql-bench-cluster")


# --------------------------------------------------------------------------------------------
# cluster and data loading
# --------------------------------------------------------------------------------------------


def machine_reference_ms(n: int = 5) -> float:
    """Median ms of a fixed Python loop (10^6 additions) in this process: how fast this shared
    machine was during the run, printed beside a bench's figures (it drifts by 20-30 % from
    one minute to the next)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def default_datadir() -> Path:
    """``.nl2sql/bench-cluster`` under the current directory, or /var/tmp/nl2sql-bench-cluster
    when the postgres OS user cannot reach it (same logic as nl2sql_indexer.dev.demo)."""
    d = Path.cwd() / ".nl2sql" / "bench-cluster"
    probe = d.parent if d.parent.exists() else d.parent.parent
    if not postgres_can_access(probe):
        d = FALLBACK_DATADIR
    return d


def start_cluster(datadir: Path | None = None) -> LocalCluster:
    """Start (or reuse) the local cluster in ``datadir`` (default: ``default_datadir()``)."""
    return LocalCluster(datadir or default_datadir()).start()


def stop_shared_embedder(cluster: LocalCluster, wait_s: float = 10.0) -> bool:
    """Stop the cluster's shared embedding process, if it runs; the next question starts it
    again with the code installed now. A running one keeps the code it loaded, so benches that
    compare two checkouts on one cluster (``scripts/dev_locked.sh`` installs each in turn) would
    otherwise measure the first checkout's process under both.

    Args:
        cluster: the cluster (its process's pid is in ``<datadir>/nl2sql_embedder``).
        wait_s: seconds to wait for it to exit.

    Returns:
        True when a process was stopped.
    """
    pid_file = cluster.datadir / "nl2sql_embedder" / "embedder.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
        if b"nl2sql.embedding._server" not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return False  # the pid file is stale: another process has that pid now
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError, IndexError):
        return False
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            return True
        time.sleep(0.05)
    return True


_ROLE_PATTERNS = [
    re.compile(r"\bOWNER\s+TO\s+(\"[^\"]+\"|[A-Za-z_][\w$]*)", re.I),
    re.compile(r"\bGRANT\s+[^;]*?\bTO\s+(\"[^\"]+\"|[A-Za-z_][\w$]*)", re.I | re.S),
    re.compile(r"\bSET\s+(?:SESSION\s+)?ROLE\s+(?:TO\s+|=\s*)?(\"[^\"]+\"|[A-Za-z_][\w$]*)", re.I),
    re.compile(r"\bSET\s+SESSION\s+AUTHORIZATION\s+(\"[^\"]+\"|'[^']+'|[A-Za-z_][\w$]*)", re.I),
    re.compile(r"\bFOR\s+ROLE\s+(\"[^\"]+\"|[A-Za-z_][\w$]*)", re.I),
]
_EXT_PATTERN = re.compile(
    r"\bCREATE\s+EXTENSION\s+(?:IF\s+NOT\s+EXISTS\s+)?(\"[^\"]+\"|[A-Za-z_][\w$]*)", re.I
)
_NOT_ROLES = {"public", "current_user", "session_user", "current_role", "default", "none"}
# psql errors a dump load can survive: objects a fresh cluster already has or cannot have.
_HARMLESS = [
    re.compile(p, re.I)
    for p in (
        r"role \".*\" does not exist",
        r"already exists",
        r"extension \".*\" is not available",
        r"could not open extension control file",
        r"must be owner of",
        r"unrecognized configuration parameter",
        r"permission denied to set parameter",
    )
]


def _unquote(name: str) -> str:
    return name[1:-1] if name[:1] in "\"'" else name.lower()


def dump_requirements(path: Path) -> tuple[list[str], list[str]]:
    """Roles and extensions a plain-SQL dump refers to (``OWNER TO``, ``GRANT … TO``,
    ``SET ROLE``, ``SET SESSION AUTHORIZATION``, ``FOR ROLE``, ``CREATE EXTENSION``)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    roles: list[str] = []
    for pat in _ROLE_PATTERNS:
        for m in pat.finditer(text):
            r = _unquote(m.group(1))
            if r.lower() not in _NOT_ROLES and r not in roles:
                roles.append(r)
    exts = list(dict.fromkeys(_unquote(m.group(1)) for m in _EXT_PATTERN.finditer(text)))
    return roles, exts


@dataclass
class LoadReport:
    """What loading a dump did: seconds, roles created, psql errors (harmless and not)."""

    seconds: float
    roles_created: list[str] = field(default_factory=list)
    extensions_missing: list[str] = field(default_factory=list)
    harmless_errors: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def load_dump(cluster: LocalCluster, dbname: str, dump: Path, recreate: bool = True) -> LoadReport:
    """(Re)create database ``dbname`` and load the plain-SQL ``dump`` into it with psql.

    Roles the dump names are created first (NOLOGIN) so ownership and grants apply; psql does
    not stop on errors, and each ERROR line is classified: harmless (a role/extension a fresh
    cluster lacks, an object that already exists) or not. Raises RuntimeError when psql fails
    to run or a non-harmless error occurred.
    """
    t0 = time.perf_counter()
    cluster.create_database(dbname, drop=recreate)
    roles, exts = dump_requirements(dump)
    report = LoadReport(seconds=0.0)
    with cluster.connect() as c:
        for r in roles:
            if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (r,)).fetchone():
                c.execute(psql.SQL("CREATE ROLE {} NOLOGIN").format(psql.Identifier(r)))
                report.roles_created.append(r)
        avail = {row[0] for row in c.execute("SELECT name FROM pg_available_extensions")}
    report.extensions_missing = [e for e in exts if e not in avail]
    proc = subprocess.run(
        [
            str(PG_BIN / "psql"),
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=0",
            "-d",
            cluster.dsn(dbname),
            "-f",
            str(dump),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PGOPTIONS": "-c client_min_messages=warning"},
    )
    if proc.returncode not in (0, 3):
        raise RuntimeError(f"psql -f {dump} failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    for line in proc.stderr.splitlines():
        if "ERROR:" not in line:
            continue
        msg = line.split("ERROR:", 1)[1].strip()
        (report.harmless_errors if any(p.search(msg) for p in _HARMLESS) else report.errors).append(
            line.strip()
        )
    report.seconds = time.perf_counter() - t0
    if report.errors:
        raise RuntimeError(
            f"loading {dump} into {dbname}: {len(report.errors)} error(s), first: "
            + " | ".join(report.errors[:5])
        )
    return report


def user_schemas(conn) -> dict[str, int]:
    """Schemas holding user tables/views (not system, not nl2sql, not extension-owned), with the
    number of relations in each."""
    rows = conn.execute(
        "SELECT n.nspname, count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind IN ('r','p','v','m') AND n.nspname NOT IN ('pg_catalog','information_schema','nl2sql') "
        "AND n.nspname NOT LIKE 'pg\\_%' "
        "AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'e') "
        "GROUP BY 1 ORDER BY 1"
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def ensure_reader_role(conn, schemas: list[str], role: str = READER_ROLE) -> None:
    """Create ``role`` (NOLOGIN) if missing and grant it USAGE and SELECT (only) on ``schemas``
    in the current database."""
    if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
        try:
            conn.execute(psql.SQL("CREATE ROLE {} NOLOGIN").format(psql.Identifier(role)))
        except psycopg.errors.DuplicateObject:
            pass  # created concurrently
    for s in schemas:
        conn.execute(
            psql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                psql.Identifier(s), psql.Identifier(role)
            )
        )
        conn.execute(
            psql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(
                psql.Identifier(s), psql.Identifier(role)
            )
        )


# --------------------------------------------------------------------------------------------
# execution and EX scoring
# --------------------------------------------------------------------------------------------


@dataclass
class ExecResult:
    """Rows (normalized) of one read-only execution, or the error; ``ms`` is wall time."""

    rows: list[tuple] | None
    error: str | None
    ms: float
    sqlstate: str | None = None  # the error's SQLSTATE, where PostgreSQL gave one

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class Match:
    """The outcome of scoring one prediction against the gold: ``match`` by the strict rule,
    ``official`` by the data's rule (``rule``: "spider" or "bird", ``result_eq``)."""

    match: bool
    ordered: bool
    gold: ExecResult
    pred: ExecResult | None
    reason: str  # "match", or why not
    official: bool = False
    rule: str = "spider"


def _hashable(v: Any) -> Any:
    v = normalize_value(v)
    if isinstance(v, memoryview):
        v = v.tobytes()
    try:
        hash(v)
    except TypeError:
        v = repr(v)
    return v


def normalize_row(row: tuple) -> tuple:
    """A result row with each value normalized like ``nl2sql.generation.execute.normalize_value``."""
    return tuple(_hashable(v) for v in row)


def execute_readonly(
    conn,
    sql: str,
    *,
    role: str | None = READER_ROLE,
    timeout_ms: int = STATEMENT_TIMEOUT_MS,
    max_rows: int = MAX_ROWS,
) -> ExecResult:
    """Execute ``sql`` (one statement, sent as is) as ``role`` in a read-only transaction that is
    rolled back, under ``statement_timeout``; at most ``max_rows`` rows (more is an error).
    Never raises for a failing query; raises only when the connection itself is unusable."""
    if not conn.autocommit:
        raise ValueError("execute_readonly needs an autocommit connection (LocalCluster.connect)")
    if not sql or not sql.strip():
        return ExecResult(None, "empty SQL", 0.0)
    rows: list[tuple] = []
    err: str | None = None
    state: str | None = None
    t0 = time.perf_counter()
    try:
        conn.execute("BEGIN TRANSACTION READ ONLY")
        if role:
            conn.execute(psql.SQL("SET LOCAL ROLE {}").format(psql.Identifier(role)))
        conn.execute(
            psql.SQL("SET LOCAL statement_timeout = {}").format(psql.Literal(int(timeout_ms)))
        )
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            for row in cur.stream(sql.encode("utf-8")):  # bytes: never read as a %-template
                rows.append(normalize_row(row))
                if len(rows) > max_rows:
                    err = f"more than {max_rows} rows"
                    break
    except psycopg.errors.QueryCanceled:
        err, state = f"timeout after {timeout_ms} ms", "57014"
    except psycopg.Error as e:
        if conn.closed or conn.broken:
            raise
        err = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        state = e.sqlstate
    finally:
        ms = (time.perf_counter() - t0) * 1000
        if not (conn.closed or conn.broken):
            conn.execute("ROLLBACK")
    return ExecResult(None if err else rows, err, ms, state)


def results_match(gold_rows: list[tuple], pred_rows: list[tuple], ordered: bool) -> bool:
    """Same rows (normalized): as sequences when ``ordered``, else as multisets (the strict
    rule, ``result_eq.strict_eq``)."""
    return strict_eq(gold_rows, pred_rows, ordered)


def gold_is_ordered(gold: str) -> bool:
    """True when the gold query has a top-level ORDER BY (row order then counts)."""
    try:
        return has_top_level_order(gold)
    except CandidateRefused:
        return bool(re.search(r"\border\s+by\b[^)]*$", gold, re.I | re.S))


def score(
    conn,
    gold: str,
    pred: str | None,
    *,
    ordered: bool | None = None,
    role: str | None = READER_ROLE,
    timeout_ms: int = STATEMENT_TIMEOUT_MS,
    max_rows: int = MAX_ROWS,
    cache: dict | None = None,
    rule: str = "spider",
) -> Match:
    """Score ``pred`` against ``gold`` by execution (see module docstring). ``cache`` (a dict)
    keeps gold results between calls. A gold that fails makes every prediction wrong (reason
    says so). ``rule``: the official rule, "spider" (columns in any order) or "bird" (sets of
    rows); ``Match.match`` is always the strict one."""
    official_eq = RULES[rule]
    if ordered is None:
        ordered = gold_is_ordered(gold)
    if cache is not None and gold in cache:
        g = cache[gold]
    else:
        g = execute_readonly(conn, gold, role=role, timeout_ms=timeout_ms, max_rows=max_rows)
        if cache is not None:
            cache[gold] = g
    if not pred or not pred.strip():
        return Match(False, ordered, g, None, "no prediction", rule=rule)
    p = execute_readonly(conn, pred, role=role, timeout_ms=timeout_ms, max_rows=max_rows)
    if not g.ok:
        return Match(False, ordered, g, p, f"gold fails: {g.error}", rule=rule)
    if not p.ok:
        return Match(False, ordered, g, p, f"error: {p.error}", rule=rule)
    official = official_eq(g.rows, p.rows, ordered)
    if results_match(g.rows, p.rows, ordered):
        return Match(True, ordered, g, p, "match", True, rule)
    if ordered and results_match(g.rows, p.rows, False):
        why = "same rows, different order"
    elif official:
        why = "same rows, columns in another order" if rule == "spider" else "same set of rows"
    else:
        why = f"different result ({len(p.rows)} rows vs {len(g.rows)} in gold)"
    return Match(False, ordered, g, p, why, official, rule)


def execution_match(conn, gold: str, pred: str | None, **kw) -> bool:
    """True when ``pred`` returns the same result as ``gold`` (EX); see ``score``."""
    return score(conn, gold, pred, **kw).match


def result_key(rows: list[tuple] | None, ordered: bool = False) -> tuple | None:
    """A hashable key of a result for grouping predictions by result (None for no result)."""
    if rows is None:
        return None
    return tuple(rows) if ordered else tuple(sorted(Counter(rows).items(), key=repr))


# --------------------------------------------------------------------------------------------
# small reporting helpers
# --------------------------------------------------------------------------------------------


def setting_text(conn, key: str) -> str:
    """The effective text of nl2sql setting ``key`` (view ``nl2sql.settings``: the value a user
    set, else the declared default)."""
    row = conn.execute("SELECT value FROM nl2sql.settings WHERE name = %s", (key,)).fetchone()
    if row is None:
        raise KeyError(f"no nl2sql setting {key!r}")
    return row[0]


def setting_value(conn, key: str) -> Any:
    """The effective value of nl2sql setting ``key``, typed as the declaration says (an int for
    ``value_top_k``)."""
    from nl2sql.core.settings import lookup

    return lookup(key).parse(setting_text(conn, key))


def pct(n: int, d: int) -> float:
    """Percentage with one decimal (0.0 when ``d`` is 0)."""
    return round(100.0 * n / d, 1) if d else 0.0


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100), linear interpolation; None for no values."""
    if not values:
        return None
    if len(values) == 1:
        return float(values[0])
    return (
        statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]
        if 0 < q < 100
        else float(min(values) if q <= 0 else max(values))
    )
