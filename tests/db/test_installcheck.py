"""``make installcheck`` (the PGXS Makefile at the repository root: pg_regress on test/sql against
test/expected) against the test cluster, so the SQL-level expected outputs run with the suite."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import ROOT
from nl2sql_indexer.cluster import PG_BIN


def test_make_installcheck(cluster, tmp_path):
    pg_config = PG_BIN / "pg_config"
    pgxs = subprocess.run([str(pg_config), "--pgxs"], capture_output=True, text=True)
    if pgxs.returncode != 0 or not os.path.exists(pgxs.stdout.strip()) or not shutil.which("make"):
        pytest.skip("PGXS (postgresql-server-dev-<major>) or make is not installed")
    env = {
        **os.environ,
        "PGHOST": "127.0.0.1",
        "PGPORT": str(cluster.port),
        "PGUSER": "postgres",
    }
    r = subprocess.run(
        ["make", "-s", "installcheck", f"PG_CONFIG={pg_config}", f"REGRESS_OUTDIR={tmp_path}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    diffs = tmp_path / "regression.diffs"
    shown = diffs.read_text()[:6000] if diffs.exists() else ""
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}\n{shown}"
    assert "tests passed" in r.stdout, r.stdout
