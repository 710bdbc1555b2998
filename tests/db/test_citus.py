"""Citus rules, checked without Citus (it is not a Debian package: these machines cannot run it).

- Without Citus the indexer's SQL names no Citus object (tests/unit/ops/test_citus.py), and the
  real plan() runs (every other database test covers that path).
- With Citus, the SQL that ``nl2sql.citus`` builds is run against stand-ins of the three Citus
  objects it uses, created in a scratch database with the signatures of Citus 13's:
  ``pg_catalog.relation_is_a_known_shard(regclass) → bool``, ``pg_dist_partition`` and
  ``run_command_on_shards(regclass, text) → (shardid, success, result)``. The stand-ins follow
  Citus's rules (a shard is ``<table>_<shardid>`` of a table in ``pg_dist_shard``;
  ``run_command_on_shards`` runs the command once per shard with ``%s`` = the shard's name).
  What they cannot show is Citus's own behaviour; README "Citus" says so.
"""

from __future__ import annotations

import psycopg
import psycopg.sql
import pytest

from nl2sql.ops import _citus as citus

DB = "nl2sql_citus_standins"
STANDINS = """
CREATE TABLE public.pg_dist_shard_standin (logicalrelid regclass, shardid bigint);
CREATE FUNCTION pg_catalog.relation_is_a_known_shard(rel regclass) RETURNS bool
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM public.pg_dist_shard_standin s
                   JOIN pg_class l ON l.oid = s.logicalrelid JOIN pg_class c ON c.oid = rel
                   WHERE c.relnamespace = l.relnamespace
                     AND c.relname = l.relname || '_' || s.shardid)
$$;
CREATE TABLE public.pg_dist_partition (logicalrelid regclass);
CREATE FUNCTION pg_catalog.run_command_on_shards(rel regclass, command text,
    OUT shardid bigint, OUT success bool, OUT result text) RETURNS SETOF record
LANGUAGE plpgsql AS $$
DECLARE s record;
BEGIN
    FOR s IN SELECT d.shardid AS id, quote_ident(n.nspname) || '.' || quote_ident(c.relname || '_' || d.shardid) AS name
             FROM public.pg_dist_shard_standin d JOIN pg_class c ON c.oid = d.logicalrelid
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE d.logicalrelid = rel ORDER BY 1 LOOP
        shardid := s.id; success := true;
        EXECUTE format(command, s.name) INTO result;
        RETURN NEXT;
    END LOOP;
END
$$;
CREATE TABLE concert (id int, venue text);
CREATE TABLE concert_102044 (id int, venue text);
CREATE TABLE concert_102045 (id int, venue text);
CREATE TABLE concert_2024 (id int);   -- not a shard: no such shard id
CREATE TABLE stadium (id int);
INSERT INTO public.pg_dist_shard_standin VALUES ('concert', 102044), ('concert', 102045);
INSERT INTO public.pg_dist_partition VALUES ('concert');
INSERT INTO concert_102044 SELECT g, 'a' FROM generate_series(1, 30) g;
INSERT INTO concert_102045 SELECT g, 'b' FROM generate_series(1, 12) g;
DELETE FROM concert_102045 WHERE id <= 2;
"""


@pytest.fixture(scope="module")
def standins(cluster):
    cluster.create_database(DB, drop=True)
    conn = cluster.connect(DB)
    conn.execute(STANDINS)
    conn.execute("SELECT pg_stat_force_next_flush()")
    yield conn
    conn.execute(
        "DROP FUNCTION pg_catalog.relation_is_a_known_shard(regclass), "
        "pg_catalog.run_command_on_shards(regclass, text)"
    )
    conn.close()


def _run(conn, sql: str, arg, argtype: str) -> list[tuple]:
    """Run the indexer's SQL (``$1`` parameter, as PL/Python's plans take it) unchanged."""
    conn.execute("DEALLOCATE ALL")
    res = conn.pgconn.exec_(f"PREPARE q({argtype}) AS {sql}".encode())  # simple protocol: $1 stays
    assert res.status == psycopg.pq.ExecStatus.COMMAND_OK, res.error_message.decode()
    return conn.execute(
        psycopg.sql.SQL("EXECUTE q({})").format(psycopg.sql.Literal(arg))
    ).fetchall()


def test_with_citus_shards_never_enter_the_plan(standins):
    plain = [r[1] for r in _run(standins, citus.plan_query(False), ["public"], "text[]")]
    assert {"concert_102044", "concert_102045"} <= set(plain)  # what reindex() indexed before
    tables = [r[1] for r in _run(standins, citus.plan_query(True), ["public"], "text[]")]
    assert "concert_102044" not in tables and "concert_102045" not in tables
    assert {"concert", "concert_2024", "stadium"} <= set(tables)


def test_distributed_table_is_measured_from_its_shards_statistics(standins):
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the statistics of the inserts reach pg_stat after a flush
        r = _run(standins, citus.shard_stats_query(), "public.concert", "text")[0]
        if r[0] == 40:
            break
        time.sleep(0.5)
    n_rows, changes, shards, ok = r
    assert (n_rows, changes, shards, ok) == (40, 44, "102044,102045", True)
    before = r
    standins.execute("UPDATE concert_102044 SET venue = 'c' WHERE id = 1")
    standins.execute("SELECT pg_stat_force_next_flush()")
    time.sleep(0.2)
    after = _run(standins, citus.shard_stats_query(), "public.concert", "text")[0]
    assert after[1] == before[1] + 1 and after[0] == before[0]
