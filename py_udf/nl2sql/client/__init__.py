"""nl2sql beside the database: the install without PL/Python (``install``), the request
queue's worker (``worker``) and the ``nl2sql`` command's administrative subcommands
(``admin``). Placeholder of the install branch; the client branch adds ``connect``."""

__all__ = ["admin", "install", "worker"]
