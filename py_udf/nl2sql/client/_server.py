"""The Python API where the extension is installed (``Served``, mixed into ``Client``): each call
is the extension's SQL function (``nl2sql.ask``, ``nl2sql.explain``, ``nl2sql.chart``, …) run by
the server over the client's connection, its result read here (docs/client.md)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import pq
from psycopg import sql as q
from psycopg.rows import tuple_row

from ..agent.view import AgentView
from ..core.errors import ClientError, Nl2sqlError

# whether the extension is installed, whether this server is a replica (it writes no query
# log) and whether the query log's writer is the extension's (PL/Python: it takes rows only
# from the pipeline inside the server)
_WHERE = (
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'nl2sql'),"
    " pg_catalog.pg_is_in_recovery(),"
    " EXISTS (SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l"
    " ON l.oid = p.prolang JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace"
    " WHERE n.nspname = 'nl2sql' AND p.proname = '_log_query' AND l.lanname LIKE 'plpython%')"
)
# this call's row of a conversation: the newest with the key, after the call began
_TURN = (
    "SELECT id, trace FROM nl2sql.my_query_log WHERE conversation = %s AND id > %s "
    "ORDER BY id DESC LIMIT 1"
)
_LAST_TURN = "SELECT coalesce(max(id), 0) FROM nl2sql.my_query_log WHERE conversation = %s"
_SET_PATH = "SELECT pg_catalog.set_config('search_path', %s, true)"
_ONE_OFF = "nl2sql-client "  # the conversation key of an ask that is no follow-up


@dataclass(frozen=True)
class Where:
    """What the client found in the database (``Served.on_server``)."""

    extension: bool  # the extension is installed: its SQL functions answer
    replica: bool  # a server in recovery: the extension logs nothing there
    server_log: bool  # the query log takes rows only from the pipeline inside the server


def client_error(e: psycopg.Error) -> ClientError:
    """An error of the server as a ``ClientError``: its primary message (without PL/Python's
    exception prefix and traceback), hint and SQLSTATE; a lost connection says so.

    Args:
        e: psycopg's error.

    Returns:
        The error to raise.
    """
    state = getattr(e, "sqlstate", None)
    if state is None:  # no answer of the server: the connection
        why = str(e).strip() or type(e).__name__
        return ClientError(
            f"nl2sql: the database connection failed: {why}",
            hint="check the DSN and that the server is up",
        )
    msg = e.diag.message_primary or str(e).splitlines()[0]
    for prefix in ("plpy.Error: ", "plpy.SPIError: "):
        msg = msg.removeprefix(prefix)
    msg = msg if msg.startswith("nl2sql") else f"nl2sql: {msg}"
    return ClientError(msg, hint=e.diag.message_hint, sqlstate=state)


def _call_sql(function: str, names: list[str], set_returning: bool) -> q.Composed:
    """``SELECT schema.function(name => %(name)s, …)`` (``SELECT * FROM`` for a set)."""
    schema, _, name = function.partition(".")
    named = q.SQL(", ").join(
        q.SQL("{} => {}").format(q.Identifier(k), q.Placeholder(k)) for k in names
    )
    call = q.SQL("{}({})").format(q.Identifier(schema, name), named)
    return q.SQL("SELECT * FROM {}" if set_returning else "SELECT {}").format(call)


def call(cur: psycopg.Cursor, function: str, set_returning: bool = False, **args: Any) -> Any:
    """Run one SQL function; an argument that is None is left out (its default applies: NULL,
    or the connection's search_path).

    Args:
        cur: a cursor in the call's transaction.
        function: ``schema.name``.
        set_returning: the function returns a set (or a table): every row is returned.
        **args: its arguments by name.

    Returns:
        Its value (jsonb as Python objects), or the rows of a set.

    Raises:
        psycopg.Error: the function raised.
    """
    given = {k: v for k, v in args.items() if v is not None}
    cur.execute(_call_sql(function, list(given), set_returning), given)
    return cur.fetchall() if set_returning else cur.fetchone()[0]


class Served:
    """Mixed into ``Client``: needs its ``conn``, ``plpy``, ``for_model``, ``in_process`` and
    ``_answer_of``/``_answer_rows`` (the ``Answer`` as either mode makes it)."""

    conn: psycopg.Connection
    plpy: Any
    for_model: bool
    in_process: bool
    _where: Where | None
    _answer_of: Callable[..., Any]
    _answer_rows: Callable[..., Any]

    def on_server(self) -> bool:
        """Whether calls go to the extension's SQL functions: it is installed and the client
        was not asked to run ``in_process`` (read once).

        Returns:
            True where the server answers.

        Raises:
            ClientError: the database could not be read.
        """
        if self._where is None:
            try:
                row = psycopg.Cursor(self.conn, row_factory=tuple_row).execute(_WHERE).fetchone()
            except psycopg.Error as e:
                raise client_error(e) from None
            self._where = Where(bool(row[0]), bool(row[1]), bool(row[2]))
        return self._where.extension and not self.in_process

    @contextlib.contextmanager
    def _served(self) -> Iterator[psycopg.Cursor]:
        """One call's transaction (a savepoint inside the caller's); the server's notices go
        where the pipeline's go (``plpy.notice``), its errors become ``ClientError``."""

        def notice(diag: psycopg.errors.Diagnostic) -> None:
            level = (diag.severity_nonlocalized or "").lower()
            (self.plpy.warning if level == "warning" else self.plpy.notice)(diag.message_primary)

        self.conn.add_notice_handler(notice)
        try:
            with self.conn.transaction():
                yield psycopg.Cursor(self.conn, row_factory=tuple_row)
        except ClientError:
            raise
        except psycopg.Error as e:
            raise client_error(e) from None
        except (self.plpy.Error, self.plpy.SPIError, Nl2sqlError) as e:  # reads done here
            msg = str(e) if str(e).startswith("nl2sql") else f"nl2sql: {e}"
            hint, state = getattr(e, "hint", None), getattr(e, "sqlstate", None)
            raise ClientError(msg, hint=hint, sqlstate=state) from None
        finally:
            self.conn.remove_notice_handler(notice)

    def _view(self, cur: psycopg.Cursor, search_path: str | None) -> AgentView:
        """The role's gate over what a model reader gets (``for_model``)."""
        return AgentView(self.plpy, search_path or cur.execute("SHOW search_path").fetchone()[0])

    def _served_value(
        self,
        function: str,
        search_path: str | None = None,
        view: Callable[[Any, AgentView], Any] | None = None,
        set_returning: bool = False,
        **args: Any,
    ) -> Any:
        """One SQL function of the extension, in a transaction of its own.

        Args:
            function: ``schema.name``.
            search_path: the names' search_path; None: the connection's.
            view: with ``for_model``, ``view(value, the role's AgentView)`` is returned.
            set_returning: the function returns rows.
            **args: its other arguments by name.

        Returns:
            Its value (or rows).

        Raises:
            ClientError: what the function raised (message, hint, SQLSTATE).
        """
        with self._served() as cur:
            got = call(cur, function, set_returning, search_path=search_path, **args)
            if view is not None and self.for_model:
                got = view(got, self._view(cur, search_path))
            return got

    def _served_ask(self, question: str, evidence, conversation, search_path) -> Any:
        """``Client.ask`` where the extension is installed: ``nl2sql.ask``'s rows (the chosen
        SQL runs once, in the vote) with the trace the server logged for the call, read back by
        its conversation key; on a replica (nothing logged) ``nl2sql.explain``'s trace, then
        the chosen SQL's rows fetched again."""
        args = {"evidence": evidence, "search_path": search_path}
        with self._served() as cur:
            if self._where.replica:
                trace = call(
                    cur, "nl2sql.explain", question=question, **args, conversation=conversation
                )
                if trace.get("sql") is not None:
                    caller = search_path or cur.execute("SHOW search_path").fetchone()[0]
                    return self._answer_rows(question, trace, None, caller)
                why = "the trace (.trace, or nl2sql explain) says why"
                err = ClientError(trace.get("error") or "nl2sql: no SQL chosen", hint=why)
                err.trace = trace
            else:
                answer, err = self._asked(cur, question, conversation, args)
                if err is None:
                    return answer
        raise err  # after the commit: the one-off key forgotten

    def _asked(self, cur, question, conversation, args: dict) -> tuple[Any, Any]:
        """``nl2sql.ask`` with a conversation key (a one-off one, forgotten after, when the
        caller gave none) and its logged trace: ``(Answer, None)``, or ``(None, the error)``
        with ``trace`` when the failed call's row was kept (never missing but on a replica:
        ``sql`` None there)."""
        key = conversation or f"{_ONE_OFF}{uuid.uuid4()}"
        before = 0 if conversation is None else cur.execute(_LAST_TURN, (key,)).fetchone()[0]
        try:
            with self.conn.transaction():
                rows = call(cur, "nl2sql.ask", True, question=question, conversation=key, **args)
        except psycopg.Error as e:
            err = client_error(e)
            err.trace = self._turn(cur, key, before, conversation is None)
            return None, err
        trace = self._turn(cur, key, before, conversation is None)
        trace = trace or {"question": question, "sql": None, "log_id": None}
        dicts, search_path = [r[0] for r in rows], args["search_path"]
        columns = self._columns(trace["sql"], search_path)
        if columns is None:  # not described: the keys as jsonb orders them
            columns = list(dicts[0]) if dicts else []
        tuples = [tuple(d.get(c) for c in columns) for d in dicts]
        caller = search_path or cur.execute("SHOW search_path").fetchone()[0]
        return self._answer_of(question, trace, columns, tuples, caller), None

    def _turn(self, cur: psycopg.Cursor, key: str, before: int, one_off: bool) -> dict | None:
        """The trace logged for this call (``log_id`` added), None when none was kept; a
        one-off key is forgotten and left out of the trace."""
        row = cur.execute(_TURN, (key, before)).fetchone()
        if one_off:
            cur.execute("SELECT nl2sql.forget_conversation(%s)", (key,))
        if row is None:
            return None
        trace = dict(row[1], log_id=row[0])
        if one_off:
            trace.pop("conversation", None)
        return trace

    def _columns(self, sql: str | None, search_path: str | None) -> list[str] | None:
        """The output columns of ``sql`` in their order (``nl2sql.ask``'s jsonb rows do not keep
        it), as PostgreSQL describes the prepared statement under ``search_path``: parsed and
        planned, never run; None when it cannot be described (a relation gone since)."""
        if not sql:
            return None
        cur = psycopg.Cursor(self.conn, row_factory=tuple_row)
        try:  # rolled back: the search_path as it was
            with self.conn.transaction(force_rollback=True):
                if search_path is not None:
                    cur.execute(_SET_PATH, (search_path,))
                return self._describe(sql)
        except (psycopg.Error, _NotDescribed):
            return None

    def _describe(self, sql: str) -> list[str]:
        """``_columns``' prepare and describe of the unnamed statement (libpq's own calls)."""
        enc = self.conn.info.encoding
        pgconn = self.conn.pgconn
        res = pgconn.prepare(b"", sql.encode(enc))
        if res.status != pq.ExecStatus.COMMAND_OK:
            raise _NotDescribed
        res = pgconn.describe_prepared(b"")
        if res.status != pq.ExecStatus.COMMAND_OK:
            raise _NotDescribed
        return [(res.fname(i) or b"").decode(enc) for i in range(res.nfields)]


class _NotDescribed(Exception):
    """The chosen SQL could not be prepared or described (the savepoint rolls back)."""
