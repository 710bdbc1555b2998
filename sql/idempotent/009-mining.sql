-- Query-log mining (docs/curated.md, "Mining the query log"): questions written by a model for the most
-- frequent read-only statements of pg_stat_statements, pending until a DBA approves them into
-- the example pool and the verified queries. Administrative: pg_stat_statements shows other
-- roles' statements, so neither the functions nor the table and its listing are for PUBLIC.

CREATE OR REPLACE FUNCTION nl2sql.mine_queries("limit" integer DEFAULT 20)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.mine_queries(plpy, limit)
$py$;
COMMENT ON FUNCTION nl2sql.mine_queries(integer) IS
    'nl2sql: write questions for the most frequent read-only pg_stat_statements queries (pending approval)';

CREATE OR REPLACE FUNCTION nl2sql.approve_mined(id bigint, question text DEFAULT NULL)
RETURNS bigint LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.approve_mined(plpy, id, question)
$py$;
COMMENT ON FUNCTION nl2sql.approve_mined(bigint, text) IS
    'nl2sql: approve a mined question/SQL pair into the example pool and the verified queries';

CREATE OR REPLACE FUNCTION nl2sql.reject_mined(id bigint) RETURNS boolean
LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH u AS (UPDATE nl2sql.mined_query m SET status = 'rejected', decided_at = now(),
                      decided_by = current_user
               WHERE m.id = reject_mined.id AND m.status <> 'approved' RETURNING 1)
    SELECT count(*) > 0 FROM u
$$;
COMMENT ON FUNCTION nl2sql.reject_mined(bigint) IS
    'nl2sql: reject a mined question/SQL pair (it is not mined again)';

CREATE OR REPLACE VIEW nl2sql.mined_queries AS
    SELECT id, status, kind, question, sql, parameters, calls, model, error, queryid, mined_at,
           decided_at, decided_by, example_id, verified_id
    FROM nl2sql.mined_query ORDER BY id;
COMMENT ON VIEW nl2sql.mined_queries IS
    'nl2sql: mined question/SQL pairs (pending, approved, rejected, failed)';

REVOKE ALL ON nl2sql.mined_query, nl2sql.mined_queries FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION nl2sql.mine_queries(integer), nl2sql.approve_mined(bigint, text),
    nl2sql.reject_mined(bigint) FROM PUBLIC;
