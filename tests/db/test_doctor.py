"""nl2sql.doctor(): one row per check, the healthy case and each check's fail path that a test
cluster can produce (the venv missing, the extension of another version than the package, a
model's key unset and its endpoint unreachable, no model, nothing indexed, tables changed, a bad
stored setting, the embedder folder not private), and who may run it. The rows' logic on its own:
tests/unit/ops/test_doctor_rows.py."""

from __future__ import annotations

import re

import psycopg
import pytest

from conftest import ROOT, TEST_API_KEY, TEST_KEY_ENV

DB = "nl2sql_doctor"


@pytest.fixture(scope="module")
def doc(cluster):
    cluster.create_database(DB, drop=True)
    conn = cluster.connect(DB)
    conn.execute("CREATE TABLE harbour (hid int PRIMARY KEY, hname text)")
    conn.execute("INSERT INTO harbour VALUES (1, 'Valletta'), (2, 'Kotor')")
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    yield conn
    conn.close()


def _rows(conn) -> dict[str, tuple[str, str, str]]:
    got = conn.execute('SELECT "check", status, detail, fix FROM nl2sql.doctor()').fetchall()
    assert all(s in ("ok", "warn", "fail") for _, s, _, _ in got), got
    return {c: (s, d, f) for c, s, d, f in got}


def test_shape_and_a_healthy_install(doc, llm):
    doc.execute("DELETE FROM nl2sql.model")
    doc.execute(
        "SELECT nl2sql.add_model('m1', 'm1', base_url => %s, api_key_env => %s)",
        (llm.base_url, TEST_KEY_ENV),
    )
    doc.execute("SELECT nl2sql.reindex()")
    cols = doc.execute("SELECT * FROM nl2sql.doctor() LIMIT 0").description
    assert [c.name for c in cols] == ["check", "status", "detail", "fix"]
    r = _rows(doc)
    for check in (
        "extension version",
        "server",
        "venv",
        "onnx model",
        "embedder",
        "extension vector",
        "extension pg_trgm",
        "extension pg_cron",
        "model m1 key",
        "model m1 endpoint",
        "index",
        "settings",
        "roles",
    ):
        assert r[check][0] == "ok", (check, r[check])
    assert "PostgreSQL 15" in r["server"][1] or "PostgreSQL 1" in r["server"][1]
    assert "Python 3." in r["server"][1]
    assert f"{TEST_KEY_ENV} is set" in r["model m1 key"][1]
    assert "answered GET /models" in r["model m1 endpoint"][1]
    assert "jobs kept in database postgres" in r["extension pg_cron"][1]
    assert "every role may call" in r["roles"][1]
    text = repr(r)
    assert TEST_API_KEY not in text  # never the key


def test_optional_extension_missing_then_created(doc):
    doc.execute("DROP EXTENSION IF EXISTS pg_stat_statements")
    r = _rows(doc)
    assert r["extension pg_stat_statements"][0] == "warn"
    assert r["extension pg_stat_statements"][2] == "CREATE EXTENSION pg_stat_statements"
    doc.execute("CREATE EXTENSION pg_stat_statements")
    assert _rows(doc)["extension pg_stat_statements"][0] == "ok"


def test_model_key_unset_endpoint_unreachable_and_no_model(doc, llm):
    doc.execute("DELETE FROM nl2sql.model")
    doc.execute(
        "SELECT nl2sql.add_model('nokey', 'm', base_url => %s, api_key_env => 'NL2SQL_DOCTOR_UNSET')",
        (llm.base_url,),
    )
    doc.execute("SELECT nl2sql.add_model('closed', 'm', base_url => 'http://127.0.0.1:9/v1')")
    r = _rows(doc)
    assert r["model nokey key"][0] == "fail"
    assert "NL2SQL_DOCTOR_UNSET is not set" in r["model nokey key"][1]
    assert "environment" in r["model nokey key"][2]
    assert r["model nokey endpoint"][0] == "warn"  # not probed without its key
    assert r["model closed endpoint"][0] == "fail"
    assert "cannot reach http://127.0.0.1:9/v1" in r["model closed endpoint"][1]
    assert "base_url" in r["model closed endpoint"][2]
    doc.execute("DELETE FROM nl2sql.model")
    r = _rows(doc)
    assert r["models"][0] == "fail"
    assert "nl2sql.add_model" in r["models"][1]


def test_index_never_indexed_then_changed(cluster, doc):
    doc.execute("DELETE FROM nl2sql.schema_table")
    r = _rows(doc)
    assert r["index"][0] == "fail"
    assert "nothing indexed yet" in r["index"][1]
    assert "nl2sql.reindex()" in r["index"][2]
    doc.execute("SELECT nl2sql.reindex()")
    assert _rows(doc)["index"][0] == "ok"
    doc.execute("ALTER TABLE harbour ADD COLUMN country text")
    r = _rows(doc)
    assert r["index"][0] == "warn"
    assert "1 queued by DDL" in r["index"][1]
    doc.execute("SELECT nl2sql.reindex()")
    assert _rows(doc)["index"][0] == "ok"


def test_settings_invalid_and_unknown(doc):
    doc.execute("SELECT nl2sql.set_setting('k_examples', '4')")
    r = _rows(doc)
    assert r["settings"][0] == "ok"
    assert "k_examples = 4 (default 9)" in r["settings"][1]
    doc.execute("INSERT INTO nl2sql.setting VALUES ('k_exampels', '3')")
    assert _rows(doc)["settings"][0] == "warn"
    doc.execute("UPDATE nl2sql.setting SET value = 'many' WHERE key = 'k_examples'")
    r = _rows(doc)
    assert r["settings"][0] == "fail"
    assert "k_examples = 'many'" in r["settings"][1]
    doc.execute("DELETE FROM nl2sql.setting WHERE key IN ('k_exampels', 'k_examples')")


def test_embedder_folder_not_private(cluster, doc):
    folder = cluster.datadir / "nl2sql_embedder"
    assert _rows(doc)["embedder"][0] == "ok"  # started when it was not running
    folder.chmod(0o755)
    try:
        r = _rows(doc)
    finally:
        folder.chmod(0o700)
    assert r["embedder"][0] == "fail"
    assert "mode 0700" in r["embedder"][1]
    assert "embedder.log" in r["embedder"][2]


def test_venv_missing_is_a_row(cluster, doc):
    with cluster.connect(DB) as c:  # a new backend: _boot() has not run
        c.execute("SET nl2sql.venv = '/nonexistent/venv'")
        r = _rows(c)
    assert list(r) == ["venv"]
    assert r["venv"][0] == "fail"
    assert "/nonexistent/venv" in r["venv"][1]
    assert "nl2sql.venv" in r["venv"][2]


def test_extension_of_another_version_is_a_row(cluster):
    cluster.create_database("nl2sql_doctor_old", drop=True)
    with cluster.connect("nl2sql_doctor_old") as c:
        c.execute("CREATE EXTENSION nl2sql CASCADE")
        c.execute(
            "UPDATE pg_catalog.pg_extension SET extversion = '0.2.0' WHERE extname = 'nl2sql'"
        )
    with cluster.connect("nl2sql_doctor_old") as c:
        r = _rows(c)
    assert list(r) == ["extension version"]
    assert r["extension version"][0] == "fail"
    assert "0.2.0" in r["extension version"][1]
    assert "ALTER EXTENSION nl2sql UPDATE" in r["extension version"][2]


def test_not_for_public_but_grantable(cluster, doc):
    doc.execute(
        "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'doc_dba') "
        "THEN CREATE ROLE doc_dba LOGIN; END IF; END$$"
    )
    doc.execute("REVOKE EXECUTE ON FUNCTION nl2sql.doctor() FROM doc_dba")
    with cluster.connect(DB, user="doc_dba") as c:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT * FROM nl2sql.doctor()")
    with cluster.connect(DB, user="doc_dba") as c:
        with pytest.raises(psycopg.Error) as e:
            c.execute("SELECT * FROM nl2sql._doctor()")
        assert "GRANT EXECUTE ON FUNCTION nl2sql.doctor()" in e.value.diag.message_hint
    doc.execute("GRANT EXECUTE ON FUNCTION nl2sql.doctor() TO doc_dba")
    try:
        with cluster.connect(DB, user="doc_dba") as c:
            r = _rows(c)
        assert r["extension version"][0] == "ok"
        # the index tables are not the granted role's to read: that check says so
        assert r["index"][0] == "fail"
        assert "extension's owner" in r["index"][2]
    finally:
        doc.execute("REVOKE EXECUTE ON FUNCTION nl2sql.doctor() FROM doc_dba")


def _install_md_block(first_words: str) -> str:
    """The ```sql block of docs/install.md that starts with ``first_words``."""
    blocks = re.findall(r"```sql\n(.*?)```", (ROOT / "docs" / "install.md").read_text(), re.S)
    found = [b for b in blocks if b.startswith(first_words)]
    assert len(found) == 1, first_words
    return found[0]


def test_roles_with_the_grants_install_md_gives(cluster, doc):
    """The REVOKE/GRANT block of docs/install.md ("Grants a DBA gives analysts") runs as written:
    afterwards a role outside the group may not ask, a member may, and doctor() lists who."""
    doc.execute(
        "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'analysts') "
        "THEN CREATE ROLE analysts NOLOGIN; END IF; "
        "IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'doc_alice') "
        "THEN CREATE ROLE doc_alice LOGIN; END IF; "
        "IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'doc_bob') "
        "THEN CREATE ROLE doc_bob LOGIN; END IF; END$$"
    )
    doc.execute("GRANT analysts TO doc_alice")
    doc.execute("GRANT SELECT ON harbour TO analysts, doc_bob")
    revoke = _install_md_block("REVOKE EXECUTE ON FUNCTION public.nl2sql")
    doc.execute(revoke)
    try:
        r = _rows(doc)
        assert "every role" not in r["roles"][1]
        assert "doc_alice" in r["roles"][1] and "doc_bob" not in r["roles"][1]
        with cluster.connect(DB, user="doc_bob") as c:
            for call in (
                "SELECT nl2sql('How many harbours?')",
                "SELECT nl2sql._nl2sql('x', '', '', '')",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    c.execute(call)
        with cluster.connect(DB, user="doc_alice") as c:
            got = c.execute("SELECT nl2sql.retrieve('How many harbours?')").fetchone()[0]
            assert "presql_tables" in got
    finally:
        doc.execute(
            revoke.split(";")[0].replace("REVOKE", "GRANT").replace("FROM PUBLIC", "TO PUBLIC")
        )
        doc.execute(
            revoke.split(";")[1].replace("GRANT", "REVOKE").replace("TO analysts", "FROM analysts")
        )
    assert "every role" in _rows(doc)["roles"][1]
