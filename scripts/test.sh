#!/usr/bin/env bash
# Run the test suite with the venv the server's PL/Python imports from. Needs scripts/install.sh
# to have run once. Other arguments go to pytest.
#   bash scripts/test.sh          every test: tests/db, tests/unit and tests/upgrade (db and upgrade
#                                 start and remove their own PostgreSQL cluster)
#   bash scripts/test.sh --unit   tests/unit only: no server, no PostgreSQL, under a minute
#   bash scripts/test.sh tests/db/test_x.py   only the tests named (a path under tests/)
#   bash scripts/test.sh --distro trixie [--fresh]   the demo and every test on Debian 13 with its
#                                 PostgreSQL 17 and Python 3.13, in a cached debootstrap root
#                                 (scripts/distro_test.sh; root, about 15 minutes)
#   bash scripts/test.sh --distro bookworm --fresh --no-onnx [--unit]   README's bash scripts/demo.sh
#                                 on a fresh Debian 12 root (no ONNX file: install.sh exports it)
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ "${1:-}" = --distro ]; then
  exec bash "$ROOT/scripts/distro_test.sh" "${2:?--distro needs a release: trixie or bookworm}" "${@:3}"
fi
NL2SQL_VENV="${NL2SQL_VENV:-/opt/nl2sql/venv}"
if [ ! -x "$NL2SQL_VENV/bin/python" ]; then
  echo "test.sh: no venv at $NL2SQL_VENV; run: bash scripts/install.sh" >&2
  exit 1
fi
where=tests
args=()
for a in "$@"; do
  if [ "$a" = "--unit" ]; then where=tests/unit; else args+=("$a"); fi
  case "$a" in tests/*) where= ;; esac  # tests named: only those
done
cd "$ROOT"
"$NL2SQL_VENV/bin/python" -m pytest ${where:+"$where"} ${args[@]+"${args[@]}"}
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests (exit 5)" >&2
  exit 1
fi
exit "$rc"
