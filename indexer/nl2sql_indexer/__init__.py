"""The indexer package: the ``nl2sql-index`` command (``cli``: index a database table by table
from outside the server) and the local-cluster helper (``cluster``: a project-local PostgreSQL
cluster for the demo, the tests and the benchmarks), the ``nl2sql-mcp`` server (``mcp``: an
MCP server whose tools call the extension's SQL functions, docs/mcp.md). ``dev`` holds the demo and the scripted
test server: for demos and tests only, never for production."""

__all__ = ["cli", "cluster", "dev", "mcp"]
