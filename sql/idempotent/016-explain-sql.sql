-- nl2sql.explain_sql(sql): a read-only query explained in words by a model, for the caller
-- (SECURITY INVOKER: the relations it reads must be ones the caller may SELECT). The model gets
-- the query and the schema of the relations it reads through the gate (generation/explain_sql.py). search_path FROM CURRENT: as 001-functions.sql sets it.

CREATE OR REPLACE FUNCTION nl2sql._explain_sql(sql text, caller_search_path text)
RETURNS text LANGUAGE plpython3u SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.explain_sql(plpy, sql, caller_search_path)
$py$;

CREATE OR REPLACE FUNCTION nl2sql.explain_sql(sql text,
                                              search_path text DEFAULT pg_catalog.current_setting('search_path'))
RETURNS text LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT
AS $$ SELECT nl2sql._explain_sql(sql, search_path) $$;
COMMENT ON FUNCTION nl2sql.explain_sql(text, text) IS
    'nl2sql: what a read-only query does, in words, written by a model for the caller';
