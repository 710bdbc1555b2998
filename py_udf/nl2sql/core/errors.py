"""Every public exception of nl2sql, under ``Nl2sqlError``: a message says what went wrong and
what to do, with no secret. Imports nothing from the package (docs/internals/core.md "Errors")."""

from __future__ import annotations


class Nl2sqlError(Exception):
    """Base class of every error nl2sql raises on purpose."""


class QuestionError(Nl2sqlError, ValueError):
    """The question itself cannot be answered as given (null, empty, too long, NUL bytes)."""


class ConfigError(Nl2sqlError, ValueError):
    """A setting or model configuration is missing or invalid; the message says how to fix it."""


# the name the field's docs use; the same class
ConfigurationError = ConfigError


class NotIndexedError(Nl2sqlError, RuntimeError):
    """Nothing (or not the asked schema) is indexed yet: run ``nl2sql.reindex()``."""


class VersionMismatch(Nl2sqlError, RuntimeError):
    """The installed extension's version and the importable Python package's disagree."""


class CandidateRefused(Nl2sqlError, ValueError):
    """A candidate failed the check; ``str(e)`` says why, for the trace."""


class ModelError(Nl2sqlError, RuntimeError):
    """No usable answer from the configured models; the message says which and why."""


class DeadlineExceeded(Nl2sqlError, TimeoutError):
    """A network request did not end within its overall deadline; its connection was closed."""


class ReplyTooLarge(Nl2sqlError, OSError):
    """A reply's body passed the size a request reads (a server streaming without end)."""


class EmbeddingError(Nl2sqlError, RuntimeError):
    """The embedding model could not be found or loaded; the message says how to fix it."""


class EmbedderUnavailable(EmbeddingError):
    """The shared embedding process could not be reached or started (the backend embeds itself)."""


class EmbedderTransportError(EmbedderUnavailable):
    """A request to the shared embedder could not be sent or its reply not read."""


class EmbedderConnectError(EmbedderTransportError):
    """Nothing accepted the connection to the shared embedder's socket: nothing was sent."""


class EmbedderTimeout(EmbedderTransportError):
    """The shared embedder did not answer within the request's time limit."""


class LogNotKept(Nl2sqlError, RuntimeError):
    """The shared process did not write a failed call's query log row (no Unix socket, no
    connection, the insert failed); the message, for the caller's hint, names no path."""


class LogRowInvalid(LogNotKept, ValueError):
    """A query log row posted to the shared process is malformed (a field missing or of the
    wrong type, a trace that is not a JSON object)."""


class NoCandidateError(Nl2sqlError, RuntimeError):
    """Models answered, but no candidate passed the checks and executed."""


class ResultTooLarge(Nl2sqlError, RuntimeError):
    """A query's rows passed the byte budget (setting ``max_result_bytes``); it was stopped."""


class GateError(Nl2sqlError, TypeError):
    """A text was about to reach a model without passing the gate (``gate.py``): a bug."""


class Abstained(Nl2sqlError, RuntimeError):
    """The chosen reading's confidence is below ``abstain_below``; the message lists readings."""


class ValuesRefused(Nl2sqlError, RuntimeError):
    """A request would send cell values to a model while the value policy forbids it."""


class QuotaExceeded(Nl2sqlError, RuntimeError):
    """The calling role is over its quota (``nl2sql.set_quota``); nothing was sent to a model."""


class EvaluationError(Nl2sqlError, ValueError):
    """``nl2sql.evaluate`` has nothing to evaluate or got a bad argument; the message says what."""


class ItemSkipped(Nl2sqlError):
    """One item of a semantic model is left out of its import (reported, not raised to the
    caller); the message says why: no such table or column, an expression that does not parse."""


class ClientError(Nl2sqlError, RuntimeError):
    """A call of the Python API beside the database (``nl2sql.connect``) failed: the message as
    the SQL function would raise it, with ``hint`` and ``sqlstate`` (None when unknown) and,
    when a question got no SQL, its ``trace``."""

    def __init__(self, msg: str, hint: str | None = None, sqlstate: str | None = None):
        super().__init__(msg)
        self.hint, self.sqlstate = hint, sqlstate
        self.trace: dict | None = None


class LocalModelError(Nl2sqlError, RuntimeError):
    """``nl2sql model`` cannot do what was asked (an unknown model, a download or build that
    failed, a port taken, no disk space, a server that does not start); the message says what
    went wrong and ``hint`` what to do."""

    def __init__(self, msg: str, hint: str | None = None):
        super().__init__(msg)
        self.hint = hint


class InstallError(Nl2sqlError, RuntimeError):
    """``nl2sql install``/``upgrade``/``uninstall`` cannot run in this database as this role
    (the extension is there, pgvector is missing, a privilege lacks); the message says what to do."""


class WorkerError(Nl2sqlError, RuntimeError):
    """``nl2sql worker`` cannot serve this database (no request queue, no privilege on it);
    the message says what to do."""


# What a statement raises when a relation, column, function or schema it names no longer exists
# (undefined_table, undefined_column, undefined_function, invalid_schema_name, undefined_object):
# here, a table dropped or renamed by another session after this call read the schema.
GONE_SQLSTATES = frozenset({"42P01", "42703", "42883", "3F000", "42704"})
GONE_HINT = (
    "ask again: each call reads the schema afresh (a DDL event trigger marks the table stale; "
    "SELECT nl2sql.reindex() refreshes the index if the name still appears)"
)


def gone_message(detail: str) -> str:
    """The error of a chosen query whose relation went away while the question was answered.

    Args:
        detail: PostgreSQL's first line (e.g. ``relation "public.x" does not exist``).

    Returns:
        The ``nl2sql:`` message: what happened, with the server's words.
    """
    return (
        "nl2sql: the chosen query no longer runs: a table or column it reads was dropped or "
        f"renamed by another session while the question was answered ({detail})"
    )
