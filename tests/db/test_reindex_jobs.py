"""A reindex by several workers (``nl2sql-index --jobs N``, sql/incremental/025-reindex-queue.sql):
workers claim disjoint tables, a dead worker's claim is claimed again, and two workers leave the
same value index as one. A database of its own (``nl2sql_jobs_test``)."""

from __future__ import annotations

import psycopg
import pytest

from nl2sql_indexer.cli import index_database

DB = "nl2sql_jobs_test"
TABLES = [f"t{k}" for k in range(6)]


@pytest.fixture(scope="module")
def jdb(cluster):
    cluster.create_database(DB, drop=True)
    conn = cluster.connect(DB)
    for k, t in enumerate(TABLES):  # the cities are shared: workers write the same new strings
        conn.execute(
            f"CREATE TABLE {t} (id int PRIMARY KEY, name text, city text); "
            f"INSERT INTO {t} SELECT i, 'Name {k} ' || i, 'City ' || (i % 7) "
            f"FROM generate_series(1, {10 + 5 * k}) i"
        )
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    yield conn
    conn.close()


def _index(conn) -> dict:
    """The value index: (table, column, value) -> embedding text, and the trigram mirror."""
    rows = conn.execute(
        "SELECT table_name, column_name, value, embedding::text FROM nl2sql.cell_value"
    ).fetchall()
    mirror = conn.execute("SELECT value, n FROM nl2sql.cell_value_text").fetchall()
    return {"values": {(t, c, v): e for t, c, v, e in rows}, "mirror": sorted(mirror)}


def _empty(conn) -> None:
    conn.execute(
        "TRUNCATE nl2sql.cell_value, nl2sql.schema_column, nl2sql.schema_fk, nl2sql.schema_table"
    )


@pytest.mark.parametrize("jobs", [2, 3])
def test_workers_index_what_one_worker_does(jdb, cluster, jobs):
    _empty(jdb)
    one = index_database(cluster.dsn(DB), None, True, progress=False, jobs=1)
    before = _index(jdb)
    _empty(jdb)
    many = index_database(cluster.dsn(DB), None, True, progress=False, jobs=jobs)
    after = _index(jdb)
    assert many["tables_indexed"] == one["tables_indexed"] == len(TABLES)
    assert many["values"] == one["values"] == len(before["values"])
    assert after == before
    # the HNSW index was dropped for the bulk start and built once at the end
    assert jdb.execute("SELECT to_regclass('nl2sql.cell_value_embedding_hnsw')").fetchone()[0]
    run = jdb.execute("SELECT max(run_id) FROM nl2sql.reindex_queue").fetchone()[0]
    done = jdb.execute(
        "SELECT count(*), count(done_at), count(DISTINCT table_name) FROM nl2sql.reindex_queue "
        "WHERE run_id = %s",
        (run,),
    ).fetchone()
    assert done == (len(TABLES), len(TABLES), len(TABLES))


def test_claims_are_disjoint_and_a_dead_workers_claim_is_claimed_again(jdb, cluster):
    run = jdb.execute(
        "SELECT nl2sql._reindex_enqueue(%s, true)", ([f"public.{t}" for t in TABLES],)
    ).fetchone()[0]
    dead = psycopg.connect(cluster.dsn(DB))  # a worker whose transaction stays open
    held = dead.execute("SELECT nl2sql._reindex_claim(%s, 'dead')", (run,)).fetchone()[0]
    pid = dead.execute("SELECT pg_backend_pid()").fetchone()[0]
    seen = []
    with cluster.connect(DB) as live:
        live.autocommit = True
        while r := live.execute("SELECT nl2sql._reindex_claim(%s)", (run,)).fetchone()[0]:
            seen.append(r["table"])
        # every table but the held one, each once
        assert sorted(seen + [held["table"]]) == sorted(f"public.{t}" for t in TABLES)
        assert live.execute("SELECT nl2sql._reindex_pending(%s)", (run,)).fetchone()[0] == 1
        live.execute("SELECT pg_terminate_backend(%s)", (pid,))  # the worker dies
        for _ in range(50):  # its transaction is rolled back: the table is claimable again
            r = live.execute("SELECT nl2sql._reindex_claim(%s)", (run,)).fetchone()[0]
            if r is not None:
                break
            live.execute("SELECT pg_sleep(0.1)")
        assert r is not None and r["table"] == held["table"]
        assert live.execute("SELECT nl2sql._reindex_pending(%s)", (run,)).fetchone()[0] == 0
        assert live.execute("SELECT nl2sql._reindex_claim(%s)", (run,)).fetchone()[0] is None
    dead.close()


def test_client_workers_beside_the_database_index_the_same(jdb, cluster):
    from nl2sql import connect

    _empty(jdb)
    index_database(cluster.dsn(DB), None, True, progress=False, jobs=1)
    before = _index(jdb)
    _empty(jdb)
    with connect(cluster.dsn(DB)) as client:
        out = client.reindex(force=True, jobs=2, dsn=cluster.dsn(DB))
    assert out["tables_indexed"] == len(TABLES)
    after = _index(jdb)
    assert after["mirror"] == before["mirror"]
    assert after["values"].keys() == before["values"].keys()
    # embedded in this process's encoder rather than the server's: the same model and precision
    same = jdb.execute(
        "SELECT min(1 - (a.embedding <=> b))::float8 FROM nl2sql.cell_value a "
        "JOIN unnest(%s::text[], %s::text[]) AS u(v, e) ON u.v = a.value "
        "CROSS JOIN LATERAL (SELECT u.e::halfvec(384) AS b) x",
        (
            [k[2] for k in before["values"]],
            list(before["values"].values()),
        ),
    ).fetchone()[0]
    assert same > 0.999


def _catalog(conn) -> list[tuple]:
    """The schema index rows a reindex writes per table (the data state aside)."""
    return conn.execute(
        "SELECT c.table_name, c.column_name, c.values_indexed, c.values_complete, "
        "c.sample_values, t.fingerprint FROM nl2sql.schema_column c JOIN nl2sql.schema_table t "
        "USING (schema_name, table_name) ORDER BY 1, 2"
    ).fetchall()


@pytest.fixture
def part_rows(jdb):
    """Tables of at least 20 rows are queued in parts (t2 .. t5 of TABLES); reset after."""
    jdb.execute("ANALYZE")  # reltuples: what _reindex_enqueue weighs tables by
    jdb.execute("SELECT nl2sql.set_setting('reindex_part_rows', '20')")
    yield 20
    jdb.execute("SELECT nl2sql.reset_setting('reindex_part_rows')")


def test_large_tables_in_parts_index_what_one_worker_does(jdb, cluster, part_rows):
    _empty(jdb)
    index_database(cluster.dsn(DB), None, True, progress=False, jobs=1)
    before, cat_before = _index(jdb), _catalog(jdb)
    _empty(jdb)
    many = index_database(cluster.dsn(DB), None, True, progress=False, jobs=2)
    assert _index(jdb) == before and _catalog(jdb) == cat_before
    assert many["tables_indexed"] == len(TABLES) and many["values"] == len(before["values"])
    run = jdb.execute("SELECT max(run_id) FROM nl2sql.reindex_queue").fetchone()[0]
    parts = dict(
        jdb.execute(
            "SELECT table_name, array_agg(part ORDER BY part) FILTER (WHERE done_at IS NOT NULL) "
            "FROM nl2sql.reindex_queue WHERE run_id = %s AND parts = 2 GROUP BY 1",
            (run,),
        ).fetchall()
    )
    assert parts == {t: [0, 1] for t in TABLES[2:]}
    # each table's data state recorded once its parts were done: nothing left to reindex
    changed = jdb.execute("SELECT count(*) FILTER (WHERE changed) FROM nl2sql._reindex_changed()")
    assert changed.fetchone()[0] == 0


def test_a_table_with_a_part_not_done_is_read_again(jdb, cluster, part_rows):
    index_database(cluster.dsn(DB), None, True, progress=False, jobs=1)
    run = jdb.execute("SELECT nl2sql._reindex_enqueue(%s, true, 2)", (["public.t5"],))
    run = run.fetchone()[0]
    with cluster.connect(DB) as w:  # one worker does part 0 and commits, part 1 is never done
        w.autocommit = True
        got = w.execute("SELECT nl2sql._reindex_claim(%s, 'w')", (run,)).fetchone()[0]
        assert (got["table"], got["part"], got["columns"]) == ("public.t5", 0, 3)
        assert w.execute("SELECT nl2sql._reindex_pending(%s)", (run,)).fetchone()[0] == 1
    state = jdb.execute(
        "SELECT data_state FROM nl2sql.schema_table WHERE table_name = 't5'"
    ).fetchone()[0]
    assert state is None
    changed = dict(
        jdb.execute("SELECT table_name, changed FROM nl2sql._reindex_changed()").fetchall()
    )
    assert changed == {t: t == "t5" for t in TABLES}
    jdb.execute("DELETE FROM nl2sql.reindex_queue WHERE run_id = %s", (run,))


def test_client_workers_index_large_tables_in_parts_the_same(jdb, cluster, part_rows):
    from nl2sql import connect

    _empty(jdb)
    index_database(cluster.dsn(DB), None, True, progress=False, jobs=1)
    before, cat_before = _index(jdb), _catalog(jdb)
    _empty(jdb)
    with connect(cluster.dsn(DB)) as client:
        out = client.reindex(force=True, jobs=2, dsn=cluster.dsn(DB))
    assert out["tables_indexed"] == len(TABLES) and out["values"] == len(before["values"])
    assert _index(jdb)["values"].keys() == before["values"].keys()
    assert _catalog(jdb) == cat_before
    split = jdb.execute(
        "SELECT count(*) FROM nl2sql.reindex_queue WHERE parts = 2 AND done_at IS NOT NULL "
        "AND run_id = (SELECT max(run_id) FROM nl2sql.reindex_queue)"
    ).fetchone()[0]
    assert split == 2 * len(TABLES[2:])
    changed = jdb.execute("SELECT count(*) FILTER (WHERE changed) FROM nl2sql._reindex_changed()")
    assert changed.fetchone()[0] == 0
