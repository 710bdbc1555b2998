-- Evaluation on the user's own questions (docs/curated.md, "Evaluation on your own questions"):
-- nl2sql.evaluate() asks every verified question the caller may use through the models and
-- keeps the outcome; nl2sql.evaluation_trend shows the runs one after another. Administrative,
-- like calibrate(): not executable by PUBLIC, and the result tables (verified questions, SQL,
-- what each run chose) are not readable by PUBLIC.

CREATE OR REPLACE FUNCTION nl2sql._evaluate(max_questions int, note text, search_path text)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.evaluate(plpy, max_questions, note, search_path)
$py$;

CREATE OR REPLACE FUNCTION nl2sql.evaluate(max_questions int DEFAULT NULL, note text DEFAULT NULL,
                                           search_path text DEFAULT pg_catalog.current_setting('search_path'))
RETURNS jsonb LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT
AS $$ SELECT nl2sql._evaluate(max_questions, note, search_path) $$;
COMMENT ON FUNCTION nl2sql.evaluate(int, text, text) IS
    'nl2sql: execution accuracy of the models on the verified questions (overall, per model, misses classified); kept in nl2sql.evaluation_run / evaluation_result';

-- One row per finished run, oldest first: EX and its change from the previous run, per model,
-- the miss categories, and the settings and models that changed since the previous run.
CREATE OR REPLACE VIEW nl2sql.evaluation_trend AS
    SELECT x.id AS run_id, x.started_at, x.finished_at, x.role_name, x.note, x.questions,
           x.judged, x."right", x.ex, x.ex - x.prev_ex AS ex_change, x.per_model, x.categories,
           (SELECT pg_catalog.jsonb_agg(m.value ->> 'name')
              FROM pg_catalog.jsonb_array_elements(x.models) m) AS models,
           (SELECT pg_catalog.jsonb_object_agg(s.key, s.value)
              FROM pg_catalog.jsonb_each(x.settings) s
             WHERE x.prev_settings IS NOT NULL
               AND x.prev_settings -> s.key IS DISTINCT FROM s.value) AS settings_changed,
           CASE WHEN x.prev_models IS NOT NULL
                THEN x.models IS DISTINCT FROM x.prev_models END AS models_changed,
           x.stopped
    FROM (SELECT r.*, pg_catalog.lag(r.ex) OVER w AS prev_ex,
                 pg_catalog.lag(r.settings) OVER w AS prev_settings,
                 pg_catalog.lag(r.models) OVER w AS prev_models
          FROM nl2sql.evaluation_run r
          WHERE r.finished_at IS NOT NULL
          WINDOW w AS (ORDER BY r.id)) x
    ORDER BY x.id;
COMMENT ON VIEW nl2sql.evaluation_trend IS
    'nl2sql: EX of each finished evaluation run, its change, and what changed in settings and models';

REVOKE EXECUTE ON FUNCTION nl2sql.evaluate(int, text, text), nl2sql._evaluate(int, text, text)
    FROM PUBLIC;
REVOKE ALL ON nl2sql.evaluation_run, nl2sql.evaluation_result, nl2sql.evaluation_trend
    FROM PUBLIC;
