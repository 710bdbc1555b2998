-- Change detection for reindex (py_udf/nl2sql/indexer.py, table_states): what the statistics
-- say about a relation's data, without reading it. For a table or materialized view: its oid,
-- relfilenode (TRUNCATE, VACUUM FULL, CLUSTER, a rewriting ALTER TABLE, REFRESH change it) and
-- the tuples inserted, updated and deleted according to the cumulative statistics (committed
-- counts of all sessions, plus the calling session's not yet flushed ones: a session publishes
-- its counts at most once a second); for a partitioned table those of its partitions; for a view
-- those of the relations its rules read, recursively. NULL when track_counts is off (the caller
-- then re-reads the table every time). An md5 over the parts, so that equal text = unchanged.
CREATE OR REPLACE FUNCTION nl2sql._data_state(rel oid) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH RECURSIVE deps(oid, depth) AS (
        SELECT rel, 0
        UNION
        SELECT x.oid, d.depth + 1
          FROM deps d JOIN pg_class c ON c.oid = d.oid
          CROSS JOIN LATERAL (
              SELECT dep.refobjid AS oid FROM pg_rewrite r
                JOIN pg_depend dep ON dep.classid = 'pg_rewrite'::regclass AND dep.objid = r.oid
                 AND dep.refclassid = 'pg_class'::regclass AND dep.refobjid <> c.oid
               WHERE c.relkind = 'v' AND r.ev_class = c.oid
              UNION
              SELECT i.inhrelid FROM pg_inherits i WHERE c.relkind = 'p' AND i.inhparent = c.oid
          ) x
         WHERE d.depth < 32)
    SELECT CASE WHEN current_setting('track_counts')::boolean THEN
        md5(string_agg(concat_ws(':', c.oid, c.relfilenode,
                                 pg_stat_get_tuples_inserted(c.oid) + pg_stat_get_xact_tuples_inserted(c.oid),
                                 pg_stat_get_tuples_updated(c.oid) + pg_stat_get_xact_tuples_updated(c.oid),
                                 pg_stat_get_tuples_deleted(c.oid) + pg_stat_get_xact_tuples_deleted(c.oid)),
                       ',' ORDER BY c.oid)) END
      FROM (SELECT DISTINCT oid FROM deps) d JOIN pg_class c ON c.oid = d.oid
$$;

-- The catalog part of a relation's index entry, as one md5: kind, comment, row security,
-- columns (number, name, type, comment), primary and foreign keys (with the referenced
-- relation's name) and its value-policy rows. Read from the catalog only.
CREATE OR REPLACE FUNCTION nl2sql._catalog_state(rel oid) RETURNS text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT md5(concat_ws('|', c.relkind, obj_description(c.oid, 'pg_class'), c.relrowsecurity,
        (SELECT string_agg(concat_ws(':', a.attnum, a.attname, format_type(a.atttypid, a.atttypmod),
                                     col_description(a.attrelid, a.attnum)), ',' ORDER BY a.attnum)
           FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
        (SELECT string_agg(concat_ws(':', k.conname, k.contype, k.conkey::text, rn.nspname,
                                     rc.relname, k.confkey::text), ',' ORDER BY k.conname)
           FROM pg_constraint k LEFT JOIN pg_class rc ON rc.oid = k.confrelid
           LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace
          WHERE k.conrelid = c.oid AND k.contype IN ('p', 'f')),
        (SELECT string_agg(concat_ws(':', p.column_name, p.send_values), ',' ORDER BY p.column_name)
           FROM nl2sql.value_policy p JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE p.schema_name = n.nspname AND p.table_name = c.relname)))
      FROM pg_class c WHERE c.oid = rel
$$;

-- Tables of the CLI's reindex with whether each changed since it was indexed (nl2sql-index
-- calls _reindex_table only for changed ones).
CREATE OR REPLACE FUNCTION nl2sql._reindex_changed(schemas text[] DEFAULT NULL, force boolean DEFAULT false)
RETURNS TABLE (schema_name text, table_name text, changed boolean)
LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.reindex_changed(plpy, schemas, force)
$py$;
REVOKE EXECUTE ON FUNCTION nl2sql._reindex_changed(text[], boolean) FROM PUBLIC;

-- The CLI's bulk start: drops the value index's HNSW index when the value index is (almost)
-- empty (index_maintenance.begin_bulk); nl2sql._reindex_finish builds it again. Returns
-- whether it dropped.
CREATE OR REPLACE FUNCTION nl2sql._reindex_begin() RETURNS boolean
LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.reindex_begin(plpy)
$py$;
REVOKE EXECUTE ON FUNCTION nl2sql._reindex_begin() FROM PUBLIC;

-- Several workers (sql/incremental/025-reindex-queue.sql): the coordinator queues the changed
-- tables of a run (returns its run id; runs finished more than a day ago are removed); each
-- worker calls _reindex_claim until it returns NULL (nothing left it could claim); the
-- coordinator waits until _reindex_pending is 0, then calls _reindex_finish once (the HNSW
-- build, the trigram tidy-up, ANALYZE). With parts above 1, a table of at least the setting
-- reindex_part_rows rows (reltuples) is queued as that many parts
-- (sql/incremental/027-reindex-parts.sql).
CREATE OR REPLACE FUNCTION nl2sql._reindex_enqueue(tables text[], force boolean DEFAULT false,
                                                   parts int DEFAULT 1)
RETURNS bigint LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    run bigint := nextval('nl2sql.reindex_run_seq');
    part_rows float8 := COALESCE((SELECT s.value::float8 FROM nl2sql.settings s
                                   WHERE s.name = 'reindex_part_rows'), 100000);
BEGIN
    DELETE FROM nl2sql.reindex_queue q WHERE q.run_id IN (SELECT r.run_id FROM
        nl2sql.reindex_queue r GROUP BY r.run_id HAVING max(r.queued_at) < now() - interval '1 day');
    INSERT INTO nl2sql.reindex_queue (run_id, schema_name, table_name, force, weight, part, parts)
    SELECT run, w.s, w.t, force, w.weight, p.part, w.n
      FROM (SELECT x.s, x.t, x.weight,
                   CASE WHEN x.weight >= part_rows THEN GREATEST(COALESCE(parts, 1), 1)
                        ELSE 1 END AS n
              FROM (SELECT split_part(t, '.', 1) AS s,
                           substr(t, length(split_part(t, '.', 1)) + 2) AS t
                      FROM unnest(tables) AS u(t)) y
             CROSS JOIN LATERAL (SELECT y.s, y.t, GREATEST(COALESCE((SELECT c.reltuples
                   FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n
                     ON n.oid = c.relnamespace
                  WHERE n.nspname = y.s AND c.relname = y.t), 0), 0) AS weight) x) w
     CROSS JOIN LATERAL generate_series(0, w.n - 1) AS p(part)
    ON CONFLICT DO NOTHING;
    -- a table in parts has its schema_table row before any part runs (each part's cell values
    -- reference it; a part waiting for part 0 to write it would wait for part 0's whole
    -- transaction), its data state NULL until every part is done (read again otherwise)
    INSERT INTO nl2sql.schema_table (schema_name, table_name)
    SELECT DISTINCT q.schema_name, q.table_name FROM nl2sql.reindex_queue q
     WHERE q.run_id = run AND q.parts > 1
    ON CONFLICT (schema_name, table_name) DO UPDATE SET data_state = NULL;
    RETURN run;
END
$$;
REVOKE EXECUTE ON FUNCTION nl2sql._reindex_enqueue(text[], boolean, int) FROM PUBLIC;

CREATE OR REPLACE FUNCTION nl2sql._reindex_claim(run_id bigint DEFAULT NULL, worker text DEFAULT NULL)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.reindex_claim(plpy, run_id, worker)
$py$;
REVOKE EXECUTE ON FUNCTION nl2sql._reindex_claim(bigint, text) FROM PUBLIC;

-- The run's tables with a part not done.
CREATE OR REPLACE FUNCTION nl2sql._reindex_pending(run_id bigint)
RETURNS int LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT count(DISTINCT (q.schema_name, q.table_name))::int FROM nl2sql.reindex_queue q
     WHERE q.run_id = _reindex_pending.run_id AND q.done_at IS NULL
$$;
REVOKE EXECUTE ON FUNCTION nl2sql._reindex_pending(bigint) FROM PUBLIC;
