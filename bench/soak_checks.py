"""What bench/soak.py judges: the tables and columns an answer's SQL names (sqlglot), whether
one of them was dropped or renamed before the last reindex that finished before the question
was asked (``StaleNames``), and the kind of an error a client saw (``classify``).

Pure functions, no database: tests/unit/test_bench_soak.py runs them.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

# kinds an error may be, and whether the soak expects it (a model failing, hanging or writing
# prose makes a question fail with an nl2sql error that says so: expected; everything else is
# a defect the soak reports)
EXPECTED = {
    "model_failed": True,
    "model_timeout": True,
    "no_candidate": True,
    "abstained": True,
    "refused_by_plan": True,
    "result_too_large": True,
    "nl2sql_other": True,
    "raw_spiexception": False,
    "internal_error": False,
    "may_not_select_race": False,
    "log_id_promise": False,
    "deadlock": False,
    "client_timeout": False,
    "connection_lost": False,
    "not_nl2sql": False,
}

_PY_ERRORS = (
    "Traceback",
    "internal error",
    "GateError",
    "TypeError",
    "KeyError",
    "AttributeError",
    "IndexError",
    "NameError",
    "AssertionError",
    "UnboundLocalError",
    "RecursionError",
)


def _ident(node) -> str | None:
    """An identifier's name as PostgreSQL folds it (unquoted: lower case)."""
    ident = node.args.get("this")
    if isinstance(ident, exp.Identifier):
        return ident.name if ident.quoted else ident.name.lower()
    return node.name.lower() if node.name else None


def sql_names(sql: str) -> tuple[set[str], set[str]] | None:
    """The tables and columns an SQL query names (CTE names left out).

    Args:
        sql: one PostgreSQL query.

    Returns:
        ``(tables, columns)``: table names without schema, column names without table, folded
        as PostgreSQL folds identifiers; None when sqlglot cannot parse it.
    """
    try:
        tree = sqlglot.parse_one(sql, read="postgres")
    except SqlglotError:
        return None
    if tree is None:
        return None
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    tables = {_ident(t) for t in tree.find_all(exp.Table)} - ctes - {None, ""}
    columns = {_ident(c) for c in tree.find_all(exp.Column)} - {None, ""}
    return tables, columns


@dataclass(frozen=True)
class Gone:
    """A name that stopped existing: ``kind`` ``table`` or ``column``, at ``at`` (seconds)."""

    kind: str
    name: str
    at: float


class StaleNames:
    """Names dropped or renamed (``gone``) and the reindex passes (``reindexed``); ``stale`` says
    which names of an answer were gone before a reindex that started after the DDL and finished
    before the question was asked. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gone: list[Gone] = []
        self._passes: list[tuple[float, float]] = []  # (finished, started), sorted by finished

    def gone(self, kind: str, name: str, at: float) -> None:
        """Record that table or column ``name`` was dropped or renamed at ``at``."""
        if kind not in ("table", "column"):
            raise ValueError(f"kind must be 'table' or 'column', not {kind!r}")
        with self._lock:
            self._gone.append(Gone(kind, name, at))

    def reindexed(self, started: float, finished: float) -> None:
        """Record a completed reindex pass."""
        with self._lock:
            bisect.insort(self._passes, (finished, started))

    def _cutoff(self, asked_at: float) -> float | None:
        """The latest start of a pass finished by ``asked_at``: names gone before it are stale."""
        i = bisect.bisect_right(self._passes, (asked_at, float("inf")))
        return max((s for _, s in self._passes[:i]), default=None)

    def stale(self, sql: str, asked_at: float) -> list[str]:
        """Stale names of an answer.

        Args:
            sql: the answer's SQL.
            asked_at: when the question was sent (same clock as ``gone`` and ``reindexed``).

        Returns:
            ``"table x"`` / ``"column y"`` for each name gone before a reindex that started after
            it and finished by ``asked_at``; [] when none, or when the SQL does not parse.
        """
        names = sql_names(sql)
        if names is None:
            return []
        tables, columns = names
        with self._lock:
            cutoff = self._cutoff(asked_at)
            if cutoff is None:
                return []
            gone = [g for g in self._gone if g.at < cutoff]
        return sorted(
            {
                f"{g.kind} {g.name}"
                for g in gone
                if (g.kind == "table" and g.name in tables)
                or (g.kind == "column" and g.name in columns)
            }
        )


def classify(message: str, sqlstate: str | None = None, hint: str | None = None) -> str:
    """The kind of an error a client saw (a key of ``EXPECTED``).

    Args:
        message: the error's primary message.
        sqlstate: its SQLSTATE, if any.
        hint: its hint, if any.

    Returns:
        The kind: an unexpected one when the error is a deadlock, the client's own statement
        timeout, a raw PL/Python exception, an internal error, a "may not SELECT" about a table
        the role may read (every soak role asks only about tables it may read), a hint promising
        a log row that rolled back, or any error not raised by nl2sql; else the nl2sql kind.
    """
    msg = message or ""
    if msg.startswith("plpy.Error: "):  # how PL/Python shows an error raised with plpy.error
        msg = msg[len("plpy.Error: ") :]
    if sqlstate == "40P01" or "deadlock detected" in msg:
        return "deadlock"
    if sqlstate == "57014" and "statement timeout" in msg:
        return "client_timeout"
    if "spiexceptions" in msg or "SPIError" in msg:
        return "raw_spiexception"
    if any(p in msg for p in _PY_ERRORS):
        return "internal_error"
    if "may not SELECT" in msg:
        return "may_not_select_race"
    if hint and "(log id" in hint:
        return "log_id_promise"
    if not msg.startswith("nl2sql"):
        return "not_nl2sql"
    low = msg.lower()
    if "every model failed" in low:
        return "model_timeout" if ("within" in low or "timed out" in low) else "model_failed"
    if "no candidate executed" in low:
        return "no_candidate"
    if "competing readings" in low or "abstain" in low:
        return "abstained"
    if "refused before running" in low:
        return "refused_by_plan"
    if "too large" in low:
        return "result_too_large"
    return "nl2sql_other"
