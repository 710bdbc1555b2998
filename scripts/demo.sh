#!/usr/bin/env bash
# Set up everything (scripts/install.sh) and run the main job: a local PostgreSQL cluster, the
# demo concert database, CREATE EXTENSION nl2sql CASCADE, nl2sql.reindex(), and the demo
# questions answered by nl2sql() — question → SQL → first rows. Safe to run twice.
# With NL2SQL_LLM_BASE_URL and NL2SQL_LLM_MODEL set (key in $OPENAI_API_KEY or the variable named
# by NL2SQL_LLM_API_KEY_ENV) it asks that real endpoint; otherwise a scripted loopback server.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NL2SQL_VENV="${NL2SQL_VENV:-/opt/nl2sql/venv}"
bash "$ROOT/scripts/install.sh"
cd "$ROOT"
export NL2SQL_VENV
exec "$NL2SQL_VENV/bin/python" -m nl2sql_indexer.dev.demo "$@"
