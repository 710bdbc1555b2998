"""nl2sql.schedule_reindex / unschedule_reindex with the pg_cron the test cluster preloads
(shared_preload_libraries = 'pg_cron,pg_stat_statements', cron.database_name = 'postgres':
nl2sql_indexer.cluster).

The job is scheduled from a database other than pg_cron's, runs nl2sql.reindex() in that
database (its schema index fills up) and its run is in cron.job_run_details. pg_cron 1.4
(Debian bookworm) has no seconds schedules, so there the test waits for the next minute; from
1.5 on (Debian 13's, the majors') it schedules the job every two seconds.
"""

from __future__ import annotations

import time

import psycopg
import pytest

DB = "nl2sql_cron"
JOB = f"nl2sql-reindex {DB}"


@pytest.fixture(scope="module")
def cron_db(cluster):
    with cluster.connect("postgres") as pg:
        pg.execute("DROP EXTENSION IF EXISTS pg_cron")
    cluster.create_database(DB, drop=True)
    conn = cluster.connect(DB)
    conn.execute("CREATE TABLE harbour (hid int PRIMARY KEY, hname text)")
    conn.execute("INSERT INTO harbour VALUES (1, 'Valletta'), (2, 'Kotor')")
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    yield conn
    conn.close()


def test_errors_say_what_to_install(cluster, cron_db):
    with pytest.raises(psycopg.errors.RaiseException) as e:
        cron_db.execute("SELECT nl2sql.schedule_reindex('0 3 * * *')")
    assert "needs the dblink extension" in str(e.value)
    assert "CREATE EXTENSION dblink" in e.value.diag.message_hint
    assert (
        "cron.schedule_in_database('nl2sql-reindex nl2sql_cron', '0 3 * * *'"
        in e.value.diag.message_hint
    )  # what to run by hand in pg_cron's database
    cron_db.execute("CREATE EXTENSION dblink")
    with pytest.raises(psycopg.errors.RaiseException) as e:  # pg_cron not created in 'postgres'
        cron_db.execute("SELECT nl2sql.schedule_reindex('0 3 * * *')")
    assert "CREATE EXTENSION pg_cron" in e.value.diag.message_hint
    with cluster.connect("postgres") as pg:
        pg.execute("CREATE EXTENSION pg_cron")
    with pytest.raises(psycopg.errors.RaiseException) as e:
        cron_db.execute("SELECT nl2sql.schedule_reindex('')")
    assert "schedule is empty" in str(e.value)
    with pytest.raises(psycopg.Error) as e:
        cron_db.execute("SELECT nl2sql.schedule_reindex('every now and then')")
    assert "invalid schedule" in str(e.value)


def add_log_rows(conn, ages_days: list[float], tag: str) -> None:
    """Query log rows ``tag <i>`` created ``ages_days[i]`` days ago (written as the owner)."""
    for i, age in enumerate(ages_days):
        conn.execute(
            "INSERT INTO nl2sql.query_log (created_at, question, trace) "
            "VALUES (now() - make_interval(secs => %s * 86400), %s, '{}')",
            (age, f"{tag} {i}"),
        )


def log_rows(conn, tag: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT question FROM nl2sql.query_log WHERE question LIKE %s ORDER BY question",
            (f"{tag} %",),
        )
    ]


# (retention setting, ages of the rows in days, the rows kept)
RETENTION = [
    (None, [45, 31, 29, 0.01], ["r 2", "r 3"]),  # the default: 30 days
    ("7", [8, 6.9, 0], ["r 1", "r 2"]),
    ("1", [400, 3, 2], []),
    ("0", [4000, 31, 0], ["r 0", "r 1", "r 2"]),  # 0 keeps every row
]


@pytest.mark.parametrize("setting,ages,kept", RETENTION)
def test_prune_query_log_deletes_rows_older_than_the_retention(cron_db, setting, ages, kept):
    cron_db.execute("DELETE FROM nl2sql.query_log WHERE question LIKE 'r %'")
    if setting is None:
        cron_db.execute("SELECT nl2sql.reset_setting('query_log_retention_days')")
    else:
        cron_db.execute("SELECT nl2sql.set_setting('query_log_retention_days', %s)", (setting,))
    try:
        add_log_rows(cron_db, ages, "r")
        out = cron_db.execute("SELECT nl2sql.prune_query_log()").fetchone()[0]
        assert log_rows(cron_db, "r") == kept
        assert out["deleted"] == len(ages) - len(kept)
        assert out["retention_days"] == int(setting or 30)
    finally:
        cron_db.execute("SELECT nl2sql.reset_setting('query_log_retention_days')")
        cron_db.execute("DELETE FROM nl2sql.query_log WHERE question LIKE 'r %'")


def test_prune_query_log_deletes_in_batches_and_is_administrative(cluster, cron_db):
    cron_db.execute("DELETE FROM nl2sql.query_log WHERE question LIKE 'b %'")
    cron_db.execute(
        "INSERT INTO nl2sql.query_log (created_at, question, trace) "
        "SELECT now() - interval '60 days', 'b ' || g, '{}' FROM generate_series(1, 10001) g"
    )
    add_log_rows(cron_db, [1], "b-new")
    out = cron_db.execute("SELECT nl2sql.prune_query_log()").fetchone()[0]
    assert out["deleted"] == 10001 and out["statements"] == 2
    assert log_rows(cron_db, "b") == [] and log_rows(cron_db, "b-new") == ["b-new 0"]
    cron_db.execute(
        "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'log_reader') "
        "THEN CREATE ROLE log_reader LOGIN; END IF; END$$"
    )
    with cluster.connect(DB, user="log_reader") as other:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            other.execute("SELECT nl2sql.prune_query_log()")
    assert log_rows(cron_db, "b-new") == ["b-new 0"]


def _soonest_schedule(cluster) -> str:
    """Every two seconds where pg_cron has seconds schedules (1.5 and later), else every minute
    (a run up to 60 s away: idle time, which a suite in one process waits out in full)."""
    with cluster.connect("postgres") as pg:
        got = pg.execute("SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'").fetchone()
    major, minor = (int(x) for x in got[0].split("-")[0].split(".")[:2])
    return "2 seconds" if (major, minor) >= (1, 5) else "* * * * *"


def test_scheduled_reindex_runs_in_the_callers_database(cluster, cron_db):
    assert cron_db.execute("SELECT count(*) FROM nl2sql.schema_table").fetchone()[0] == 0
    # the job's reindex ends by pruning the query log to its retention (30 days)
    cron_db.execute("DELETE FROM nl2sql.query_log WHERE question LIKE 'job %'")
    add_log_rows(cron_db, [90, 2], "job")
    schedule = _soonest_schedule(cluster)
    job = cron_db.execute("SELECT nl2sql.schedule_reindex(%s)", (schedule,)).fetchone()[0]
    # scheduling again updates the one job
    assert cron_db.execute("SELECT nl2sql.schedule_reindex(%s)", (schedule,)).fetchone()[0] == job
    with cluster.connect("postgres") as pg:
        assert pg.execute(
            "SELECT jobname, database, command, username FROM cron.job WHERE jobid = %s", (job,)
        ).fetchone() == (JOB, DB, "SELECT nl2sql.reindex()", "postgres")
        deadline = time.monotonic() + 150
        run = None
        while time.monotonic() < deadline:
            run = pg.execute(
                "SELECT status, return_message FROM cron.job_run_details "
                "WHERE jobid = %s AND status IN ('succeeded', 'failed') "
                "ORDER BY runid LIMIT 1",
                (job,),
            ).fetchone()
            if run:
                break
            time.sleep(1)
    assert run is not None, "pg_cron did not run the job within 150 s"
    assert run[0] == "succeeded", run
    assert cron_db.execute("SELECT table_name FROM nl2sql.schema_table").fetchall() == [
        ("harbour",)
    ]
    assert log_rows(cron_db, "job") == ["job 1"]
    assert cron_db.execute("SELECT nl2sql.unschedule_reindex()").fetchone()[0] is True
    assert cron_db.execute("SELECT nl2sql.unschedule_reindex()").fetchone()[0] is False
    with cluster.connect("postgres") as pg:
        assert (
            pg.execute("SELECT count(*) FROM cron.job WHERE jobid = %s", (job,)).fetchone()[0] == 0
        )


def test_in_pg_crons_own_database_the_job_is_added_directly(cluster, cron_db):
    """No dblink needed where nl2sql and pg_cron share the database (cron.database_name)."""
    with cluster.connect("postgres") as pg:
        pg.execute("CREATE EXTENSION IF NOT EXISTS pg_cron")
        pg.execute("CREATE EXTENSION nl2sql CASCADE")
        try:
            assert (
                pg.execute("SELECT count(*) FROM pg_extension WHERE extname = 'dblink'").fetchone()[
                    0
                ]
                == 0
            )
            job = pg.execute("SELECT nl2sql.schedule_reindex('30 2 * * 0')").fetchone()[0]
            assert pg.execute(
                "SELECT jobname, schedule, database FROM cron.job WHERE jobid = %s", (job,)
            ).fetchone() == ("nl2sql-reindex postgres", "30 2 * * 0", "postgres")
            assert pg.execute("SELECT nl2sql.unschedule_reindex()").fetchone()[0] is True
        finally:
            pg.execute("DROP EXTENSION nl2sql")
