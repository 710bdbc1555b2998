#!/usr/bin/env bash
# Set up everything (scripts/install.sh) and run the main job: a private local model on this CPU
# (nl2sql model install/start: llama.cpp's llama-server, compiled once, 6 to 14 minutes on 2
# cores, and Qwen2.5-Coder-1.5B-Instruct, 1.1 GB, both cached), a local PostgreSQL cluster, the
# demo concert database, CREATE EXTENSION nl2sql CASCADE, nl2sql.reindex(), and the demo
# questions answered by nl2sql() — question → SQL → first rows → whether they match the
# reference; the last line says how many do. Safe to run twice.
#   --beside     the same beside the database, without PL/Python
#   --scripted   a scripted loopback server instead of a model (fast; shows the pipeline only)
#   --model qwen2.5-coder-0.5b   the smaller local model
# With NL2SQL_LLM_BASE_URL and NL2SQL_LLM_MODEL set (key in $OPENAI_API_KEY or the variable named
# by NL2SQL_LLM_API_KEY_ENV) it asks that real endpoint instead.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NL2SQL_VENV="${NL2SQL_VENV:-/opt/nl2sql/venv}"
bash "$ROOT/scripts/install.sh"
cd "$ROOT"
export NL2SQL_VENV
exec "$NL2SQL_VENV/bin/python" -m nl2sql_indexer.dev.demo "$@"
