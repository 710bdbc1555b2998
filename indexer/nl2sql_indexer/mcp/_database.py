"""The server's one connection to the database: opened on the first call, checked for the
extension, re-opened after a failure; every call in a transaction of its own, read-only unless
the extension's function writes (its query log, feedback)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import suppress
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import tuple_row

from nl2sql.core.errors import Nl2sqlError

T = TypeVar("T")

# nl2sql's version (the extension's), recovery, the database, whether nl2sql is installed
# beside the database (its schema without PL/Python) and whether the pipeline's functions are
# PL/Python ones (beside the database they are stubs: the questions run in this process)
_INSTALLED_SQL = (
    "SELECT (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'nl2sql'),"
    " pg_catalog.pg_is_in_recovery(), pg_catalog.current_database(),"
    " pg_catalog.to_regprocedure('nl2sql._run_candidate(text,text,integer,bigint)') IS NOT NULL,"
    " EXISTS (SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l"
    " ON l.oid = p.prolang WHERE p.oid ="
    " pg_catalog.to_regprocedure('nl2sql._explain(text,text,text,text)')"
    " AND l.lanname LIKE 'plpython%')"
)
CONNECT_TIMEOUT_S = 10
"""Seconds a connection attempt may take before the call fails (libpq ``connect_timeout``)."""
APPLICATION_NAME = "nl2sql-mcp"


class ToolFailure(Exception):
    """A failure the MCP client is told about in words (the server keeps serving).

    Args:
        message: what went wrong and what to do.
        from_database: the message is the database's (it may quote data: the agent door
            gates it, ``nl2sql.agent.view.AgentView.error``).
    """

    def __init__(self, message: str, from_database: bool = False):
        super().__init__(message)
        self.from_database = from_database


def describe(dsn: str) -> str:
    """The DSN's database, user, host and port, for messages (never its password).

    Args:
        dsn: a libpq connection string or URI.

    Returns:
        ``dbname=… user=… host=… port=…`` of the parts given.
    """
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(an unreadable DSN)"
    keep = [f"{k}={parts[k]}" for k in ("dbname", "user", "host", "port") if parts.get(k)]
    return " ".join(keep) or "(libpq defaults)"


def message_of(e: psycopg.Error) -> str:
    """An error of the server as the client reads it: the primary message and the hint.

    Args:
        e: the psycopg error.

    Returns:
        One text: the message (without PL/Python's ``plpy.Error:`` prefix and without the
        traceback context), then `` (hint: …)`` when the server gave one.
    """
    diag = getattr(e, "diag", None)
    msg = (diag.message_primary if diag is not None else None) or str(e).splitlines()[0]
    for prefix in ("plpy.Error: ", "plpy.SPIError: "):
        msg = msg.removeprefix(prefix)
    hint = diag.message_hint if diag is not None else None
    return f"{msg} (hint: {hint})" if hint else msg


class Database:
    """One connection, used by one call at a time (a lock), opened and checked lazily."""

    def __init__(self, dsn: str, in_process: bool = False):
        """Keep the DSN; nothing is opened until the first call.

        Args:
            dsn: libpq connection string of the database with nl2sql.
            in_process: run the question pipeline in this process (``nl2sql.connect``) even
                where the database has nl2sql's PL/Python functions; without them (nl2sql
                installed beside the database) it runs here anyway.
        """
        self.dsn = dsn
        self.where = describe(dsn)
        self.in_process = in_process
        self._conn: psycopg.Connection | None = None
        self._client = None
        self._in_recovery = False
        self._lock = threading.Lock()

    def _open(self) -> psycopg.Connection:
        """Connect, make every transaction read-only by default, check the extension."""
        try:
            conn = psycopg.connect(
                self.dsn,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name=APPLICATION_NAME,
            )
        except psycopg.Error as e:
            raise ToolFailure(
                f"nl2sql-mcp: cannot connect to the database ({self.where}): "
                f"{str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}; "
                "the server keeps running and connects again on the next call"
            ) from None
        try:
            conn.row_factory = tuple_row
            conn.execute("SET default_transaction_read_only = on")
            row = conn.execute(_INSTALLED_SQL).fetchone()
        except psycopg.Error as e:
            conn.close()
            raise ToolFailure(f"nl2sql-mcp: {message_of(e)} ({self.where})") from None
        if row[0] is None and not row[3]:
            conn.close()
            raise ToolFailure(
                f"nl2sql-mcp: the extension nl2sql is not installed in database {row[2]} "
                f"({self.where}): a superuser runs CREATE EXTENSION nl2sql CASCADE there, "
                "then SELECT nl2sql.reindex() (docs/install.md)"
            )
        self._in_recovery = bool(row[1])
        self.in_process = self.in_process or not row[4]
        return conn

    def client(self):
        """The pipeline in this process over the open connection (``in_process``).

        Returns:
            The ``nl2sql.Client`` of the current connection (made on first use).
        """
        import nl2sql  # the client (psycopg pipeline) only where questions run in this process

        if self._client is None or self._client.conn is not self._conn:
            self._client = nl2sql.connect(self._conn, in_process=True)
        return self._client

    def close(self) -> None:
        """Close the connection, if open (the next call opens a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with suppress(psycopg.Error):
                conn.close()

    def run(self, work: Callable[[psycopg.Connection], T], writes: bool = False) -> T:
        """Run ``work`` in one transaction of its own, committed when it returns.

        Args:
            work: what to run on the connection (statements calling the extension's functions).
            writes: the extension's function writes (its query log, feedback): the transaction
                is READ WRITE, except on a server in recovery (a replica), where the extension
                writes no log; every other transaction is READ ONLY.

        Returns:
            What ``work`` returns.

        Raises:
            ToolFailure: the database is unreachable, lacks the extension, refused the call
                (its message and hint), or the connection was lost (closed: the next call
                connects again).
        """
        with self._lock:
            if self._conn is None or self._conn.closed:
                self._conn = self._open()
            conn = self._conn
            try:
                with conn.transaction():
                    if writes and not self._in_recovery:
                        conn.execute("SET TRANSACTION READ WRITE")
                    return work(conn)
            except psycopg.OperationalError as e:
                if conn.closed or conn.broken:
                    self.close()
                    raise ToolFailure(
                        f"nl2sql-mcp: the connection to the database ({self.where}) was lost: "
                        f"{message_of(e)}; the server connects again on the next call"
                    ) from None
                raise ToolFailure(message_of(e), from_database=True) from None
            except psycopg.Error as e:
                raise ToolFailure(message_of(e), from_database=True) from None
            except Nl2sqlError as e:  # the pipeline in this process (in_process)
                hint = getattr(e, "hint", None)
                text = f"{e} (hint: {hint})" if hint else str(e)
                raise ToolFailure(text, from_database=True) from None


def one(conn: psycopg.Connection, sql: str, params: dict[str, Any] | tuple = ()) -> Any:
    """The first column of the first row of ``sql``, or None when it returns no row.

    Args:
        conn: the connection.
        sql: one statement.
        params: its parameters.

    Returns:
        The value.
    """
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]
