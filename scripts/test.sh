#!/usr/bin/env bash
# Run the test suite with the venv the server's PL/Python imports from. The database tests start
# (and remove) their own PostgreSQL cluster. Needs scripts/install.sh to have run once.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NL2SQL_VENV="${NL2SQL_VENV:-/opt/nl2sql/venv}"
if [ ! -x "$NL2SQL_VENV/bin/python" ]; then
  echo "test.sh: no venv at $NL2SQL_VENV; run: bash scripts/install.sh" >&2
  exit 1
fi
cd "$ROOT"
"$NL2SQL_VENV/bin/python" -m pytest tests "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests (exit 5)" >&2
  exit 1
fi
exit "$rc"
