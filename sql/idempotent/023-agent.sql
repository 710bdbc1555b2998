-- The agent door (docs/mcp.md): an agent's own SQL run as a candidate is, the value index
-- searched for a literal, one table described. SECURITY INVOKER: every statement runs as the
-- caller (its privileges, row-level security and value rules). search_path FROM CURRENT: as
-- 001-functions.sql sets it.

CREATE OR REPLACE FUNCTION nl2sql._execute_sql(sql text, max_rows integer, dry_run boolean,
                                               for_model boolean, caller_search_path text)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.execute_sql(plpy, sql, max_rows, dry_run, for_model, caller_search_path)
$py$;

CREATE OR REPLACE FUNCTION nl2sql.execute_sql(sql text, max_rows integer DEFAULT 50,
                                              dry_run boolean DEFAULT false,
                                              for_model boolean DEFAULT false,
                                              search_path text DEFAULT pg_catalog.current_setting('search_path'))
RETURNS jsonb LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT
AS $$ SELECT nl2sql._execute_sql(sql, max_rows, dry_run, for_model, search_path) $$;
COMMENT ON FUNCTION nl2sql.execute_sql(text, integer, boolean, boolean, text) IS
    'nl2sql: one read-only query of the caller run as a candidate is (every check, read-only, time, plan-cost, row and byte limits), logged; dry_run plans it only; for_model gates the rows for a model reader';

CREATE OR REPLACE FUNCTION nl2sql._search_values(text text, k integer, caller_search_path text)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.search_values(plpy, text, k, caller_search_path)
$py$;

CREATE OR REPLACE FUNCTION nl2sql.search_values(text text, k integer DEFAULT 10,
                                                search_path text DEFAULT pg_catalog.current_setting('search_path'))
RETURNS jsonb LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT
AS $$ SELECT nl2sql._search_values(text, k, search_path) $$;
COMMENT ON FUNCTION nl2sql.search_values(text, integer, text) IS
    'nl2sql: the indexed cell values most like a literal (exact, trigram, vector) and the columns holding them, of the columns whose values the caller may read and send to a model';

CREATE OR REPLACE FUNCTION nl2sql._describe_table(name text, for_model boolean,
                                                  caller_search_path text)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.describe_table(plpy, name, for_model, caller_search_path)
$py$;

CREATE OR REPLACE FUNCTION nl2sql.describe_table(name text, for_model boolean DEFAULT false,
                                                 search_path text DEFAULT pg_catalog.current_setting('search_path'))
RETURNS jsonb LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT
AS $$ SELECT nl2sql._describe_table(name, for_model, search_path) $$;
COMMENT ON FUNCTION nl2sql.describe_table(text, boolean, text) IS
    'nl2sql: one indexed table as the caller may see it: columns, types, comments, keys, foreign keys, row estimate, sample values (gated for a model reader with for_model)';

CREATE OR REPLACE FUNCTION nl2sql._semantic_context(question text, k integer, for_model boolean,
                                                    caller_search_path text)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.semantic_context(plpy, question, k, for_model, caller_search_path)
$py$;

CREATE OR REPLACE FUNCTION nl2sql.semantic_context(question text DEFAULT NULL, k integer DEFAULT 5,
                                                   for_model boolean DEFAULT false,
                                                   search_path text DEFAULT pg_catalog.current_setting('search_path'))
RETURNS jsonb LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT
AS $$ SELECT nl2sql._semantic_context(question, k, for_model, search_path) $$;
COMMENT ON FUNCTION nl2sql.semantic_context(text, integer, boolean, text) IS
    'nl2sql: the semantic model''s objects and relationships over the tables the caller may read, and the verified queries nearest to a question with their SQL (gated for a model reader with for_model)';
