#!/usr/bin/env bash
# Developers: run a command (a bench, a manual check) against this checkout while holding the
# lock the test suite takes, after installing this checkout into $NL2SQL_VENV and its extension
# files into PostgreSQL. Several checkouts (git worktrees) on one machine share PostgreSQL's
# extension directory; the lock keeps their runs from mixing versions.
#   bash scripts/dev_locked.sh python bench/replay.py --data ../shared/bench-data
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NL2SQL_VENV="${NL2SQL_VENV:-/opt/nl2sql/venv}"
export NL2SQL_VENV NL2SQL_LOCK_HELD=1
# the server's lock (one per server: nl2sql_indexer.cluster.install_lock_path, this checkout's:
# the venv may hold an older one until the install below)
exec 9>>"$(PYTHONPATH="$ROOT/indexer" "$NL2SQL_VENV/bin/python" -c 'from nl2sql_indexer.cluster import install_lock_path; print(install_lock_path())')"
flock 9
"$NL2SQL_VENV/bin/pip" install -q --no-deps --no-build-isolation "$ROOT" >/dev/null
"$NL2SQL_VENV/bin/python" "$ROOT/scripts/build_extension.py" --install \
  "$("$("$NL2SQL_VENV/bin/python" -c 'from nl2sql_indexer.cluster import PG_BIN; print(PG_BIN)')/pg_config" --sharedir)/extension" \
  >/dev/null
"$@"
