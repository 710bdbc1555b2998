"""Releases upgrade in place (tests/upgrade/test_dump_restore.py: pg_dump / pg_restore).

A database gets each released nl2sql (extension/releases.json: 0.1.0, 0.2.0) exactly as
released (its install script, kept in extension/, and its Python package, taken from the
release's commit with ``git archive``), is configured and used, then gets the current package
and ``ALTER EXTENSION nl2sql UPDATE``. Everything configured must still be there, ``nl2sql()``
must answer, and the database's objects must equal those of a fresh install of the current
version.

Model answers come from the scripted loopback server (conftest), not from a model.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import ROOT
from nl2sql_indexer.cluster import DEFAULT_VENV
from nl2sql_indexer.dev.demo_data import demo_sql

from .usage import Q1, SQL1, configure_and_use, user_rows

# the Python the server embeds (the venv is made with it: scripts/install.sh)
PYLIB = f"python{sys.version_info[0]}.{sys.version_info[1]}"
RELEASES = json.loads((ROOT / "extension/releases.json").read_text())
CURRENT = (
    (ROOT / "extension/nl2sql.control").read_text().split("default_version = '")[1].split("'")[0]
)

# Every object of the extension, described so that two databases can be compared: functions
# with their whole definition (signature, body, security, search_path), tables and views with
# their columns, defaults, constraints, indexes, options and grants; dump configuration.
SNAPSHOT = r"""
WITH ext AS (SELECT oid FROM pg_extension WHERE extname = 'nl2sql'),
members AS (
    SELECT d.classid, d.objid FROM pg_depend d, ext
    WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e')
SELECT 'member ' || (pg_identify_object(m.classid, m.objid, 0)).type || ' '
       || (pg_identify_object(m.classid, m.objid, 0)).identity FROM members m
UNION ALL
SELECT 'function ' || p.oid::regprocedure::text || E'\n' || pg_get_functiondef(p.oid)
       || E'\nacl ' || coalesce(p.proacl::text, '-')
       || E'\ncomment ' || coalesce(obj_description(p.oid, 'pg_proc'), '-')
FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
WHERE p.prokind <> 'a'
UNION ALL
SELECT 'relation ' || c.oid::regclass::text || ' kind ' || c.relkind::text
       || ' acl ' || coalesce(c.relacl::text, '-') || ' options ' || coalesce(c.reloptions::text, '-')
       || ' comment ' || coalesce(obj_description(c.oid, 'pg_class'), '-')
       || CASE WHEN c.relkind = 'v' THEN E'\n' || pg_get_viewdef(c.oid) ELSE '' END
FROM pg_class c JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
UNION ALL
SELECT 'column ' || c.oid::regclass::text || '.' || a.attname || ' #' || a.attnum || ' '
       || format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || ' default ' || coalesce(pg_get_expr(ad.adbin, ad.adrelid), '-')
       || ' acl ' || coalesce(a.attacl::text, '-')
FROM pg_class c JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
UNION ALL
SELECT 'constraint ' || con.conrelid::regclass::text || ' ' || con.conname || ' '
       || pg_get_constraintdef(con.oid)
FROM pg_constraint con JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = con.conrelid
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = i.indrelid
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid)
FROM pg_trigger t JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = t.tgrelid
WHERE NOT t.tgisinternal
UNION ALL
SELECT 'dumped ' || cfg::regclass::text || ' where ' || coalesce(cond, '-')
FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS u(cfg, cond)
WHERE e.extname = 'nl2sql'
UNION ALL
SELECT 'schema nl2sql acl ' || coalesce(nspacl::text, '-') FROM pg_namespace WHERE nspname = 'nl2sql'
"""


def snapshot(conn) -> list[str]:
    return sorted(r[0] for r in conn.execute(SNAPSHOT))


def old_release_venv(version: str, base: Path) -> Path:
    """A folder laid out as a venv whose site-packages hold the released package ``version``
    (from its commit) and, through a .pth file, the dependencies of the server's venv."""
    commit = RELEASES[version]["commit"]
    r = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "py_udf/nl2sql"], capture_output=True
    )
    assert r.returncode == 0, (
        f"git archive {commit} failed ({r.stderr.decode().strip()}): the "
        f"upgrade test needs the history of release {version}; clone "
        "without --depth"
    )
    site = base / "lib" / PYLIB / "site-packages"
    site.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(r.stdout)) as tar:
        tar.extractall(base / "src")
    (base / "src/py_udf/nl2sql").rename(site / "nl2sql")
    (site / "server-venv.pth").write_text(f"{DEFAULT_VENV}/lib/{PYLIB}/site-packages\n")
    subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)
    return base


@pytest.mark.parametrize("prior", sorted(RELEASES))
def test_upgrade_from_each_release_keeps_everything_and_equals_a_fresh_install(cluster, llm, prior):
    llm.clear()
    assert CURRENT != prior
    venv = old_release_venv(prior, Path(cluster.datadir).parent / f"venv-{prior}")
    cluster.create_database("nl2sql_up", drop=True)
    with cluster.connect("nl2sql_up") as c:
        c.execute(demo_sql())
        c.execute(f"ALTER DATABASE nl2sql_up SET nl2sql.venv = {_literal(str(venv))}")
    with cluster.connect("nl2sql_up") as old:
        old.execute(f"CREATE EXTENSION nl2sql VERSION '{prior}' CASCADE")
        assert (
            old.execute("SELECT extversion FROM pg_extension WHERE extname = 'nl2sql'").fetchone()[
                0
            ]
            == prior
        )
        # the server really runs the released package
        assert old.execute("SELECT nl2sql._boot()").fetchone()[0] == str(
            venv / "lib" / PYLIB / "site-packages"
        )
        configure_and_use(old, llm, "up")
        before = user_rows(old)
        vectors_before = cell_value_cosines(old)
        assert len(vectors_before) > 10
        assert len(before["query_log"]) == 2 and len(before["model"]) == 2

    with cluster.connect("nl2sql_up") as c:
        c.execute("ALTER DATABASE nl2sql_up RESET nl2sql.venv")
    with cluster.connect("nl2sql_up") as new:
        # the current package refuses to run under the old extension, saying what to do
        with pytest.raises(Exception, match="ALTER EXTENSION nl2sql UPDATE"):
            new.execute("SELECT nl2sql(%s)", (Q1,))
        new.execute("ALTER EXTENSION nl2sql UPDATE")
        assert (
            new.execute("SELECT extversion FROM pg_extension WHERE extname = 'nl2sql'").fetchone()[
                0
            ]
            == CURRENT
        )
    with cluster.connect("nl2sql_up") as new:
        after = user_rows(new)
        if RELEASES[prior]["tracked"]:  # a release with nl2sql.setting as it is now
            assert after["setting"] == before["setting"]
        else:  # 0.1.0 stored every setting: the upgrade keeps only the changed values
            assert after["setting"] == [("candidate_timeout_ms", "4000"), ("k_examples", "5")]
        settings = dict(new.execute("SELECT name, value FROM nl2sql.settings").fetchall())
        assert settings["k_examples"] == "5" and settings["send_values"] == "on"
        for name in ("model", "example", "example_relation", "value_policy", "query_log"):
            assert after[name] == before[name], name
        applied = new.execute(
            "SELECT name, applied_at_version FROM nl2sql.migration ORDER BY name"
        ).fetchall()
        released = RELEASES[prior]["incremental"]
        assert applied[: len(released)] == [(name, prior) for name in released]
        assert all(v == CURRENT for _, v in applied[len(released) :])
        assert new.execute("SELECT nl2sql(%s)", (Q1,)).fetchone()[0].lower() == SQL1.lower()
        assert_values_survive_halfvec(new, vectors_before)
        ids = [r[0] for r in new.execute("SELECT id FROM nl2sql.query_log ORDER BY id")]
        assert len(ids) == 3 and ids[-1] > max(r[0] for r in before["query_log"])
        upgraded = snapshot(new)

    cluster.create_database("nl2sql_fresh", drop=True)
    with cluster.connect("nl2sql_fresh") as fresh:
        fresh.execute("CREATE EXTENSION nl2sql CASCADE")
        installed = snapshot(fresh)
    missing = sorted(set(installed) - set(upgraded))
    extra = sorted(set(upgraded) - set(installed))
    assert not missing and not extra, (
        "upgraded database differs from a fresh install:\nonly in fresh:\n  "
        + "\n  ".join(missing)
        + "\nonly in upgraded:\n  "
        + "\n  ".join(extra)
    )


# Each indexed value's cosine to a probe (the first value's own vector), by value: what the
# values' vectors are, independent of their storage type.
COSINES = (
    "WITH p AS (SELECT embedding::text::vector AS q FROM nl2sql.cell_value ORDER BY id LIMIT 1) "
    "SELECT v.schema_name || '.' || v.table_name || '.' || v.column_name || '=' || v.value, "
    "1 - (v.embedding::text::vector <=> p.q) FROM nl2sql.cell_value v, p"
)


def cell_value_cosines(conn) -> dict[str, float]:
    return dict(conn.execute(COSINES).fetchall())


def assert_values_survive_halfvec(conn, before: dict[str, float]) -> None:
    """sql/incremental/023-value-halfvec.sql ran on a populated value index: the same values,
    stored as halfvec(384), each with its cosine to the probe within halfvec's precision, the
    hnsw index rebuilt on halfvec, and a vector lookup through nl2sql._match_values served by
    it (EXPLAIN's plan names the index)."""
    kind = conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'nl2sql.cell_value'::regclass AND attname = 'embedding'"
    ).fetchone()[0]
    assert kind == "halfvec(384)"
    after = cell_value_cosines(conn)
    assert after.keys() == before.keys()
    assert max(abs(after[k] - before[k]) for k in before) < 2e-3
    idx = conn.execute(
        "SELECT pg_get_indexdef('nl2sql.cell_value_embedding_hnsw'::regclass)"
    ).fetchone()[0]
    assert "halfvec_cosine_ops" in idx
    value, vec = conn.execute(
        "SELECT value, embedding::text FROM nl2sql.cell_value ORDER BY id DESC LIMIT 1"
    ).fetchone()
    found = conn.execute(
        "SELECT value FROM nl2sql._match_values(current_user, NULL, NULL, %s::vector[], "
        "0.5, 0.99, 3) WHERE how = 'vector'",
        ([vec],),
    ).fetchall()
    assert (value,) in found
    conn.execute("SET enable_seqscan = off")
    plan = "\n".join(
        r[0]
        for r in conn.execute(
            "EXPLAIN SELECT value FROM nl2sql.cell_value "
            "ORDER BY embedding <=> %s::vector::halfvec(384) LIMIT 12",
            (vec,),
        )
    )
    conn.execute("RESET enable_seqscan")
    assert "Index Scan using cell_value_embedding_hnsw" in plan, plan


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
