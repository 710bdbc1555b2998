-- Scheduling reindex() with pg_cron (docs/operations.md, "Scheduling"). pg_cron keeps its jobs in
-- one database of the server (setting cron.database_name) and runs each job in the database the
-- job names (cron.schedule_in_database). These functions schedule nl2sql.reindex() in the
-- caller's database: directly when this is pg_cron's database, else through dblink, connecting
-- to pg_cron's database the way pg_cron connects to run its jobs (host cron.host, this server's
-- port) as the calling role.

-- pg_cron's database and one SQL statement returning one value, run there; the errors say what
-- to install or where to run the statement by hand.
CREATE OR REPLACE FUNCTION nl2sql._cron_run(statement text) RETURNS text
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    cron_db text := pg_catalog.current_setting('cron.database_name', true);
    dblink_schema name;
    conninfo text;
    result text;
BEGIN
    IF cron_db IS NULL THEN
        RAISE EXCEPTION 'nl2sql: pg_cron is not loaded in this server'
            USING HINT = pg_catalog.format(
                'install pg_cron (Debian: apt-get install postgresql-%s-cron), add pg_cron to '
                'shared_preload_libraries and set cron.database_name in postgresql.conf, '
                'restart PostgreSQL, then CREATE EXTENSION pg_cron in that database',
                pg_catalog.current_setting('server_version_num')::int OPERATOR(pg_catalog./) 10000);
    END IF;
    IF cron_db OPERATOR(pg_catalog.=) pg_catalog.current_database() THEN
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_cron') THEN
            RAISE EXCEPTION 'nl2sql: pg_cron is loaded but not created in database %', cron_db
                USING HINT = 'CREATE EXTENSION pg_cron;';
        END IF;
        EXECUTE statement INTO result;
        RETURN result;
    END IF;
    SELECT n.nspname INTO dblink_schema FROM pg_catalog.pg_extension e
      JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'dblink';
    IF dblink_schema IS NULL THEN
        RAISE EXCEPTION 'nl2sql: pg_cron keeps its jobs in database % (cron.database_name), and reaching it from database % needs the dblink extension',
                        cron_db, pg_catalog.current_database()
            USING HINT = pg_catalog.format('CREATE EXTENSION dblink; or run this in database %s: %s',
                                           cron_db, statement);
    END IF;
    conninfo := pg_catalog.format('dbname=%s host=%s port=%s user=%s',
        nl2sql._conninfo_value(cron_db),
        nl2sql._conninfo_value(COALESCE(pg_catalog.current_setting('cron.host', true), 'localhost')),
        nl2sql._conninfo_value(pg_catalog.current_setting('port')),
        nl2sql._conninfo_value(current_user));
    BEGIN
        EXECUTE pg_catalog.format('SELECT r FROM %I.dblink($1, $2) AS t(r text)', dblink_schema)
            INTO result USING conninfo, statement;
    EXCEPTION WHEN OTHERS THEN
        IF SQLSTATE LIKE '08%' OR SQLSTATE LIKE '28%' OR SQLSTATE IN ('2F003', '3F000', '42883') THEN
            RAISE EXCEPTION 'nl2sql: could not run in pg_cron''s database %: %', cron_db, SQLERRM
                USING HINT = pg_catalog.format('is pg_cron created there (CREATE EXTENSION pg_cron), and may '
                                               'role %s connect to it without a password (dblink allows that '
                                               'to superusers only)? Or run this in database %s: %s',
                                               current_user, cron_db, statement);
        END IF;
        RAISE EXCEPTION 'nl2sql: pg_cron refused: %', SQLERRM USING ERRCODE = SQLSTATE;
    END;
    RETURN result;
END
$$;

-- A libpq connection-string value, quoted ('...', with \ and ' escaped).
CREATE OR REPLACE FUNCTION nl2sql._conninfo_value(v text) RETURNS text
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT '''' || replace(replace(v, '\', '\\'), '''', '\''') || ''''
$$;

-- The pg_cron job name of this database's reindex job.
CREATE OR REPLACE FUNCTION nl2sql._reindex_job_name() RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT 'nl2sql-reindex ' || current_database()
$$;

CREATE OR REPLACE FUNCTION nl2sql.schedule_reindex(schedule text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF schedule IS NULL OR pg_catalog.btrim(schedule) OPERATOR(pg_catalog.=) '' THEN
        RAISE EXCEPTION 'nl2sql.schedule_reindex: schedule is empty'
            USING HINT = 'a cron schedule, e.g. SELECT nl2sql.schedule_reindex(''0 3 * * *'') for 03:00 every day';
    END IF;
    RETURN nl2sql._cron_run(pg_catalog.format(
        'SELECT cron.schedule_in_database(%L, %L, %L, %L)::text',
        nl2sql._reindex_job_name(), schedule, 'SELECT nl2sql.reindex()',
        pg_catalog.current_database()))::bigint;
END
$$;
COMMENT ON FUNCTION nl2sql.schedule_reindex(text) IS
    'nl2sql: run nl2sql.reindex() in this database on a cron schedule (pg_cron); returns the job id';

CREATE OR REPLACE FUNCTION nl2sql.unschedule_reindex() RETURNS boolean
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    RETURN nl2sql._cron_run(pg_catalog.format(
        'SELECT COALESCE((SELECT cron.unschedule(j.jobid) FROM cron.job j '
        'WHERE j.jobname = %L AND j.username = current_user), false)::text',
        nl2sql._reindex_job_name()))::boolean;
END
$$;
COMMENT ON FUNCTION nl2sql.unschedule_reindex() IS
    'nl2sql: remove this database''s scheduled reindex job (pg_cron); false when there was none';

REVOKE EXECUTE ON FUNCTION nl2sql.schedule_reindex(text), nl2sql.unschedule_reindex(),
    nl2sql._cron_run(text) FROM PUBLIC;

-- The query log's retention (docs/operations.md, "The query log"): rows older than setting
-- query_log_retention_days (0: none) are deleted, 10,000 a statement. reindex() (and so the
-- scheduled reindex job) ends with the same step.
CREATE OR REPLACE FUNCTION nl2sql.prune_query_log() RETURNS jsonb
LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.prune_query_log(plpy)
$py$;
COMMENT ON FUNCTION nl2sql.prune_query_log() IS
    'nl2sql: delete query_log rows older than setting query_log_retention_days (0 keeps every row)';
REVOKE EXECUTE ON FUNCTION nl2sql.prune_query_log() FROM PUBLIC;
