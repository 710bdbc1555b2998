"""PL/Python's ``plpy`` over a psycopg 3 connection: what the package uses of it (``execute``,
``prepare``, ``subtransaction``, ``quote_ident``, ``error``/``notice``, ``Error``,
``SPIError``), so that the pipeline runs unchanged beside the database (docs/client.md)."""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.rows import dict_row, tuple_row
from psycopg.types.string import TextLoader

LOG = logging.getLogger("nl2sql")

# PL/Python gives these types to Python as their text (psycopg would parse them)
_AS_TEXT = (
    "json", "jsonb", "date", "time", "timetz", "timestamp", "timestamptz", "interval",
    "uuid", "inet", "cidr", "macaddr", "money",
)  # fmt: skip
_BOOL_OID = 16
_BYTEA_OID = 17


class _PlpyError(Exception):
    """``plpy.Error``: what ``plpy.error`` raises (message, ``detail``, ``hint``, ``sqlstate``)."""

    def __init__(self, msg: str = "", detail=None, hint=None, sqlstate=None):
        super().__init__(msg)
        self.detail, self.hint, self.sqlstate = detail, hint, sqlstate


class _SPIError(Exception):
    """``plpy.SPIError``: a statement failed; ``sqlstate``, ``detail``, ``hint``, ``spidata``."""

    def __init__(self, msg: str = "", sqlstate=None, detail=None, hint=None):
        super().__init__(msg)
        self.sqlstate, self.detail, self.hint = sqlstate, detail, hint
        self.spidata = (sqlstate, detail, hint, None, None)


Error = _PlpyError
SPIError = _SPIError


class _SpiExceptions:
    """``plpy.spiexceptions``: one ``SPIError`` subclass per psycopg error class name
    (``QueryCanceled``, ``InsufficientPrivilege``, …), made on first use."""

    def __init__(self) -> None:
        self._made: dict[str, type] = {}

    def __getattr__(self, name: str) -> type:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._made:
            self._made[name] = type(name, (_SPIError,), {"__module__": __name__})
        return self._made[name]


spiexceptions = _SpiExceptions()


def spi_error(e: psycopg.Error) -> _SPIError:
    """The ``SPIError`` (``spiexceptions`` subclass when PostgreSQL named the error) for ``e``.

    Args:
        e: psycopg's error.

    Returns:
        The error to raise, message and diagnostics copied.
    """
    diag = e.diag
    state = getattr(e, "sqlstate", None) or diag.sqlstate
    name = type(e).__name__
    cls = getattr(spiexceptions, name) if state and name[:1].isupper() else _SPIError
    return cls(diag.message_primary or str(e), state, diag.message_detail, diag.message_hint)


class Plan:
    """``plpy.prepare``'s plan: the statement and its parameter types (no connection: the
    package keeps plans per process, ``core/spi.py``, and a client may hold several)."""

    __slots__ = ("sql", "types")

    def __init__(self, sql: str, types: Sequence[str]):
        self.sql, self.types = sql, tuple(types)


class Result(list):
    """``plpy.execute``'s result: a list of dict rows with ``nrows``, ``status``, ``colnames``."""

    def __init__(self, rows: list, colnames: list[str], nrows: int, status: str):
        super().__init__(rows)
        self._colnames, self._nrows, self._status = colnames, nrows, status

    def nrows(self) -> int:
        """Rows returned or affected.

        Returns:
            The count.
        """
        return self._nrows

    def status(self) -> str:
        """The command's status text.

        Returns:
            E.g. ``SELECT 3``.
        """
        return self._status

    def colnames(self) -> list[str]:
        """The result's column names.

        Returns:
            The names, in order.
        """
        return list(self._colnames)


class _Typed:
    """A parameter already as its text, sent with its declared type's oid."""

    __slots__ = ("text", "oid")

    def __init__(self, text: str, oid: int):
        self.text, self.oid = text, oid


class _TypedDumper(Dumper):
    """Dumps ``_Typed`` with its own oid (one dumper per oid, as psycopg's list dumpers do)."""

    oid = 0

    def get_key(self, obj: _Typed, format) -> tuple:
        return (_Typed, obj.oid)

    def upgrade(self, obj: _Typed, format) -> _TypedDumper:
        d = _TypedDumper(_Typed)
        d.oid = obj.oid
        return d

    def dump(self, obj: _Typed) -> bytes:
        return obj.text.encode()


def _array_text(value: Any) -> str:
    """A Python sequence as a PostgreSQL array literal (nested sequences: more dimensions)."""
    parts = []
    for v in value:
        if v is None:
            parts.append("NULL")
        elif isinstance(v, list | tuple):
            parts.append(_array_text(v))
        else:
            parts.append('"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "{" + ",".join(parts) + "}"


def as_text(value: Any, oid: int, is_array: bool) -> str:
    """A parameter's text as PL/Python would make it for its declared type.

    Args:
        value: the Python value (not None).
        oid: the declared type's oid. is_array: whether that type is an array type.

    Returns:
        The text PostgreSQL's input function reads.
    """
    if oid == _BOOL_OID:
        return "t" if value else "f"
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if is_array and not isinstance(value, str):
        return _array_text(list(value))
    return str(value)


def quote_literal(value: str) -> str:
    """PostgreSQL's ``quote_literal``: ``'it''s'``, ``E'a\\\\b'`` when it holds a backslash.

    Args:
        value: the text.

    Returns:
        The literal.
    """
    body = value.replace("'", "''")
    if "\\" in value:
        return "E'" + body.replace("\\", "\\\\") + "'"
    return "'" + body + "'"


_TIMEOUT_MS = (
    "SELECT EXTRACT(epoch FROM pg_catalog.current_setting('statement_timeout')::interval)"
    "::float8 * 1000 AS ms"
)


def _timed_out() -> _SPIError:
    """The error of a statement past the call's ``statement_timeout``, as PostgreSQL words it."""
    return spiexceptions.QueryCanceled(
        "canceling statement due to statement timeout",
        "57014",
        None,
        "the whole call (not each statement) is bounded by statement_timeout beside the "
        "database, as SELECT nl2sql(...) is in the server: raise it (SET statement_timeout) "
        "or set it to 0",
    )


class _Watchdog:
    """The time limit of one statement beside the database: psycopg's cancel request for the
    connection's running statement after ``timeout_ms`` unless stopped first."""

    def __init__(self, conn: psycopg.Connection, timeout_ms: int):
        self.fired = False
        self._conn = conn
        self._timer = threading.Timer(max(timeout_ms, 1) / 1000.0, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        with contextlib.suppress(psycopg.Error):
            self._conn.cancel_safe(timeout=5.0)

    def stop(self) -> bool:
        """Stop the clock.

        Returns:
            True when the cancel had been sent already.
        """
        self._timer.cancel()
        return self.fired


class Plpy:
    """``plpy`` for the package's code, over one psycopg connection (the caller's role, its
    transaction: subtransactions are savepoints).

    Args:
        conn: an open psycopg 3 connection.
        on_notice: called with (level, message) for ``plpy.notice`` and the like; None logs
            them to the ``nl2sql`` logger.
    """

    Error = _PlpyError
    SPIError = _SPIError
    spiexceptions = spiexceptions
    embedder = "local"  # the shared embedding process is the server's: embed in this process
    deadline: float | None = None  # when the call's statement_timeout runs out (call_timeout)

    def __init__(
        self, conn: psycopg.Connection, on_notice: Callable[[str, str], None] | None = None
    ):
        self.conn = conn
        self.on_notice = on_notice
        # the trace of a call that raises because no SQL was chosen (``udf._failed_log.keep``):
        # ``Client`` logs it once the call's transaction rolled back, where the error cannot
        # undo it (as the shared process does inside PostgreSQL)
        self.rows_after_rollback: list[dict] = []
        self._cur = psycopg.RawCursor(conn, row_factory=dict_row)
        self._cur.adapters.register_dumper(_Typed, _TypedDumper)
        for name in _AS_TEXT:
            info = psycopg.postgres.types.get(name)
            if info is not None:
                self._cur.adapters.register_loader(info.oid, TextLoader)
        self._oids: dict[str, tuple[int, bool]] = {}
        self._quoted: dict[str, str] = {}

    # --- statements ---------------------------------------------------------------------

    def prepare(self, sql: str, types: Sequence[str] | None = None) -> Plan:
        """``plpy.prepare``: the statement with its parameter types (prepared by the server
        when psycopg sees it run often).

        Args:
            sql: the statement, parameters ``$1``, ``$2``, …. types: their type names.

        Returns:
            The plan for ``execute``.
        """
        return Plan(sql, types or ())

    def execute(self, query: str | Plan, args: Sequence[Any] | None = None, limit: int = 0):
        """``plpy.execute``: run a statement text or a plan with ``args``.

        Args:
            query: the statement or ``prepare``'s plan. args: one value per parameter.
            limit: most rows returned (0: all).

        Returns:
            A ``Result``: dict rows as PL/Python gives them (json, dates as text).

        Raises:
            SPIError: the statement failed (an ``spiexceptions`` subclass, ``sqlstate`` set).
        """
        if isinstance(query, Plan):
            sql, params = query.sql, self._params(query.types, list(args or ()))
        else:
            sql, params = query, None
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise _timed_out()
        try:
            self._cur.execute(sql, params)
            desc = self._cur.description
            rows = (self._cur.fetchmany(limit) if limit else self._cur.fetchall()) if desc else []
        except psycopg.Error as e:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                raise _timed_out() from None  # the call's watchdog cancelled it
            raise spi_error(e) from None
        names = [d.name for d in desc] if desc else []
        n = len(rows) if desc else max(self._cur.rowcount, 0)
        return Result(rows, names, n, self._cur.statusmessage or "")

    def _params(self, types: tuple[str, ...], args: list[Any]) -> list[Any]:
        """Each argument as its declared type's text (PL/Python's conversion)."""
        out: list[Any] = []
        for i, v in enumerate(args):
            if v is None:
                out.append(None)
                continue
            oid, is_array = self._type(types[i]) if i < len(types) else (0, False)
            out.append(_Typed(as_text(v, oid, is_array), oid))
        return out

    def _type(self, name: str) -> tuple[int, bool]:
        """(oid, is an array type) of a type name, asked once per connection."""
        got = self._oids.get(name)
        if got is None:
            with self.conn.cursor(row_factory=tuple_row) as cur:
                cur.execute(
                    "SELECT t.oid::int, t.typcategory = 'A' FROM pg_catalog.pg_type t "
                    "WHERE t.oid = %s::text::regtype",
                    (name,),
                )
                oid, is_array = cur.fetchone()
            got = self._oids[name] = (oid, is_array)
        return got

    @contextlib.contextmanager
    def subtransaction(self) -> Iterator[None]:
        """``plpy.subtransaction``: a savepoint, rolled back when the block raises.

        Yields:
            Nothing: the block runs inside the savepoint.
        """
        with self.conn.transaction():
            yield

    def statement_remaining_s(self) -> float | None:
        """Seconds left of the call's ``statement_timeout`` (``call_timeout``), what the
        server's ``generation.db_checks.statement_remaining_s`` reads of one statement.

        Returns:
            Seconds (negative when over), or None outside a call or without a timeout.
        """
        return None if self.deadline is None else self.deadline - time.monotonic()

    @contextlib.contextmanager
    def call_timeout(self) -> Iterator[None]:
        """Bound one call (a question, a reindex step) by the connection's
        ``statement_timeout`` as the server bounds the one statement ``SELECT nl2sql(...)``:
        the model calls get the time left (``statement_remaining_s``), a statement running at
        the limit is cancelled, and every statement after it fails with SQLSTATE 57014.

        Yields:
            Nothing: the call runs inside (unbounded when ``statement_timeout`` is 0).
        """
        if self.deadline is not None:  # inside a bounded call already
            yield
            return
        ms = self.execute(_TIMEOUT_MS)[0]["ms"]
        if not ms:
            yield
            return
        self.deadline = time.monotonic() + ms / 1000.0
        dog = _Watchdog(self.conn, int(ms))
        try:
            yield
        finally:
            dog.stop()
            self.deadline = None

    def watchdog(self, timeout_ms: int) -> _Watchdog:
        """The time limit of the next statement (``generation/execute.py``): a cancel request
        for it after ``timeout_ms``; the statement then fails with SQLSTATE 57014.

        Args:
            timeout_ms: milliseconds until the cancel.

        Returns:
            The armed clock (``stop()`` says whether it fired).
        """
        return _Watchdog(self.conn, timeout_ms)

    # --- quoting and messages -------------------------------------------------------------

    def quote_ident(self, name: str) -> str:
        """``plpy.quote_ident``: the server's own ``quote_ident`` (its keyword list), kept.

        Args:
            name: the identifier.

        Returns:
            It quoted where PostgreSQL needs quotes.
        """
        got = self._quoted.get(name)
        if got is None:
            got = self.execute(Plan("SELECT pg_catalog.quote_ident($1) AS q", ["text"]), [name])
            got = self._quoted[name] = got[0]["q"]
        return got

    @staticmethod
    def quote_literal(value: str) -> str:
        """``plpy.quote_literal``.

        Args:
            value: the text.

        Returns:
            The literal.
        """
        return quote_literal(value)

    @staticmethod
    def quote_nullable(value: str | None) -> str:
        """``plpy.quote_nullable``.

        Args:
            value: the text, or None.

        Returns:
            The literal, or ``NULL``.
        """
        return "NULL" if value is None else quote_literal(value)

    def error(self, msg: str, detail=None, hint=None, sqlstate=None, **_kw) -> None:
        """``plpy.error``: raise ``Error`` with the message and its diagnostics.

        Args:
            msg: the message. detail, hint, sqlstate: its diagnostics, or None.

        Raises:
            Error: always.
        """
        raise _PlpyError(msg, detail, hint, sqlstate)

    fatal = error

    def _say(self, level: str, msg: str, **_kw: Any) -> None:
        if self.on_notice is not None:
            self.on_notice(level, str(msg))
        else:
            LOG.log(logging.WARNING if level == "warning" else logging.INFO, "%s", msg)

    # plpy.notice, warning, info, log, debug: the message to ``on_notice`` (or the logger)
    notice = functools.partialmethod(_say, "notice")
    warning = functools.partialmethod(_say, "warning")
    info = functools.partialmethod(_say, "info")
    log = functools.partialmethod(_say, "log")
    debug = functools.partialmethod(_say, "debug")
