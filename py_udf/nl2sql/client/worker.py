"""``nl2sql worker``: answers the questions SQL clients queue with ``nl2sql.submit()``, each as
the role that submitted it (``SET ROLE``), and stores the answer ``nl2sql.answer()`` returns.
LISTEN nl2sql_request plus polling; a request claimed with ``FOR UPDATE SKIP LOCKED`` (several
workers share a queue); a per-request time limit (a hanging model); reconnects when the
database restarts. docs/install.md, "The request queue"."""

from __future__ import annotations

import inspect
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from ..core.errors import WorkerError
from ..core.settings import settings_from_texts

__all__ = ["Limits", "Request", "Result", "answer_in_time", "answer_one", "claim", "run"]

RECONNECT_S = (1, 2, 5, 10, 30)
"""Waits before each try to reconnect (the last one repeats)."""


@dataclass(frozen=True)
class Request:
    """One queued question: its id, the submitting role and what it asked."""

    id: int
    role_name: str
    question: str
    evidence: str | None = None
    conversation: str | None = None


@dataclass
class Result:
    """What the worker stores for a request: an answer, or ``error``."""

    sql: str | None = None
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    row_count: int | None = None
    confidence: float | None = None
    log_id: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class Limits:
    """The settings the worker follows (``request_time_limit_s``, ``request_expire_s``,
    ``request_rows``)."""

    time_limit_s: float = 120
    expire_s: float = 600
    rows: int = 1000

    @classmethod
    def read(cls, conn: psycopg.Connection) -> Limits:
        """The limits as the database's settings say.

        Args:
            conn: a connection to the database.

        Returns:
            The limits.
        """
        rows = conn.execute(
            "SELECT key, value FROM nl2sql.setting WHERE key IN "
            "('request_time_limit_s', 'request_expire_s', 'request_rows')"
        ).fetchall()
        st = settings_from_texts(rows)
        return cls(st.request_time_limit_s, st.request_expire_s, st.request_rows)


AskFn = Callable[[psycopg.Connection, Request], Any]
"""``ask(conn, request)`` → an answer with ``sql``, ``columns``, ``rows``, ``confidence`` and
``log_id`` (``nl2sql.connect(conn).ask(question)``'s ``Answer``)."""


def pipeline_ask(conn: psycopg.Connection, request: Request) -> Any:
    """Answer ``request`` on ``conn`` with the pipeline beside the database.

    Args:
        conn: the connection, acting as the submitting role.
        request: the request.

    Returns:
        ``nl2sql.connect(conn).ask(question, …)``'s answer.
    """
    import nl2sql  # lazy: the pipeline loads only in the worker, not with the admin commands

    client = nl2sql.connect(conn)
    given = {"evidence": request.evidence, "conversation": request.conversation}
    accepted = inspect.signature(client.ask).parameters
    return client.ask(
        request.question, **{k: v for k, v in given.items() if k in accepted and v is not None}
    )


def _keys(columns: list[str]) -> list[str]:
    """Column names as unique JSON keys: a repeated name gets ``_2``, ``_3``…"""
    seen: dict[str, int] = {}
    out = []
    for c in columns:
        seen[c] = seen.get(c, 0) + 1
        out.append(c if seen[c] == 1 else f"{c}_{seen[c]}")
    return out


def _error_text(e: BaseException) -> str:
    """An error as the request stores it: nl2sql's own message, else what went wrong."""
    if isinstance(e, psycopg.Error) and e.diag.message_primary:
        msg = e.diag.message_primary
    else:
        msg = str(e) or type(e).__name__
    return msg if msg.startswith("nl2sql") else f"nl2sql worker: {msg}"


def answer_one(conn: psycopg.Connection, request: Request, ask: AskFn, rows: int) -> Result:
    """Answer one request on ``conn`` as its role: ``SET ROLE``, ``ask``, ``RESET ROLE``.

    Args:
        conn: a connection of the worker's login (autocommit).
        request: the request.
        ask: answers a request (``pipeline_ask``; a test passes a stub).
        rows: most rows kept (setting ``request_rows``).

    Returns:
        The answer, or a Result whose ``error`` says why there is none (the login is not a
        member of the role, the pipeline's error).
    """
    try:
        conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(request.role_name)))
    except psycopg.Error:
        return Result(
            error=f"nl2sql worker: the worker's login may not act as role {request.role_name} "
            f"(SET ROLE was refused): GRANT {request.role_name} TO the worker's login"
        )
    try:
        a = ask(conn, request)
        columns = [str(c) for c in (a.columns or [])]
        keys = _keys(columns)
        all_rows = list(a.rows or [])
        kept = [dict(zip(keys, r)) for r in all_rows[:rows]]
        return Result(a.sql, columns, kept, len(all_rows), a.confidence, a.log_id)
    except Exception as e:  # noqa: BLE001 - any failure is the request's answer, not the worker's end
        return Result(error=_error_text(e))
    finally:
        if not conn.closed:
            conn.execute("RESET ROLE")


def answer_in_time(dsn: str, request: Request, ask: AskFn, limits: Limits) -> Result:
    """``answer_one`` on a connection of its own, within ``limits.time_limit_s``: past it the
    connection's query is cancelled and the request fails (a model that hangs keeps its thread
    until its own timeout; the worker goes on).

    Args:
        dsn: the worker's connection string.
        request: the request.
        ask: as for ``answer_one``.
        limits: the settings.

    Returns:
        The answer, or a Result with ``error``.
    """
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                box["conn"] = conn
                box["result"] = answer_one(conn, request, ask, limits.rows)
        except Exception as e:  # noqa: BLE001 - reported as the request's error
            box["result"] = Result(error=_error_text(e))

    t = threading.Thread(target=work, name=f"nl2sql-request-{request.id}", daemon=True)
    t.start()
    t.join(limits.time_limit_s)
    if t.is_alive():
        conn = box.get("conn")
        if conn is not None:
            conn.cancel_safe()
        return Result(
            error=f"nl2sql worker: no answer within {limits.time_limit_s:g} s (setting "
            "request_time_limit_s): a model or the query took too long"
        )
    return box["result"]


def claim(conn: psycopg.Connection, worker: str) -> Request | None:
    """Take the oldest queued request (``FOR UPDATE SKIP LOCKED``) and mark it running.

    Args:
        conn: the worker's queue connection (autocommit).
        worker: this worker's name (host:pid), recorded on the request.

    Returns:
        The request, or None when none is queued.
    """
    row = conn.execute(
        "UPDATE nl2sql.request r SET state = 'running', worker = %s, "
        "claimed_at = pg_catalog.clock_timestamp() WHERE r.id = ("
        "SELECT q.id FROM nl2sql.request q WHERE q.state = 'queued' ORDER BY q.id "
        "FOR UPDATE SKIP LOCKED LIMIT 1) "
        "RETURNING r.id, r.role_name, r.question, r.evidence, r.conversation",
        (worker,),
    ).fetchone()
    return Request(*row) if row else None


def store(conn: psycopg.Connection, request: Request, result: Result) -> None:
    """Write a request's answer (state done) or error (state failed).

    Args:
        conn: the queue connection.
        request: the request.
        result: its answer.
    """
    conn.execute(
        "UPDATE nl2sql.request SET state = %s, answered_at = pg_catalog.clock_timestamp(), "
        "sql = %s, columns = %s, rows = %s, row_count = %s, confidence = %s, log_id = %s, "
        "error = %s WHERE id = %s AND state = 'running'",
        (
            "failed" if result.error else "done",
            result.sql,
            None if result.error else Jsonb(result.columns),
            None
            if result.error
            else Jsonb(result.rows, dumps=lambda v: json.dumps(v, default=str)),
            result.row_count,
            result.confidence,
            result.log_id,
            result.error,
            request.id,
        ),
    )


def sweep(conn: psycopg.Connection, limits: Limits) -> None:
    """Expire requests nobody claimed in time, fail those whose worker vanished, and delete
    answers nobody fetched within ``request_expire_s``.

    Args:
        conn: the queue connection.
        limits: the settings.
    """
    conn.execute(
        "UPDATE nl2sql.request SET state = 'expired', answered_at = pg_catalog.clock_timestamp(),"
        " error = 'nl2sql: no worker answered this request in time (setting request_expire_s)'"
        " WHERE state = 'queued' AND submitted_at < pg_catalog.clock_timestamp() "
        "- make_interval(secs => %s)",
        (limits.expire_s,),
    )
    conn.execute(
        "UPDATE nl2sql.request SET state = 'failed', answered_at = pg_catalog.clock_timestamp(),"
        " error = 'nl2sql worker: the worker answering this request stopped'"
        " WHERE state = 'running' AND claimed_at < pg_catalog.clock_timestamp() "
        "- make_interval(secs => %s)",
        (limits.time_limit_s + limits.expire_s,),
    )
    conn.execute(
        "DELETE FROM nl2sql.request WHERE state IN ('done', 'failed', 'expired') "
        "AND answered_at < pg_catalog.clock_timestamp() - make_interval(secs => %s)",
        (limits.expire_s,),
    )


def apply_calls(conn: psycopg.Connection, say: Callable[[str], None]) -> None:
    """Apply the deferred configuration calls (``client/deferred.py``) as their roles; a failure
    is said, not the worker's end.

    Args:
        conn: a connection of the worker's login (autocommit).
        say: prints one line (what became of each call).
    """
    import nl2sql  # lazy: as in pipeline_ask

    try:
        for c in nl2sql.connect(conn).apply():
            say(f"deferred call {c.id} {c.function}() ({c.role}): {c.error or c.status}")
    except Exception as e:  # noqa: BLE001 - the next loop tries again
        say(_error_text(e))


def _serve(dsn: str, worker: str, ask: AskFn, poll_s: float, stop, say) -> None:
    """One connection's life: requeue what this worker held, then answer until ``stop()`` or
    the connection is lost (psycopg.OperationalError)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("LISTEN nl2sql_request")
        conn.execute(
            "UPDATE nl2sql.request SET state = 'queued', worker = NULL "
            "WHERE state = 'running' AND worker = %s",
            (worker,),
        )
        say(f"nl2sql worker {worker}: listening")
        while True:
            limits = Limits.read(conn)
            sweep(conn, limits)
            apply_calls(conn, say)
            while (req := claim(conn, worker)) is not None:
                result = answer_in_time(dsn, req, ask, limits)
                store(conn, req, result)
                say(f"request {req.id} ({req.role_name}): {result.error or 'answered'}")
            if stop():
                return
            for _ in conn.notifies(timeout=poll_s, stop_after=1):
                pass


def run(
    dsn: str,
    poll_s: float = 5.0,
    once: bool = False,
    ask: AskFn = pipeline_ask,
    say: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
    stop: threading.Event | None = None,
) -> None:
    """Answer queued requests until stopped (Ctrl-C), reconnecting when the database goes.

    Args:
        dsn: the worker login's connection string.
        poll_s: seconds between looks at the queue besides notifications.
        once: answer what is queued, then return.
        ask: answers one request (default: the pipeline beside the database).
        say: receives each line of the worker's log.
        stop: when set, the worker returns after the request it is answering.

    Raises:
        WorkerError: nl2sql (with its request queue) is not installed in the database, or
            the login may not use the queue.
    """
    worker = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"
    tries = 0
    done = (lambda: True) if once else (stop.is_set if stop else (lambda: False))
    while True:
        try:
            _serve(dsn, worker, ask, poll_s, done, say)
            return
        except psycopg.OperationalError as e:
            wait = RECONNECT_S[min(tries, len(RECONNECT_S) - 1)]
            say(f"nl2sql worker: the database went away ({str(e).strip()}); retrying in {wait} s")
            if stop is not None and stop.wait(wait):
                return
            if stop is None:
                time.sleep(wait)
            tries += 1
        except psycopg.errors.UndefinedTable:
            raise WorkerError(
                "nl2sql: nl2sql is not installed in this database, or is older than the "
                "request queue (no table nl2sql.request): run nl2sql install or nl2sql upgrade"
            ) from None
        except psycopg.errors.InsufficientPrivilege as e:
            raise WorkerError(
                f"nl2sql: the worker's login may not use the request queue "
                f"({e.diag.message_primary}): log in as the role that ran nl2sql install, or "
                "GRANT SELECT, UPDATE, DELETE ON nl2sql.request TO it"
            ) from None
        except KeyboardInterrupt:
            say("nl2sql worker: stopped")
            return
