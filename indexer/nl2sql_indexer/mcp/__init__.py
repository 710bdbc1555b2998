"""``nl2sql-mcp``: an MCP server (the official ``mcp`` SDK) whose tools call the extension's SQL
functions over one connection, as its role (docs/mcp.md): ``_server`` (the server, its tools'
schemas and the command line), ``_tools`` (one tool: one or two statements), ``_database``
(the connection, its transactions, the errors a client reads)."""

from ._server import build_server, main

__all__ = ["build_server", "main"]
