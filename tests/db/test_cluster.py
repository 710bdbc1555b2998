"""The local cluster helper (nl2sql_indexer.cluster) on clusters it initialises (initdb runs)."""

from __future__ import annotations

import pytest


def test_a_cluster_made_earlier_gets_pg_stat_statements_preloaded():
    """A cluster whose configuration preloads only pg_cron (made before mining existed) gets
    pg_stat_statements added, keeping its other libraries, once."""
    import shutil
    import tempfile
    from pathlib import Path

    from nl2sql_indexer.cluster import PG_BIN, PRELOAD, LocalCluster

    if not (PG_BIN / "initdb").exists():
        pytest.skip("PostgreSQL is not installed")
    base = Path(tempfile.mkdtemp(prefix="nl2sql-cluster-", dir="/tmp"))
    base.chmod(0o755)
    try:
        c = LocalCluster(base / "data")
        c.init()
        assert c.preloaded() == list(PRELOAD) == ["pg_cron", "pg_stat_statements"]
        conf = c.datadir / "postgresql.conf"
        conf.write_text(
            conf.read_text().replace(
                "shared_preload_libraries = 'pg_cron,pg_stat_statements'",
                "shared_preload_libraries = 'pg_cron,auto_explain'",
            )
        )
        assert c.preloaded() == ["pg_cron", "auto_explain"]
        assert c.ensure_preload() is True
        assert c.preloaded() == ["pg_cron", "auto_explain", "pg_stat_statements"]
        assert c.ensure_preload() is False
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_cluster_made_with_another_venv_is_pointed_at_this_one():
    """A cluster initialised with another venv (another checkout's benchmarks) is made to
    import nl2sql from the venv it is opened with, once."""
    import shutil
    import tempfile
    from pathlib import Path

    from nl2sql_indexer.cluster import PG_BIN, LocalCluster, _as_server_user

    if not (PG_BIN / "initdb").exists():
        pytest.skip("PostgreSQL is not installed")
    base = Path(tempfile.mkdtemp(prefix="nl2sql-cluster-", dir="/tmp"))
    base.chmod(0o755)
    try:
        LocalCluster(base / "data", venv="/var/tmp/another-venv").init()
        c = LocalCluster(base / "data", venv="/opt/this-venv")
        assert c.ensure_venv() is True
        assert c.ensure_venv() is False

        def configured() -> str:
            return _as_server_user(
                [str(PG_BIN / "postgres"), "-D", str(c.datadir), "-C", "nl2sql.venv"]
            ).stdout.strip()

        assert configured() == "/opt/this-venv"
    finally:
        shutil.rmtree(base, ignore_errors=True)
