"""nl2sql beside the database: the pipeline in a client process over psycopg 3 (``connect``,
``Client``, ``Answer``), ``_plpy``, the seam that stands in for PL/Python's ``plpy``, the install
without PL/Python (``install``), the request queue's worker (``worker``) and the ``nl2sql``
command (``cli``, with ``admin``'s subcommands) (docs/client.md). The top floor: nothing else
imports it but ``nl2sql.connect``."""

from ..core.errors import ClientError
from .connection import Answer, Client, connect

__all__ = ["Answer", "Client", "ClientError", "connect"]
