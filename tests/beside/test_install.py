"""nl2sql install / upgrade / uninstall in a database without PL/Python (issue 32 §2, §5), and
the refusals: the extension installed, pgvector missing, a role without CREATE."""

from __future__ import annotations

import subprocess

import psycopg
import pytest

from conftest import ROOT
from nl2sql.client import install as beside
from nl2sql.core.errors import ConfigError
from nl2sql.core.settings import validate_setting
from nl2sql_indexer.cluster import PG_BIN

from .conftest import make_db, nl2sql_admin


def _functions(conn) -> list[tuple[str, str]]:
    """(signature, language) of every function in schema nl2sql and of public.nl2sql."""
    return conn.execute(
        "SELECT p.oid::regprocedure::text, l.lanname FROM pg_proc p "
        "JOIN pg_language l ON l.oid = p.prolang JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE n.nspname = 'nl2sql' OR (n.nspname = 'public' AND p.proname = 'nl2sql') ORDER BY 1"
    ).fetchall()


def test_install_creates_schema_nl2sql_without_plpython(beside_db):
    r = nl2sql_admin("install", "--dsn", beside_db.dsn)
    assert r.returncode == 0, r.stderr
    assert "DDL tracking: off" in r.stdout  # the owner may not create event triggers
    incremental = sorted(p.name for p in (ROOT / "sql/incremental").glob("[0-9]*.sql"))
    with psycopg.connect(beside_db.dsn, autocommit=True) as c:
        assert not c.execute("SELECT 1 FROM pg_language WHERE lanname LIKE 'plpython%'").fetchall()
        recorded = [r[0] for r in c.execute("SELECT name FROM nl2sql.migration ORDER BY name")]
        assert recorded == incremental
        funcs = _functions(c)
        assert funcs and {lang for _, lang in funcs} <= {"sql", "plpgsql"}
        assert "nl2sql(text,text,text,text)" in {s for s, _ in funcs}
        assert c.execute("SELECT count(*) FROM nl2sql.settings").fetchone()[0] > 30
        assert not c.execute("SELECT 1 FROM pg_event_trigger").fetchall()
        # what runs in PL/Python in the extension says where it runs instead
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="beside") as e:
            c.execute("SELECT nl2sql('how many singers?')")
        assert "nl2sql.submit()" in e.value.diag.message_hint


def test_configuration_functions_write_the_tables(installed, cluster):
    with psycopg.connect(installed.dsn, autocommit=True) as c:
        assert c.execute("SELECT nl2sql.set_setting('k_examples', ' 5 ')").fetchone()[0] == "5"
        assert c.execute("SELECT nl2sql.set_setting('presql_votes', 'True')").fetchone()[0] == "on"
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="k_examples"):
            c.execute("SELECT nl2sql.set_setting('k_examples', '-1')")
        with pytest.raises(psycopg.errors.RaiseException, match="unknown setting"):
            c.execute("SELECT nl2sql.set_setting('no_such_setting', '1')")
        c.execute("SELECT nl2sql.add_model('m1', 'gpt-x', base_url => 'http://127.0.0.1:9/v1')")
        assert c.execute("SELECT model FROM nl2sql.model").fetchall() == [("gpt-x",)]
        c.execute("CREATE TABLE person (name text, secret text)")
        policy = c.execute("SELECT nl2sql.set_value_policy('person', false, 'secret')").fetchone()
        assert policy[0]["table"] == "public.person" and policy[0]["send_values"] is False
        assert c.execute(
            "SELECT send_values FROM nl2sql.value_policy WHERE column_name = 'secret'"
        ).fetchone() == (False,)
        with pytest.raises(psycopg.errors.RaiseException, match="no column"):
            c.execute("SELECT nl2sql.set_value_policy('person', false, 'nope')")
        c.execute("SELECT nl2sql.set_quota('nl2sql_beside_owner', questions_per_minute => 3)")
        # the log writer attributes a row to the session's role, never to another
        with cluster.connect() as su:
            su.execute(
                "DO $$BEGIN CREATE ROLE someone_else; EXCEPTION WHEN duplicate_object THEN END$$"
            )
        log_id = c.execute(
            "SELECT nl2sql._log_query('', 'someone_else', 'q', 'SELECT 1', 1, NULL, '{}')"
        ).fetchone()[0]
        row = c.execute("SELECT role_name FROM nl2sql.query_log WHERE id = %s", (log_id,))
        assert row.fetchone() == ("nl2sql_beside_owner",)


SETTING_CASES = [
    ("k_examples", " 7 "),
    ("k_examples", "-1"),
    ("k_examples", "2.5"),
    ("presql_votes", "FALSE"),
    ("presql_votes", "maybe"),
    ("tie_break", "Priority"),
    ("tie_break", "slowest"),
    ("schemas", " a, b ,"),
    ("schemas", " , "),
    ("align_min_trigram", "0.25"),
    ("align_min_trigram", "x"),
    ("hardness_voters", ""),
    ("hardness_voters", "[1]"),
]


def test_set_setting_checks_as_the_python_declaration_does(installed):
    """The PL/pgSQL set_setting accepts what core/settings.py accepts, stored alike."""
    with psycopg.connect(installed.dsn, autocommit=True) as c:
        for key, value in SETTING_CASES:
            try:
                expected = validate_setting(key, value)
            except ConfigError:
                expected = None
            try:
                got = c.execute("SELECT nl2sql.set_setting(%s, %s)", (key, value)).fetchone()[0]
            except psycopg.errors.InvalidParameterValue:
                got = None
            assert got == expected, (key, value)


def test_upgrade_applies_new_incremental_files_once_and_reruns_idempotent_ones(
    installed, monkeypatch
):
    with psycopg.connect(installed.dsn, autocommit=True) as c:
        c.execute("SELECT nl2sql.set_setting('k_examples', '4')")
        before = _functions(c)
        c.execute("DROP FUNCTION nl2sql.doctor()")  # an idempotent file brings it back
    sources = beside.Sources.load()
    extra = ("999-test-table.sql", "CREATE TABLE nl2sql.upgrade_probe (id int);\n")
    newer = beside.Sources(
        sources.version,
        sources.head,
        [*sources.incremental, extra],
        sources.idempotent,
        sources.beside,
    )
    monkeypatch.setattr(beside.Sources, "load", classmethod(lambda cls: newer))
    lines: list[str] = []
    beside.upgrade(installed.dsn, say=lines.append)
    assert f"incremental files applied: 1 (of {len(newer.incremental)})" in lines
    beside.upgrade(installed.dsn, say=lines.append)  # CREATE TABLE would fail if re-run
    assert f"incremental files applied: 0 (of {len(newer.incremental)})" in lines
    with psycopg.connect(installed.dsn, autocommit=True) as c:
        assert _functions(c) == before
        assert c.execute("SELECT to_regclass('nl2sql.upgrade_probe')").fetchone()[0]
        assert c.execute("SELECT value FROM nl2sql.setting WHERE key = 'k_examples'").fetchone()
    r = nl2sql_admin("install", "--dsn", installed.dsn)
    assert r.returncode == 1 and "already installed" in r.stderr and "upgrade" in r.stderr
    monkeypatch.undo()  # the package's own sources, older than the database now
    with pytest.raises(beside.InstallError, match="999-test-table.sql"):
        beside.upgrade(installed.dsn, say=lines.append)


def test_uninstall_needs_yes_and_removes_everything(installed):
    r = nl2sql_admin("uninstall", "--dsn", installed.dsn)
    assert r.returncode == 2 and "--yes" in r.stderr
    with psycopg.connect(installed.dsn, autocommit=True) as c:
        assert c.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'nl2sql'").fetchone()
    r = nl2sql_admin("uninstall", "--dsn", installed.dsn, "--yes")
    assert r.returncode == 0, r.stderr
    with psycopg.connect(installed.dsn, autocommit=True) as c:
        assert not c.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'nl2sql'").fetchone()
        assert not _functions(c)
    r = nl2sql_admin("install", "--dsn", installed.dsn)  # and it installs again
    assert r.returncode == 0, r.stderr


def test_refused_where_the_extension_is_installed(cluster):
    db = make_db(cluster, "postgres")
    with cluster.connect(db.name) as c:
        c.execute("CREATE EXTENSION nl2sql CASCADE")
    r = nl2sql_admin("install", "--dsn", db.dsn)
    assert r.returncode == 1
    assert r.stderr.startswith("nl2sql:") and "extension nl2sql" in r.stderr
    r = nl2sql_admin("uninstall", "--yes", "--dsn", db.dsn)
    assert r.returncode == 1 and "DROP EXTENSION nl2sql" in r.stderr


def test_refused_without_pgvector(cluster, owner):
    db = make_db(cluster, owner, extensions=("pg_trgm",))
    r = nl2sql_admin("install", "--dsn", db.dsn)
    assert r.returncode == 1 and "CREATE EXTENSION vector" in r.stderr
    with psycopg.connect(db.dsn, autocommit=True) as c:
        assert not c.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'nl2sql'").fetchone()


def test_refused_to_a_role_without_create_on_the_database(cluster, beside_db):
    with cluster.connect() as c:
        c.execute(
            "DO $$BEGIN CREATE ROLE nl2sql_beside_reader LOGIN; "
            "EXCEPTION WHEN duplicate_object THEN END$$"
        )
    dsn = cluster.dsn(beside_db.name, "nl2sql_beside_reader")
    r = nl2sql_admin("install", "--dsn", dsn)
    assert r.returncode == 1
    assert "lacks CREATE on the database" in r.stderr
    assert nl2sql_admin("install", "--dsn", beside_db.dsn).returncode == 0
    r = nl2sql_admin("upgrade", "--dsn", dsn)  # a role that does not own schema nl2sql
    assert r.returncode == 1 and "does not own schema nl2sql" in r.stderr


FUNCTION_FACTS = """
SELECT p.oid::regprocedure::text, p.prosecdef, p.proconfig, p.proacl IS NULL OR
       pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE'),
       pg_catalog.pg_get_function_result(p.oid)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'nl2sql' OR (n.nspname = 'public' AND p.proname = 'nl2sql') ORDER BY 1
"""


def test_the_same_functions_as_the_extension_with_the_same_safety(cluster, installed):
    """Every function of the extension exists beside it with the same signature, result,
    SECURITY DEFINER flag, pinned search_path (ending in pg_temp) and EXECUTE for PUBLIC."""
    ext = make_db(cluster, "postgres")
    with cluster.connect(ext.name) as c:
        c.execute("CREATE EXTENSION nl2sql CASCADE")
        in_server = c.execute(FUNCTION_FACTS).fetchall()
    with psycopg.connect(installed.dsn, autocommit=True) as c:
        beside_rows = c.execute(FUNCTION_FACTS).fetchall()

    def facts(rows):
        out = {}
        for sig, secdef, config, public, result in rows:
            path = [x for x in config or [] if x.startswith("search_path=")]
            assert path and path[0].replace(" ", "").endswith(",pg_temp"), (sig, config)
            out[sig] = (secdef, public, result)
        return out

    assert facts(beside_rows) == facts(in_server)


def test_a_superuser_install_tracks_ddl_and_uninstall_drops_the_triggers(cluster):
    db = make_db(cluster, "postgres")  # no PL/Python created; the role is a superuser
    r = nl2sql_admin("install", "--dsn", db.dsn)
    assert r.returncode == 0, r.stderr
    assert "DDL tracking: on" in r.stdout
    with cluster.connect(db.name) as c:
        c.execute("CREATE TABLE tracked (id int)")  # the triggers run without PL/Python
        assert c.execute(
            "SELECT count(*) FROM nl2sql.ddl_queue WHERE table_name = 'tracked'"
        ).fetchone() == (1,)
    assert nl2sql_admin("uninstall", "--yes", "--dsn", db.dsn).returncode == 0
    with cluster.connect(db.name) as c:
        assert not c.execute("SELECT evtname FROM pg_event_trigger").fetchall()
        c.execute("CREATE TABLE after_uninstall (id int)")  # DDL works without nl2sql


def test_a_dump_restored_by_the_owner_and_upgraded_is_the_same_install(cluster, owner, installed):
    with psycopg.connect(installed.dsn, autocommit=True) as c:
        c.execute("SELECT nl2sql.set_setting('k_examples', '3')")
        before = _functions(c)
    dump = subprocess.run(
        [str(PG_BIN / "pg_dump"), "--no-owner", installed.dsn],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    copy = make_db(cluster, owner)
    restore = subprocess.run(
        [str(PG_BIN / "psql"), "-q", copy.dsn], input=dump, capture_output=True, text=True
    )
    assert restore.returncode == 0  # the errors it reports are the ones the docs name
    errors = [ln for ln in restore.stderr.splitlines() if "ERROR" in ln]
    assert all("must be owner of extension" in e or "pg_trgm" in e for e in errors), errors
    beside.upgrade(copy.dsn, say=lambda s: None)
    with psycopg.connect(copy.dsn, autocommit=True) as c:
        assert _functions(c) == before
        assert c.execute(
            "SELECT value FROM nl2sql.setting WHERE key = 'k_examples'"
        ).fetchone() == ("3",)
