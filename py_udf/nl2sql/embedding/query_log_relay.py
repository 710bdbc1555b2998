"""The query log row of a call that fails because no SQL was chosen, written by the shared
process on a connection of its own, so the error that rolls the caller back cannot undo it
(``POST /nl2sql/v1/log``; docs/internals/embedding.md "Failed calls' log rows").

The backend's side (``relay_log``) posts the row, already redacted, with the role it is for
(``nl2sql._acting_role``, as the in-transaction writer attributes it) and the database; the
process's side (``write_row``) connects over the server's Unix socket, named in the data
directory's ``postmaster.pid``, as the OS user's own role (libpq's default user: peer or trust
authentication, as Debian's ``local all postgres peer``), inserts the row and commits at once.
Only backends reach the process's socket (``embed.sock``, mode 0600, in a folder of mode 0700
in the data directory), so no role can post a row of its own."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from ..core.errors import EmbedderConnectError, EmbedderTimeout, LogNotKept, LogRowInvalid
from ..net import deadline as net_deadline
from . import client
from ._unix_http import UnixClient

ROUTE = "/nl2sql/v1/log"
LOG_TIMEOUT_S = 6.0  # the backend's wait: more than the process's own limits below (5 s)
CONNECT_TIMEOUT_S = 2  # libpq's connect_timeout (whole seconds, 2 at least)
STATEMENT_TIMEOUT_MS = 2000  # the insert's limit (a lock held on the table: given up)
USAGE_LOCK_TIMEOUT_MS = 500  # the role's day locked by another session: the usage given up
MAX_WRITERS = 4  # connections the process opens at once (each failed call: one, briefly)
WAIT_WRITER_S = 1.0  # how long a row waits for one of them before it is refused
APPLICATION_NAME = "nl2sql shared process (query log)"
_INSERT = (
    "INSERT INTO nl2sql.query_log (role_name, question, sql, confidence, error, trace, "
    "conversation) VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s) RETURNING id"
)
# the call's use, added to its role's day in the same transaction as the row (a failed call's
# question and tokens count against its quotas and show in nl2sql.usage, as an answered one's)
_USAGE_ADD = "SELECT nl2sql._usage_add(%s, %s, %s, %s, %s, %s::numeric)"
_USAGE_FIELDS = ("questions", "prompt", "completion", "estimated")  # whole numbers >= 0
_TEXT_FIELDS = ("db", "role_name", "question", "trace")  # required, text
_OPTIONAL_TEXT = ("sql", "error", "conversation")
NOT_IN_USE = "the shared process is not in use (setting embedder = 'local')"

_HTTP: list[UnixClient] = []  # this backend's client of the socket (made on first use)
_LAST: dict = {"why": None, "at": None}  # this backend's last row not kept, for doctor()
_WRITERS = threading.BoundedSemaphore(MAX_WRITERS)


def relay_log(row: dict) -> tuple[int | None, str | None]:
    """Have the shared process write a failed call's ``nl2sql.query_log`` row and commit it; it
    is not started for this (the question's embeddings started it when it was down).

    Args:
        row: ``{"db", "role_name", "question", "sql", "confidence", "error", "trace",
            "conversation", "usage"}``: ``trace`` as JSON text, every value already redacted;
            ``usage`` (``usage_values``) the call's question and tokens, or None.

    Returns:
        ``(id, None)`` when the row was written and committed; ``(None, why)`` when it was not
        (no process in use or running, refused, too old, no answer within ``LOG_TIMEOUT_S``):
        the caller writes it in its own transaction instead. ``why`` names no path.

    Raises:
        plpy.SPIError: the statement was cancelled while it waited (``net.deadline``).
    """
    if not client.active():
        return None, NOT_IN_USE
    try:
        resp = _http().post(ROUTE, json=row, timeout=LOG_TIMEOUT_S)
    except EmbedderConnectError:
        return _not_kept("the shared process is not running")
    except EmbedderTimeout:
        return _not_kept(f"the shared process did not answer within {LOG_TIMEOUT_S:g} s")
    except Exception as e:  # noqa: BLE001 - any failure: the caller's transaction writes it
        net_deadline.raise_cancel(e)
        return _not_kept(f"the shared process failed ({type(e).__name__})")
    if resp.status_code in (404, 405):
        return _not_kept("the shared process is older than this version: restart it")
    try:
        got = resp.json()
        if resp.status_code == 200:
            return int(got["id"]), None
        why = str(got["error"]["message"])[:300]
    except (ValueError, KeyError, TypeError):
        why = f"the shared process answered HTTP {resp.status_code}"
    return _not_kept(why)


def _http() -> UnixClient:
    """The client of the shared process's socket (kept; its connection opened on use)."""
    if not _HTTP:
        _HTTP.append(UnixClient(client.socket_path(client.directory()), timeout=LOG_TIMEOUT_S))
    return _HTTP[0]


def _not_kept(why: str) -> tuple[None, str]:
    _LAST.update(why=why, at=time.time())
    return None, why


def last_not_kept() -> dict:
    """This backend's last failed call whose row the shared process did not write.

    Returns:
        ``{"why", "at"}`` (a Unix time); both None when there was none.
    """
    return dict(_LAST)


def server_socket(pid_text: str) -> tuple[str, int]:
    """The PostgreSQL server's Unix socket directory and port, from its ``postmaster.pid``.

    Args:
        pid_text: the file's text (line 4 the port, line 5 the first socket directory).

    Returns:
        ``(directory, port)``.

    Raises:
        LogNotKept: the server listens on no Unix socket, or the file is not a server's.
    """
    lines = pid_text.splitlines()
    try:
        port = int(lines[3])
    except (IndexError, ValueError):
        raise LogNotKept("the data directory's postmaster.pid names no port") from None
    where = lines[4].strip() if len(lines) > 4 else ""
    if not where:
        raise LogNotKept("the server listens on no Unix socket (unix_socket_directories is empty)")
    return where, port


def row_values(payload: dict) -> tuple[str, list]:
    """Check a posted row and give the database and the insert's parameters.

    Args:
        payload: the body of ``POST /nl2sql/v1/log`` (``relay_log``'s ``row``).

    Returns:
        ``(database, [role_name, question, sql, confidence, error, trace, conversation])``.

    Raises:
        LogRowInvalid: a field is missing, of the wrong type, or ``trace`` is not a JSON object.
        ValueError: ``trace`` is not JSON.
    """
    if not isinstance(payload, dict):
        raise LogRowInvalid("the row is not a JSON object")
    for k in _TEXT_FIELDS:
        if not isinstance(payload.get(k), str) or (k != "question" and not payload[k]):
            raise LogRowInvalid(f"{k} must be a non-empty text")
    for k in _OPTIONAL_TEXT:
        if not isinstance(payload.get(k), str | None):
            raise LogRowInvalid(f"{k} must be a text or null")
    conf = payload.get("confidence")
    if conf is not None and (isinstance(conf, bool) or not isinstance(conf, int | float)):
        raise LogRowInvalid("confidence must be a number or null")
    if not isinstance(json.loads(payload["trace"]), dict):
        raise LogRowInvalid("trace must be a JSON object")
    p = payload
    return p["db"], [
        p["role_name"],
        p["question"],
        p.get("sql"),
        conf,
        p.get("error"),
        p["trace"],
        p.get("conversation"),
    ]


def usage_values(payload: dict) -> list | None:
    """Check a posted row's ``usage`` (the call's question and tokens, ``model.quota.record``'s
    amounts) and give ``nl2sql._usage_add``'s parameters.

    Args:
        payload: the body of ``POST /nl2sql/v1/log``; its ``usage`` is optional.

    Returns:
        ``[role_name, questions, prompt, completion, estimated, cost_usd text]``, or None when
        the row carries no usage.

    Raises:
        LogRowInvalid: ``usage`` is not an object of whole numbers >= 0 (``cost_usd`` a number
            >= 0 or null).
    """
    usage = payload.get("usage")
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise LogRowInvalid("usage must be a JSON object or null")
    out = [payload["role_name"]]
    for k in _USAGE_FIELDS:
        v = usage.get(k, 0)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise LogRowInvalid(f"usage.{k} must be a whole number >= 0")
        out.append(v)
    cost = usage.get("cost_usd") or 0
    if isinstance(cost, bool) or not isinstance(cost, int | float) or cost < 0:
        raise LogRowInvalid("usage.cost_usd must be a number >= 0 or null")
    return [*out, str(cost)]


def write_row(data_dir: Path, payload: dict) -> int:
    """Insert a posted row into ``nl2sql.query_log`` and add its ``usage`` to the role's day
    (``nl2sql._usage_add``) on a connection of this process's own, as the OS user's role, in one
    transaction committed at once; the connection is closed afterwards (an idle session would
    keep DROP DATABASE, a rename, or CREATE DATABASE from it as a template from working).

    Args:
        data_dir: the cluster's data directory (``postmaster.pid`` names the socket).
        payload: the posted row (``row_values``).

    Returns:
        The new row's id.

    Raises:
        ValueError: the row is invalid (``row_values``: ``LogRowInvalid``, a ``LogNotKept``).
        LogNotKept: no socket, no connection, or the insert failed; the message, for the
            backend, names no path (the detail goes to this process's log).
    """
    import psycopg  # the shared process only: backends never import it

    db, values = row_values(payload)
    usage = usage_values(payload)
    try:
        host, port = server_socket((data_dir / "postmaster.pid").read_text())
    except OSError as e:
        raise LogNotKept(
            f"cannot read the data directory's postmaster.pid ({e.strerror})"
        ) from None
    if not (host.startswith("@") or os.path.isabs(host)):  # relative to the data directory
        host = os.fspath(data_dir / host)
    if not _WRITERS.acquire(timeout=WAIT_WRITER_S):
        raise LogNotKept(f"{MAX_WRITERS} rows were being written already")
    try:
        try:
            conn = psycopg.connect(
                host=host,
                port=port,
                dbname=db,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name=APPLICATION_NAME,
                options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS} -c search_path=pg_catalog",
            )
        except psycopg.Error as e:
            _log_detail(db, e)
            raise LogNotKept("the shared process could not connect to the database") from None
        with conn, conn.transaction():
            got = conn.execute(_INSERT, values).fetchone()[0]
            if usage is not None:
                _add_usage(conn, db, usage)
            return got
    except psycopg.Error as e:
        _log_detail(db, e)
        raise LogNotKept(f"the shared process's insert failed ({type(e).__name__})") from None
    finally:
        _WRITERS.release()


def _add_usage(conn, db: str, usage: list) -> None:
    """Add the call's usage in a savepoint: a role's day locked elsewhere (a session counting
    with the row lock) or a refused amount costs the usage, never the row (said in the log)."""
    import psycopg  # the shared process only: backends never import it

    try:
        with conn.transaction():
            conn.execute(f"SET LOCAL lock_timeout = {USAGE_LOCK_TIMEOUT_MS}")
            conn.execute(_USAGE_ADD, usage)
    except psycopg.Error as e:
        _log_detail(db, e, "its usage was not added")


def _log_detail(db: str, e: Exception, what: str = "not written") -> None:
    """Say in the process's log (``embedder.log``) why a row was not written (``what``)."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    print(
        f"nl2sql embedder {os.getpid()}: query log row for database {db!r} {what}: {first}",
        flush=True,
    )
