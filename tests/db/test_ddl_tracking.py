"""The index follows DDL: the event triggers correct the schema index when the DDL commits and
queue the relation; reindex() re-indexes the queued tables.

Prompts are read where the model receives them: the scripted loopback server records every
request (its answers are scripted, not a model's), and ``nl2sql.retrieve`` shows the PreSQL
prompt without a model call.
"""

from __future__ import annotations

import re

import pytest

from conftest import add_models

DB = "nl2sql_ddl"
SCHEMA_SQL = """
CREATE TABLE vocalist (vid int PRIMARY KEY, vname text, homeland text);
CREATE TABLE gig (gid int PRIMARY KEY, vid int REFERENCES vocalist (vid), venue text, fee int);
CREATE TABLE ledger (lid int PRIMARY KEY, memo text);
INSERT INTO vocalist VALUES (1, 'Ann Arbor', 'Atlantis'), (2, 'Bo Diddle', 'Lemuria');
INSERT INTO gig VALUES (1, 1, 'Olympia Hall', 10), (2, 2, 'Roxy Club', 20);
INSERT INTO ledger VALUES (1, 'paid');
"""
QUESTION = "How many vocalists come from Atlantis?"


@pytest.fixture(scope="module")
def ddb(cluster):
    """A database of its own (the demo database stays as the other tests expect it)."""
    cluster.create_database(DB, drop=True)
    conn = cluster.connect(DB)
    conn.execute(SCHEMA_SQL)
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    conn.execute("SELECT nl2sql.reindex()")
    conn.execute("DELETE FROM nl2sql.ddl_queue")
    yield conn
    conn.close()


def _queue(conn, since: int = 0) -> list[tuple]:
    return conn.execute(
        "SELECT event, object_type, schema_name || '.' || table_name, column_name, old_name "
        "FROM nl2sql.ddl_queue WHERE id > %s ORDER BY id",
        (since,),
    ).fetchall()


def _last_id(conn) -> int:
    return conn.execute("SELECT COALESCE(max(id), 0) FROM nl2sql.ddl_queue").fetchone()[0]


def _prompts(conn, llm) -> str:
    """Every text the models received for QUESTION (PreSQL and FinSQL) and the PreSQL prompt
    retrieve() builds, joined."""
    llm.clear()
    conn.execute("SELECT nl2sql(%s)", (QUESTION,))
    sent = [m["content"] for r in llm.requests for m in r["messages"]]
    assert sent, "no request reached the loopback server"
    pre = conn.execute("SELECT nl2sql.retrieve(%s)->>'presql_prompt'", (QUESTION,)).fetchone()[0]
    return "\n".join(sent + [pre])


def _has(text: str, word: str) -> bool:
    return re.search(rf"\b{re.escape(word)}\b", text) is not None


def test_renamed_and_dropped_names_never_reach_a_prompt(ddb, llm):
    llm.clear()
    llm.set_default("SELECT count(*) FROM ledger")
    add_models(ddb, llm, ["ddl-model"])
    before = _prompts(ddb, llm)
    assert all(_has(before, w) for w in ("homeland", "vocalist", "venue", "gig", "fee"))
    assert "'Atlantis'" in before  # a cell value (the question has it unquoted)

    start = _last_id(ddb)
    ddb.execute("ALTER TABLE vocalist RENAME COLUMN homeland TO nation")
    text = _prompts(ddb, llm)
    assert not _has(text, "homeland") and _has(text, "nation")
    ddb.execute("ALTER TABLE vocalist RENAME TO performer")
    text = _prompts(ddb, llm)
    assert not _has(text, "vocalist") and "CREATE TABLE performer" in text
    assert "FOREIGN KEY (vid) REFERENCES performer(vid)" in text
    ddb.execute("ALTER TABLE gig DROP COLUMN venue")
    text = _prompts(ddb, llm)
    assert not _has(text, "venue") and "Olympia Hall" not in text
    ddb.execute("CREATE TABLE roadie (rid int PRIMARY KEY, rname text)")
    ddb.execute("DROP TABLE gig")
    text = _prompts(ddb, llm)
    assert not _has(text, "gig") and not _has(text, "fee")

    assert _queue(ddb, start) == [
        ("renamed", "column", "public.vocalist", "nation", "homeland"),
        ("renamed", "table", "public.performer", None, "public.vocalist"),
        ("dropped", "column", "public.gig", "venue", None),
        ("altered", "table", "public.gig", None, None),
        ("created", "table", "public.roadie", None, None),
        ("dropped", "table", "public.gig", None, None),
    ]
    # the schema index itself holds the new names only, at once
    cols = ddb.execute(
        "SELECT table_name || '.' || column_name FROM nl2sql.schema_column ORDER BY 1"
    ).fetchall()
    assert [c[0] for c in cols] == [
        "ledger.lid",
        "ledger.memo",
        "performer.nation",
        "performer.vid",
        "performer.vname",
    ]

    counts = ddb.execute("SELECT nl2sql.reindex()").fetchone()[0]
    assert counts["tables_queued"] == 2  # performer, roadie (gig is gone)
    assert counts["tables_skipped"] == 1  # ledger: neither queued nor changed
    assert _queue(ddb) == []
    # values follow at the reindex: the renamed column's cell values are back, under its new name
    vals = ddb.execute("SELECT nl2sql.retrieve(%s)->'values'", (QUESTION,)).fetchone()[0]
    assert {(v["table"], v["column"], v["value"]) for v in vals} >= {
        ("performer", "nation", "Atlantis")
    }
    assert "CREATE TABLE roadie" in _prompts(ddb, llm)


def test_reindex_rewrites_the_queued_table_and_skips_the_rest(ddb):
    ddb.execute("SELECT nl2sql.reindex()")
    ddb.execute("ALTER TABLE ledger ALTER COLUMN memo SET STATISTICS 200")  # fingerprint unchanged
    assert _queue(ddb) == [("altered", "table", "public.ledger", None, None)]
    before = ddb.execute("SELECT table_name, indexed_at FROM nl2sql.schema_table").fetchall()
    counts = ddb.execute("SELECT nl2sql.reindex()").fetchone()[0]
    assert counts["tables_queued"] == 1 and counts["tables_indexed"] == 1
    assert counts["tables_skipped"] == len(before) - 1
    after = dict(ddb.execute("SELECT table_name, indexed_at FROM nl2sql.schema_table").fetchall())
    assert [t for t, at in before if after[t] != at] == ["ledger"]
    assert _queue(ddb) == []


def test_types_follow_and_temporary_or_foreign_schema_ddl_is_ignored(ddb):
    ddb.execute("SELECT nl2sql.reindex()")
    ddb.execute("ALTER TABLE ledger ALTER COLUMN memo TYPE varchar(40)")
    assert (
        ddb.execute(
            "SELECT data_type FROM nl2sql.schema_column WHERE table_name = 'ledger' "
            "AND column_name = 'memo'"
        ).fetchone()[0]
        == "character varying(40)"
    )
    start = _last_id(ddb)
    ddb.execute("CREATE TEMP TABLE scratch (x int)")
    ddb.execute("DROP TABLE scratch")
    assert _queue(ddb, start) == []


def test_without_the_triggers_the_views_still_hide_old_names(ddb, llm):
    """What a database without the event triggers gets (README): the prompts' views join the
    index with the live catalog, so an old name is still never shown; reindex catches up."""
    ddb.execute("SELECT nl2sql.reindex()")
    llm.set_default("SELECT count(*) FROM ledger")
    add_models(ddb, llm, ["ddl-model"])
    ddb.execute("ALTER EVENT TRIGGER nl2sql_ddl_command_end DISABLE")
    ddb.execute("ALTER EVENT TRIGGER nl2sql_ddl_sql_drop DISABLE")
    try:
        start = _last_id(ddb)
        ddb.execute("ALTER TABLE ledger RENAME COLUMN memo TO remark")
        assert _queue(ddb, start) == []
        assert (
            ddb.execute(
                "SELECT count(*) FROM nl2sql.schema_column WHERE column_name = 'memo'"
            ).fetchone()[0]
            == 1
        )  # stale row
        text = _prompts(ddb, llm)
        assert not _has(text, "memo") and not _has(text, "paid")
        counts = ddb.execute("SELECT nl2sql.reindex()").fetchone()[0]
        assert counts["tables_indexed"] == 1
        assert _has(_prompts(ddb, llm), "remark")
    finally:
        ddb.execute("ALTER EVENT TRIGGER nl2sql_ddl_command_end ENABLE")
        ddb.execute("ALTER EVENT TRIGGER nl2sql_ddl_sql_drop ENABLE")


def test_install_without_a_superuser_warns_and_goes_on(ddb, cluster):
    """The part of the install script that creates the triggers (sql/idempotent/
    004-ddl-tracking.sql), run by a role that may not create event triggers: a WARNING that
    says so, no error; run again by a superuser, it adds them."""
    from conftest import ROOT

    text = (ROOT / "sql/idempotent/004-ddl-tracking.sql").read_text()
    block = text[text.index("DO $nl2sql_ddl$") : text.index("$nl2sql_ddl$;") + len("$nl2sql_ddl$;")]
    triggers = ("nl2sql_ddl_command_end", "nl2sql_ddl_sql_drop")
    for t in triggers:
        ddb.execute(f"ALTER EXTENSION nl2sql DROP EVENT TRIGGER {t}")
        ddb.execute(f"DROP EVENT TRIGGER {t}")
    ddb.execute("DROP ROLE IF EXISTS ddl_owner")
    ddb.execute("CREATE ROLE ddl_owner LOGIN")
    try:
        with cluster.connect(DB, user="ddl_owner") as other:
            notices = []
            other.add_notice_handler(lambda d: notices.append((d.severity, d.message_primary)))
            other.execute(block)
            assert any(sev == "WARNING" and "DDL tracking is off" in msg for sev, msg in notices)
        assert (
            ddb.execute(
                "SELECT count(*) FROM pg_event_trigger WHERE evtname LIKE 'nl2sql%'"
            ).fetchone()[0]
            == 0
        )
    finally:
        ddb.execute(block)
        for t in triggers:
            ddb.execute(f"ALTER EXTENSION nl2sql ADD EVENT TRIGGER {t}")
        ddb.execute("DROP ROLE ddl_owner")
    start = _last_id(ddb)
    ddb.execute("CREATE TABLE after_restore (a int)")
    assert _queue(ddb, start) == [("created", "table", "public.after_restore", None, None)]
