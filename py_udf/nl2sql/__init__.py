"""nl2sql: text-to-SQL inside PostgreSQL, or beside it (``nl2sql.connect``)."""

__version__ = "0.3.0"


def __getattr__(name: str):
    """``nl2sql.connect`` and ``nl2sql.ClientError``, imported on first use: a server backend
    never loads the client (nor psycopg)."""
    if name in ("connect", "ClientError"):
        from . import client  # the client floor: loaded only by a process beside the database

        return getattr(client, name)
    raise AttributeError(f"module 'nl2sql' has no attribute {name!r}")
