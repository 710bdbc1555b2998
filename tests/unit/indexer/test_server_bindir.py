"""nl2sql_indexer.cluster.server_bindir: which server the demo's and the tests' clusters use."""

from __future__ import annotations

from nl2sql_indexer import cluster


def test_the_variable_wins_then_what_install_recorded(monkeypatch, tmp_path):
    monkeypatch.setenv("NL2SQL_PG_BIN", "/somewhere/bin")
    assert str(cluster.server_bindir()) == "/somewhere/bin"
    monkeypatch.delenv("NL2SQL_PG_BIN")
    bindir = tmp_path / "pg" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "initdb").write_text("")
    (tmp_path / "venv/share/nl2sql").mkdir(parents=True)
    (tmp_path / "venv/share/nl2sql/pg_bindir").write_text(f"{bindir}\n")
    monkeypatch.setattr(cluster, "DEFAULT_VENV", str(tmp_path / "venv"))
    assert cluster.server_bindir() == bindir


def test_without_a_record_the_newest_debian_major(monkeypatch, tmp_path):
    monkeypatch.delenv("NL2SQL_PG_BIN", raising=False)
    monkeypatch.setattr(cluster, "DEFAULT_VENV", str(tmp_path / "no-venv"))
    got = cluster.server_bindir()
    majors = [
        int(p.parent.parent.name)
        for p in cluster.Path("/usr/lib/postgresql").glob("*/bin/initdb")
        if p.parent.parent.name.isdigit()
    ]
    if majors:
        assert got == cluster.Path(f"/usr/lib/postgresql/{max(majors)}/bin")
    else:
        assert not (got / "initdb").exists()
