#!/usr/bin/env bash
# Run the test suite with the venv the server's PL/Python imports from. Needs scripts/install.sh
# to have run once. Other arguments go to pytest.
#   bash scripts/test.sh          every test: tests/db, tests/llamacpp, tests/unit and tests/upgrade
#                                 (db, llamacpp and upgrade start and remove their own PostgreSQL
#                                 cluster; llamacpp its llama-server: scripts/llama_server.sh first)
#   bash scripts/test.sh --unit   tests/unit only: no server, no PostgreSQL, under a minute
#   NL2SQL_TEST_WORKERS=N         the files over N pytest-xdist workers (default 4; 0: one process)
#   bash scripts/test.sh tests/db/test_x.py   only the tests named (a path under tests/)
#   bash scripts/test.sh --distro trixie [--fresh]   the demo, tests/db, tests/upgrade and
#                                 tests/beside (tests/unit with --unit) on Debian 13 with its
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
# the llama.cpp suite (tests/llamacpp) needs llama-server and its model: built and fetched once
# (scripts/llama_server.sh; cached), when run as root and the suite is among the tests run;
# NL2SQL_LLAMACPP=off leaves it out (its tests then skip)
llamacpp=0
[ "$where" = tests ] && llamacpp=1
for a in ${args[@]+"${args[@]}"}; do
  case "$a" in tests | tests/ | tests/llamacpp*) llamacpp=1 ;; esac
done
if [ "$llamacpp" = 1 ] && [ "$(id -u)" = 0 ] && [ "${NL2SQL_LLAMACPP:-}" != off ]; then
  bash "$ROOT/scripts/llama_server.sh" \
    || echo "test.sh: scripts/llama_server.sh failed: the llama.cpp suite fails under CI=true, skips otherwise" >&2
fi
# pytest-xdist (pyproject's test extra): the test files spread over NL2SQL_TEST_WORKERS workers
# (default 4; 0: one process), a file's tests together on one worker (--dist loadfile: module
# fixtures made once; tests/llamacpp all on one; the slowest files first: conftest.py's SLOW_FIRST), each worker a session with its own cluster (port and data directory), loopback
# server and embedding process; the installation lock taken and the checkout installed once, by
# the controller (tests/conftest.py). An -n, -p no:xdist or --pdb given wins.
workers="${NL2SQL_TEST_WORKERS:-4}"  # on 2 cores 3 left about 8 % of them idle (docs/benchmarks.md)
xdist=()
if [ "$workers" != 0 ] && "$NL2SQL_VENV/bin/python" -c 'import xdist' 2>/dev/null; then
  xdist=(-n "$workers" --dist loadfile --no-loadscope-reorder)
  for a in ${args[@]+"${args[@]}"}; do
    case "$a" in -n | -n[0-9]* | --numprocesses* | no:xdist | --pdb) xdist=() ;; esac
  done
fi
"$NL2SQL_VENV/bin/python" -m pytest ${xdist[@]+"${xdist[@]}"} ${where:+"$where"} ${args[@]+"${args[@]}"}
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests (exit 5)" >&2
  exit 1
fi
exit "$rc"
