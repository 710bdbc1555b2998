"""The query log's writer: ``log_query`` issues a one-time token that ``write_log``, the body
of SECURITY DEFINER ``nl2sql._log_query``, requires."""

from __future__ import annotations

import hmac
import json
import secrets

from . import spi

# The one-time token of the log row being written (``log_query`` → ``write_log``): it lives only
# in this backend's Python interpreter, which only PL/Python code can reach (plpython3u is
# untrusted: only superusers create functions in it), so no role can pass it by itself.
_log_token: str | None = None


def log_query(plpy, trace: dict) -> int | None:
    """Write the call's ``nl2sql.query_log`` row through ``nl2sql._log_query`` (with a token).

    Args:
        trace: the call's trace (already redacted by the caller); its ``conversation`` key,
            when set, is stored with the row (a turn of that conversation).

    Returns:
        The log row's id, or None on a server in recovery (read replica), where nothing is
        written.

    Raises:
        plpy.SPIError: the insert failed.
    """
    global _log_token
    if spi.query(plpy, "SELECT pg_catalog.pg_is_in_recovery() AS r")[0]["r"]:
        return None
    _log_token = secrets.token_hex(32)
    try:
        res = spi.query(
            plpy,
            "SELECT nl2sql._log_query($1, current_user, $2, $3, $4, $5, $6::jsonb, $7) AS id",
            [
                _log_token,
                trace.get("question") or "",
                trace.get("sql"),
                trace.get("confidence"),
                trace.get("error"),
                json.dumps(trace, default=str),
                trace.get("conversation"),
            ],
            ["text", "text", "text", "float8", "text", "text", "text"],
        )
    finally:
        _log_token = None
    return res[0]["id"]


def write_log(
    plpy,
    sd: dict,
    token: str | None,
    role_name: str | None,
    question: str | None,
    sql: str | None,
    confidence: float | None,
    error: str | None,
    trace: str | None,
    conversation: str | None = None,
) -> int:
    """Insert one ``nl2sql.query_log`` row (body of ``nl2sql._log_query``) when ``token`` is
    ``log_query``'s one-time token; the row is ``role_name``'s if the session may act as it.

    Args:
        sd: the function's static dictionary (``SD``): the prepared insert is kept there.
        token: the token the caller passed.
        role_name: the role the row is for.
        question: the question.
        sql: the chosen SQL, or None.
        confidence: the vote's confidence, or None.
        error: the call's error, or None.
        trace: the trace as JSON text.
        conversation: the call's conversation key (follow-up questions), or None.

    Returns:
        The new row's id.

    Raises:
        plpy.Error: (SQLSTATE 42501, through ``plpy.error``) without the pipeline's token:
            the caller is not ``nl2sql()``, ``nl2sql.explain()`` or ``nl2sql.ask()``.
    """
    global _log_token
    expected, _log_token = _log_token, None
    if not (expected and token and hmac.compare_digest(expected.encode(), token.encode())):
        plpy.error(
            "nl2sql._log_query: only nl2sql(), nl2sql.explain() and nl2sql.ask() write "
            "the query log",
            hint="ask a question with nl2sql(); read your rows in nl2sql.my_query_log",
            sqlstate="42501",
        )
    plan = sd.get("insert")
    if plan is None:
        plan = plpy.prepare(
            "INSERT INTO nl2sql.query_log (role_name, question, sql, confidence, error, trace, "
            "conversation) VALUES (nl2sql._acting_role($1), $2, $3, $4, $5, $6::jsonb, $7) "
            "RETURNING id",
            ["name", "text", "text", "float8", "text", "text", "text"],
        )
        sd["insert"] = plan
    return plpy.execute(plan, [role_name, question, sql, confidence, error, trace, conversation])[
        0
    ]["id"]


EXPLAIN_HINT = (
    "SELECT nl2sql.explain(...) with the same question returns the whole trace without raising"
)


def failed_hint(log_id: int | None, why: str | None) -> str:
    """The hint of a call that raised because no SQL was chosen: the log row kept for it (the
    shared process wrote it where the error cannot undo it), or why none was.

    Args:
        log_id: the kept row's id, or None.
        why: why no row was kept (it rolled back with the error); None on a read replica,
            where nothing is logged.

    Returns:
        The hint text (it names the row's id when one was kept; no path).
    """
    if log_id is not None:
        return f"logged as nl2sql.query_log id {log_id}; {EXPLAIN_HINT}"
    if why is None:
        return f"{EXPLAIN_HINT} (a read replica writes no query log)"
    return f"{EXPLAIN_HINT}, and logs it; this call's log row rolled back with the error: {why}"


PRUNE_BATCH = 10_000  # rows one DELETE statement removes
_PRUNE_SQL = (
    "WITH old AS (SELECT id FROM nl2sql.query_log "
    "WHERE created_at < pg_catalog.now() - pg_catalog.make_interval(days => $1) "
    "ORDER BY id LIMIT $2), gone AS (DELETE FROM nl2sql.query_log q USING old "
    "WHERE q.id = old.id RETURNING 1) SELECT count(*) AS n FROM gone"
)


def prune(plpy, days: int, batch: int = PRUNE_BATCH) -> dict:
    """Delete the query log's rows older than ``days`` days, ``batch`` rows a statement
    (setting ``query_log_retention_days``; ``nl2sql.prune_query_log``, ``reindex``).

    Args:
        days: the retention in days; 0 keeps every row.
        batch: rows one DELETE removes (each statement stays short, by the index on
            ``created_at``).

    Returns:
        ``{"deleted", "retention_days", "statements"}``.

    Raises:
        plpy.SPIError: the role may not delete from ``nl2sql.query_log``.
    """
    out = {"deleted": 0, "retention_days": days, "statements": 0}
    if days <= 0:
        return out
    while True:
        n = spi.query(plpy, _PRUNE_SQL, [days, batch], ["int4", "int4"])[0]["n"]
        out["deleted"] += n
        out["statements"] += 1
        if n < batch:
            return out
