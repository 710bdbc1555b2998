"""Reindex at scale: change detection without reading user data, partial value indexes, the
bulk write path. A database of its own (``nl2sql_scale_test``) so the demo index stays as is."""

from __future__ import annotations

import pytest

from conftest import add_models

DB = "nl2sql_scale_test"


@pytest.fixture(scope="module")
def sdb(cluster):
    cluster.create_database(DB, drop=True)
    conn = cluster.connect(DB)
    conn.execute("""
        CREATE TABLE city (id int PRIMARY KEY, name text, country text);
        INSERT INTO city SELECT i, 'City ' || i, CASE WHEN i % 2 = 0 THEN 'Norway' ELSE 'Peru' END
        FROM generate_series(1, 8) i;
        CREATE TABLE shop (id int PRIMARY KEY, city_id int REFERENCES city, label text);
        INSERT INTO shop VALUES (1, 1, 'Corner Shop'), (2, 2, 'Big Market');
        CREATE TABLE note (id int, body text);
        INSERT INTO note VALUES (1, 'first note');
        CREATE VIEW shop_city AS SELECT s.label, c.name FROM shop s JOIN city c ON c.id = s.city_id;
    """)
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    conn.execute("SELECT nl2sql.reindex()")
    yield conn
    conn.close()


def _scans(conn) -> int:
    """Sequential and index scans of the user tables so far (statistics flushed first)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")  # the flush happens when the backend goes idle
    return conn.execute(
        "SELECT sum(seq_scan + COALESCE(idx_scan, 0))::int FROM "
        "pg_stat_user_tables WHERE schemaname = 'public'"
    ).fetchone()[0]


def test_noop_reindex_reads_no_user_data(sdb):
    before = _scans(sdb)
    r = sdb.execute("SELECT nl2sql.reindex()").fetchone()[0]
    assert r["tables_indexed"] == 0 and r["tables_skipped"] == 4
    assert _scans(sdb) == before
    # the measurement sees scans when there are some: a forced reindex reads every table
    sdb.execute("SELECT nl2sql.reindex(force => true)")
    assert _scans(sdb) > before


def test_changed_table_is_reindexed_and_only_it(sdb, cluster):
    with cluster.connect(DB) as other:  # a change committed by another session, published
        other.execute(
            "INSERT INTO note VALUES (2, 'second note'); SELECT pg_stat_force_next_flush()"
        )
    r = sdb.execute("SELECT nl2sql.reindex()").fetchone()[0]
    assert r["tables_indexed"] == 1 and r["tables_skipped"] == 3, r
    assert r["values_embedded"] == 1
    assert (
        sdb.execute(
            "SELECT count(*) FROM nl2sql.cell_value WHERE table_name = 'note' "
            "AND value = 'second note'"
        ).fetchone()[0]
        == 1
    )
    # an update of a table a view reads reindexes the table and the view
    sdb.execute("UPDATE shop SET label = 'Huge Market' WHERE id = 2")
    r = sdb.execute("SELECT nl2sql.reindex()").fetchone()[0]
    assert r["tables_indexed"] == 2, r
    assert r["values_embedded"] == 1 and r["values_reused"] == 1  # view's copy reuses shop's
    assert {
        x[0]
        for x in sdb.execute("SELECT table_name FROM nl2sql.cell_value WHERE value = 'Huge Market'")
    } == {"shop", "shop_city"}
    assert not sdb.execute("SELECT 1 FROM nl2sql.cell_value WHERE value = 'Big Market'").fetchall()
    # TRUNCATE counts no deleted tuples: the new relfilenode tells
    sdb.execute("TRUNCATE note")
    r = sdb.execute("SELECT nl2sql.reindex()").fetchone()[0]
    assert r["tables_indexed"] == 1
    assert not sdb.execute("SELECT 1 FROM nl2sql.cell_value WHERE table_name = 'note'").fetchall()
    # a catalog change (a comment) without a data change
    sdb.execute("COMMENT ON COLUMN city.country IS 'where the city lies'")
    r = sdb.execute("SELECT nl2sql.reindex()").fetchone()[0]
    assert r["tables_indexed"] == 1 and r["values_embedded"] == 0
    assert (
        sdb.execute(
            "SELECT comment FROM nl2sql.schema_column WHERE table_name = 'city' "
            "AND column_name = 'country'"
        ).fetchone()[0]
        == "where the city lies"
    )


def test_cli_skips_unchanged_tables_and_reports_values_per_second(sdb, cluster):
    from nl2sql_indexer.cli import index_database

    # the CLI's session sees what this session's statistics published: publish now (a session
    # publishes at most once a second; until then another session's reindex may redo a table)
    sdb.execute("INSERT INTO note VALUES (3, 'third note'); SELECT pg_stat_force_next_flush()")
    out = index_database(cluster.dsn(DB), None, False, progress=False)
    assert out["tables_indexed"] == 1 and out["tables_skipped"] == 3
    assert out["values_embedded"] == 1 and out["values_per_s"] > 0
    again = index_database(cluster.dsn(DB), None, False, progress=False)
    assert again["tables_indexed"] == 0


def test_column_beyond_values_per_column_is_marked_partial(sdb, llm):
    sdb.execute("SELECT nl2sql.set_setting('values_per_column', '5')")
    try:
        r = sdb.execute("SELECT nl2sql.reindex()").fetchone()[0]  # a setting change re-reads all
        assert r["tables_indexed"] == 4 and r["columns_partial"] >= 1
        rows = {
            c: (n, done)
            for c, n, done in sdb.execute(
                "SELECT column_name, values_indexed, values_complete FROM nl2sql.schema_column "
                "WHERE table_name = 'city'"
            )
        }
        assert rows["name"] == (5, False)  # 8 distinct names, 5 indexed
        assert rows["country"] == (2, True)  # 2 distinct countries: all of them
        assert rows["id"] == (None, None)  # not a string column
        assert (
            sdb.execute(
                "SELECT count(*) FROM nl2sql.cell_value WHERE table_name = 'city' "
                "AND column_name = 'name'"
            ).fetchone()[0]
            == 5
        )
        add_models(sdb, llm, ["m1"])
        llm.set_default("SELECT name FROM city")
        trace = sdb.execute("SELECT nl2sql.explain('Which cities are there?')").fetchone()[0]
        assert "public.city.name" in trace["values_partial"]["columns"]
        assert "public.city.country" not in trace["values_partial"]["columns"]
    finally:
        sdb.execute("DELETE FROM nl2sql.model")
        sdb.execute("SELECT nl2sql.reset_setting('values_per_column')")
        sdb.execute("SELECT nl2sql.reindex()")
    assert (
        sdb.execute(
            "SELECT values_complete FROM nl2sql.schema_column WHERE table_name = 'city' "
            "AND column_name = 'name'"
        ).fetchone()[0]
        is True
    )


def test_large_table_samples_high_cardinality_columns_only(sdb):
    sdb.execute("""
        CREATE TABLE big (id int, code text, kind text);
        INSERT INTO big SELECT i, 'code ' || i, CASE WHEN i % 3 = 0 THEN 'alpha' WHEN i % 3 = 1
               THEN 'beta' ELSE 'gamma' END FROM generate_series(1, 20000) i;
        INSERT INTO big SELECT 0, 'frequent code', 'alpha' FROM generate_series(1, 2000);
        ANALYZE big;
    """)
    sdb.execute("SELECT nl2sql.set_setting('value_sample_rows', '2000')")
    sdb.execute("SELECT nl2sql.set_setting('values_per_column', '300')")
    try:
        r = sdb.execute("SELECT nl2sql.reindex()").fetchone()[0]
        assert r["tables_indexed"] == 5
        rows = {
            c: (n, done)
            for c, n, done in sdb.execute(
                "SELECT column_name, values_indexed, values_complete FROM nl2sql.schema_column "
                "WHERE table_name = 'big'"
            )
        }
        assert rows["kind"] == (3, True)  # few distinct values: read in full
        n, done = rows["code"]
        assert done is False and 0 < n <= 300  # 20,001 distinct: sampled
        # the statistics' most common value is among the sampled ones
        assert sdb.execute(
            "SELECT 1 FROM nl2sql.cell_value WHERE table_name = 'big' AND value = 'frequent code'"
        ).fetchall()
    finally:
        sdb.execute("SELECT nl2sql.reset_setting('value_sample_rows')")
        sdb.execute("SELECT nl2sql.reset_setting('values_per_column')")
        sdb.execute("DROP TABLE big")
        sdb.execute("SELECT nl2sql.reindex()")


def test_reindex_of_an_empty_value_index_builds_the_halfvec_hnsw_index_with_more_memory(sdb):
    """index_maintenance: a reindex that starts from an empty value index drops the hnsw index
    and builds it once at the end (halfvec_cosine_ops), with maintenance_work_mem raised for its
    own transaction only, above a server setting too small for the graph."""
    sdb.execute("SET maintenance_work_mem = '1MB'")
    try:
        sdb.execute("BEGIN")
        sdb.execute("TRUNCATE nl2sql.cell_value")
        r = sdb.execute("SELECT nl2sql.reindex(force => true)").fetchone()[0]
        raised = sdb.execute(
            "SELECT setting::int FROM pg_settings WHERE name = 'maintenance_work_mem'"
        ).fetchone()[0]
        sdb.execute("COMMIT")
        assert r["vector_index_built"] is True and r["values"] > 0
        assert raised > 1024  # kB: the graph's need, more than the session's 1MB
        assert sdb.execute("SHOW maintenance_work_mem").fetchone()[0] == "1MB"
        idx = sdb.execute(
            "SELECT pg_get_indexdef('nl2sql.cell_value_embedding_hnsw'::regclass)"
        ).fetchone()[0]
        assert "hnsw (embedding halfvec_cosine_ops)" in idx
    finally:
        sdb.execute("RESET maintenance_work_mem")
