#!/usr/bin/env bash
# Stop the demo's local PostgreSQL cluster and the local model's server (started by
# scripts/demo.sh; the model stays installed). Add --delete to remove the cluster's data folder too.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NL2SQL_VENV="${NL2SQL_VENV:-/opt/nl2sql/venv}"
cd "$ROOT"
"$NL2SQL_VENV/bin/python" - "$@" <<'PY'
import sys
from nl2sql_indexer.cluster import LocalCluster
from nl2sql_indexer.dev.demo import default_datadir
c = LocalCluster(default_datadir())
if not c.initialized:
    print(f"no cluster at {c.datadir}")
elif "--delete" in sys.argv[1:]:
    c.destroy(); print(f"stopped and deleted {c.datadir}")
else:
    c.stop(); print(f"stopped {c.datadir}")
from nl2sql.client.local_model import stop
if stop():
    print("stopped the local model's server (nl2sql model start starts it again)")
PY
