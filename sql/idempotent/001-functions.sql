-- Re-runnable function definitions (CREATE OR REPLACE). Each PL/Python body calls one Python
-- entry point in nl2sql.udf; nl2sql._boot() puts the venv named by the setting nl2sql.venv
-- (default /opt/nl2sql/venv) on sys.path once per backend.
--
-- Every function pins its search_path (SET search_path FROM CURRENT, i.e. the extension's schema,
-- the schemas of the extensions it requires, then pg_temp explicitly last, so that no temporary
-- object of the caller shadows one of ours). All are SECURITY INVOKER unless marked otherwise.
SELECT pg_catalog.set_config('search_path',
                             pg_catalog.current_setting('search_path') || ', pg_temp', true);

CREATE OR REPLACE FUNCTION nl2sql._boot() RETURNS text
LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
import sys, site, os
if GD.get("nl2sql_boot"):
    return GD["nl2sql_boot"]
venv = plpy.execute("SELECT current_setting('nl2sql.venv', true) AS v")[0]["v"] or "/opt/nl2sql/venv"
sp = os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
if not os.path.isdir(sp):
    plpy.error("nl2sql: Python environment %s not found (setting nl2sql.venv)" % sp,
               hint="run scripts/install.sh, or ALTER SYSTEM SET nl2sql.venv = '/path/to/venv' and reload")
if sp not in sys.path:
    site.addsitedir(sp)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
try:
    from nl2sql import version
except ImportError:
    plpy.error("nl2sql: the Python package in %s is older than this database's extension" % sp,
               hint="install the Python package of the installed extension's version into it")
installed = plpy.execute(
    "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'nl2sql'")[0]["extversion"]
problem = version.mismatch(installed)
if problem:
    plpy.error(problem[0], hint=problem[1])
GD["nl2sql_boot"] = sp
return sp
$py$;

-- Runs one candidate read-only: SET LOCAL transaction_read_only inside PL/pgSQL sticks for the
-- EXECUTE that follows (it would not through plpy). Rows come back as row_to_json text, at most
-- max_rows + 1 of them (one more than the cap flags truncation). The caller always rolls back.
-- Bytes are bounded as well as rows: the rows are fetched one at a time from a cursor (a FOR
-- loop would prefetch ten) with a running sum of their octet_length; once the sum passes
-- max_bytes one NULL row (row_to_json never yields NULL) is returned last and the query is
-- abandoned, so a wide result is never materialised whole (setting max_result_bytes).
CREATE OR REPLACE FUNCTION nl2sql._run_candidate(candidate text, caller_search_path text,
                                                 max_rows int, max_bytes bigint)
RETURNS SETOF text LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    cur refcursor;
    r text;
    total bigint := 0;
BEGIN
    SET LOCAL transaction_read_only = on;
    PERFORM pg_catalog.set_config('search_path', caller_search_path, true);
    OPEN cur NO SCROLL FOR EXECUTE
        'SELECT pg_catalog.row_to_json(nl2sql_c)::text FROM (' || candidate || ') AS nl2sql_c LIMIT '
        || (max_rows OPERATOR(pg_catalog.+) 1);
    LOOP
        FETCH cur INTO r;
        EXIT WHEN NOT FOUND;
        total := total OPERATOR(pg_catalog.+) pg_catalog.octet_length(r);
        IF total OPERATOR(pg_catalog.>) max_bytes THEN
            r := NULL;
            CLOSE cur;
            RETURN NEXT NULL::text;
            RETURN;
        END IF;
        RETURN NEXT r;
    END LOOP;
    CLOSE cur;
END
$$;

-- Releases a session-level advisory lock a candidate left behind (generation/_session_state.py): the key as
-- pg_locks lists it (classid, objid, objsubid 1: one bigint key split in two halves; 2: two int
-- keys), unlocked as often as it is held, at most max_n times. The last unlock, which finds the
-- lock no longer held, warns; client_min_messages keeps that warning from the caller.
-- Returns how many holds were released.
CREATE OR REPLACE FUNCTION nl2sql._advisory_release(classid oid, objid oid, objsubid int,
                                                    shared boolean, max_n int)
RETURNS int LANGUAGE plpgsql SET search_path FROM CURRENT SET client_min_messages = error AS $$
DECLARE
    n int := 0;
    k1 int := (classid::int8 - CASE WHEN classid::int8 > 2147483647 THEN 4294967296 ELSE 0 END)::int4;
    k2 int := (objid::int8 - CASE WHEN objid::int8 > 2147483647 THEN 4294967296 ELSE 0 END)::int4;
    k bigint := (classid::int8 << 32) | objid::int8;
BEGIN
    WHILE n < max_n LOOP
        IF objsubid = 1 THEN
            EXIT WHEN NOT (CASE WHEN shared THEN pg_catalog.pg_advisory_unlock_shared(k)
                                ELSE pg_catalog.pg_advisory_unlock(k) END);
        ELSE
            EXIT WHEN NOT (CASE WHEN shared THEN pg_catalog.pg_advisory_unlock_shared(k1, k2)
                                ELSE pg_catalog.pg_advisory_unlock(k1, k2) END);
        END IF;
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;

-- plan_cache_mode: the pipeline keeps its SPI plans per backend; after 5 runs PostgreSQL would
-- switch a plan to a generic one, which for the privilege-filtered views is 6-10x slower
-- (example search: 1.5 ms custom vs 10-14 ms generic, measured on superhero).
CREATE OR REPLACE FUNCTION nl2sql._nl2sql(question text, caller_search_path text, evidence text,
                                          conversation text)
RETURNS text LANGUAGE plpython3u SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.nl2sql(plpy, question, caller_search_path, evidence, conversation)
$py$;

CREATE OR REPLACE FUNCTION nl2sql._explain(question text, caller_search_path text, evidence text,
                                           conversation text)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.explain(plpy, question, caller_search_path, evidence, conversation)
$py$;

CREATE OR REPLACE FUNCTION nl2sql._ask(question text, caller_search_path text, evidence text,
                                       conversation text)
RETURNS SETOF jsonb LANGUAGE plpython3u SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.ask(plpy, question, caller_search_path, evidence, conversation)
$py$;

-- nl2sql(question) → the chosen SQL. In schema public so that it works with the default
-- search_path. The caller's search_path reaches the pipeline as the default of the parameter
-- search_path: a parameter default is evaluated in the caller's context, before the function's
-- own pinned search_path takes effect (SECURITY INVOKER, SET search_path FROM CURRENT).
CREATE OR REPLACE FUNCTION public.nl2sql(question text, evidence text DEFAULT NULL,
                                         search_path text DEFAULT pg_catalog.current_setting('search_path'),
                                         conversation text DEFAULT NULL)
RETURNS text LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT
AS $$ SELECT nl2sql._nl2sql(question, search_path, evidence, conversation) $$;
COMMENT ON FUNCTION public.nl2sql(text, text, text, text) IS
    'nl2sql: answer a natural-language question with one SQL query (text); see nl2sql.explain for the trace';

CREATE OR REPLACE FUNCTION nl2sql.explain(question text, evidence text DEFAULT NULL,
                                          search_path text DEFAULT pg_catalog.current_setting('search_path'),
                                          conversation text DEFAULT NULL)
RETURNS jsonb LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT
AS $$ SELECT nl2sql._explain(question, search_path, evidence, conversation) $$;
COMMENT ON FUNCTION nl2sql.explain(text, text, text, text) IS
    'nl2sql: the whole trace of answering a question (examples, prompts, candidates, votes, timings, tokens)';

CREATE OR REPLACE FUNCTION nl2sql.ask(question text, evidence text DEFAULT NULL,
                                      search_path text DEFAULT pg_catalog.current_setting('search_path'),
                                      conversation text DEFAULT NULL)
RETURNS SETOF jsonb LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT
AS $$ SELECT nl2sql._ask(question, search_path, evidence, conversation) $$;
COMMENT ON FUNCTION nl2sql.ask(text, text, text, text) IS
    'nl2sql: the rows of the chosen SQL, one jsonb object per row';

-- Answers in words: the chosen SQL's first rows, written up by a model (value policy applies).
CREATE OR REPLACE FUNCTION nl2sql._narrate(question text, caller_search_path text, evidence text,
                                           conversation text)
RETURNS text LANGUAGE plpython3u SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.narrate(plpy, question, caller_search_path, evidence, conversation)
$py$;

CREATE OR REPLACE FUNCTION nl2sql.narrate(question text, evidence text DEFAULT NULL,
                                          search_path text DEFAULT pg_catalog.current_setting('search_path'),
                                          conversation text DEFAULT NULL)
RETURNS text LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT
AS $$ SELECT nl2sql._narrate(question, search_path, evidence, conversation) $$;
COMMENT ON FUNCTION nl2sql.narrate(text, text, text, text) IS
    'nl2sql: a short answer in words, written by a model from the chosen SQL''s first rows';

-- A chart of the answer: a Vega-Lite v5 spec with the chosen SQL's rows inline (capped).
CREATE OR REPLACE FUNCTION nl2sql._chart(question text, caller_search_path text, evidence text,
                                         conversation text)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.chart(plpy, question, caller_search_path, evidence, conversation)
$py$;

CREATE OR REPLACE FUNCTION nl2sql.chart(question text, evidence text DEFAULT NULL,
                                        search_path text DEFAULT pg_catalog.current_setting('search_path'),
                                        conversation text DEFAULT NULL)
RETURNS jsonb LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT
AS $$ SELECT nl2sql._chart(question, search_path, evidence, conversation) $$;
COMMENT ON FUNCTION nl2sql.chart(text, text, text, text) IS
    'nl2sql: a Vega-Lite v5 chart of the chosen SQL''s rows (chart chosen by rule), as jsonb';


CREATE OR REPLACE FUNCTION nl2sql.reindex(schemas text[] DEFAULT NULL, force boolean DEFAULT false)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.reindex(plpy, schemas, force)
$py$;
COMMENT ON FUNCTION nl2sql.reindex(text[], boolean) IS
    'nl2sql: index catalog, sample values, cell values and the example pool (incremental unless force)';

-- Units of reindex() for the nl2sql-index CLI (progress bar).
CREATE OR REPLACE FUNCTION nl2sql._reindex_plan(schemas text[] DEFAULT NULL)
RETURNS TABLE (schema_name text, table_name text) LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.reindex_plan(plpy, schemas)
$py$;

CREATE OR REPLACE FUNCTION nl2sql._reindex_table(schema_name text, table_name text, force boolean DEFAULT false)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.reindex_table(plpy, schema_name, table_name, force)
$py$;

CREATE OR REPLACE FUNCTION nl2sql._reindex_finish(schemas text[], kept text[],
                                                   tables_changed boolean DEFAULT true)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.reindex_finish(plpy, schemas, kept, tables_changed)
$py$;

-- An OpenAI-compatible /v1/embeddings endpoint (docs/embedding-models.md; timeout_s: one request's
-- deadline, retries included); chosen with
-- SELECT nl2sql.set_setting('embedding_model', name) and SELECT nl2sql.reindex(force => true).
CREATE OR REPLACE FUNCTION nl2sql.add_embedding_model(
    name text, base_url text, model text, dimensions int, api_key_env text DEFAULT NULL,
    batch_size int DEFAULT 64, concurrency int DEFAULT 1, timeout_s float8 DEFAULT 30,
    send_dimensions boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF name IS NULL OR btrim(name) = '' OR name = 'local' OR base_url IS NULL OR model IS NULL
       OR dimensions IS NULL THEN
        RAISE EXCEPTION 'nl2sql.add_embedding_model: name (not ''local''), base_url, model and dimensions are required'
            USING HINT = 'e.g. SELECT nl2sql.add_embedding_model(''gpu'', ''http://gpu-box:8080/v1'', ''nomic-embed-text'', 768)';
    END IF;
    IF add_embedding_model.dimensions NOT BETWEEN 1 AND 4000 THEN
        RAISE EXCEPTION 'nl2sql.add_embedding_model: dimensions must be 1 to 4000 (pgvector''s HNSW limit for halfvec), got %', add_embedding_model.dimensions
            USING HINT = 'the length of the vectors the model returns, e.g. 768';
    END IF;
    IF api_key_env IS NOT NULL AND api_key_env !~ '^[A-Za-z_][A-Za-z0-9_]*$' THEN
        RAISE EXCEPTION 'nl2sql.add_embedding_model: api_key_env must be the NAME of a server environment variable, not a key'
            USING HINT = 'put the key in the PostgreSQL server''s environment and pass its name, e.g. OPENAI_API_KEY';
    END IF;
    IF add_embedding_model.base_url ~ '^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@' OR add_embedding_model.base_url !~ '^https?://' THEN
        RAISE EXCEPTION 'nl2sql.add_embedding_model: base_url must be an http(s) URL without credentials (user:password@host): every role can read nl2sql.embedding_model'
            USING HINT = 'e.g. http://gpu-box:8080/v1; the key goes in the server''s environment, named by api_key_env';
    END IF;
    IF add_embedding_model.batch_size NOT BETWEEN 1 AND 2048 OR add_embedding_model.concurrency NOT BETWEEN 1 AND 16
       OR add_embedding_model.timeout_s <= 0 THEN
        RAISE EXCEPTION 'nl2sql.add_embedding_model: batch_size is 1 to 2048 texts, concurrency 1 to 16 requests, timeout_s > 0 seconds'
            USING HINT = 'e.g. batch_size => 64, concurrency => 2, timeout_s => 30';
    END IF;
    INSERT INTO nl2sql.embedding_model AS m (name, base_url, model, dimensions, api_key_env,
                                             batch_size, concurrency, timeout_s, send_dimensions)
    VALUES (add_embedding_model.name, add_embedding_model.base_url, add_embedding_model.model,
            add_embedding_model.dimensions, add_embedding_model.api_key_env,
            add_embedding_model.batch_size, add_embedding_model.concurrency,
            add_embedding_model.timeout_s, add_embedding_model.send_dimensions)
    ON CONFLICT ON CONSTRAINT embedding_model_pkey DO UPDATE SET
        base_url = EXCLUDED.base_url, model = EXCLUDED.model, dimensions = EXCLUDED.dimensions,
        api_key_env = EXCLUDED.api_key_env, batch_size = EXCLUDED.batch_size,
        concurrency = EXCLUDED.concurrency, timeout_s = EXCLUDED.timeout_s,
        send_dimensions = EXCLUDED.send_dimensions;
END
$$;

CREATE OR REPLACE FUNCTION nl2sql.add_model(
    name text, model text, base_url text DEFAULT NULL, api_key_env text DEFAULT NULL,
    temperature float8 DEFAULT 0, timeout_s float8 DEFAULT NULL, max_tokens int DEFAULT NULL,
    priority int DEFAULT NULL, dialect text DEFAULT 'postgres',
    price_in_per_mtok numeric DEFAULT NULL, price_out_per_mtok numeric DEFAULT NULL,
    max_completion_tokens int DEFAULT NULL, reasoning_effort text DEFAULT NULL,
    send_temperature boolean DEFAULT NULL, send_n boolean DEFAULT NULL,
    context_window int DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF name IS NULL OR btrim(name) = '' OR model IS NULL OR btrim(model) = '' THEN
        RAISE EXCEPTION 'nl2sql.add_model: name and model are required'
            USING HINT = 'e.g. SELECT nl2sql.add_model(''gpt'', ''gpt-4o'', base_url => ''https://.../v1'', api_key_env => ''OPENAI_API_KEY'')';
    END IF;
    IF api_key_env IS NOT NULL AND api_key_env !~ '^[A-Za-z_][A-Za-z0-9_]*$' THEN
        RAISE EXCEPTION 'nl2sql.add_model: api_key_env must be the NAME of a server environment variable, not a key'
            USING HINT = 'put the key in the PostgreSQL server''s environment and pass its name, e.g. OPENAI_API_KEY';
    END IF;
    IF add_model.dialect IS NULL OR add_model.dialect NOT IN ('postgres', 'sqlite', 'mysql') THEN
        RAISE EXCEPTION 'nl2sql.add_model: dialect must be postgres, sqlite or mysql, got %', add_model.dialect
            USING HINT = 'the SQL dialect the model writes; its answers are transpiled to PostgreSQL';
    END IF;
    IF add_model.price_in_per_mtok < 0 OR add_model.price_out_per_mtok < 0 THEN
        RAISE EXCEPTION 'nl2sql.add_model: prices must be >= 0 (US dollars per million tokens) or null'
            USING HINT = 'e.g. price_in_per_mtok => 2.50, price_out_per_mtok => 10';
    END IF;
    IF add_model.base_url ~ '^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@' THEN
        RAISE EXCEPTION 'nl2sql.add_model: base_url must not carry credentials (user:password@host): every role can read nl2sql.model'
            USING HINT = 'put the key in the PostgreSQL server''s environment and pass its name with api_key_env; the URL without user:password@';
    END IF;
    IF add_model.max_tokens IS NOT NULL AND add_model.max_completion_tokens IS NOT NULL THEN
        RAISE EXCEPTION 'nl2sql.add_model: give max_tokens or max_completion_tokens, not both'
            USING HINT = 'max_tokens: the output cap, sent under the parameter name the endpoint takes; max_completion_tokens: the cap, always sent under that name';
    END IF;
    IF add_model.max_tokens <= 0 OR add_model.max_completion_tokens <= 0 OR add_model.context_window <= 0 THEN
        RAISE EXCEPTION 'nl2sql.add_model: max_tokens, max_completion_tokens and context_window are token counts > 0, or null to decide'
            USING HINT = 'e.g. max_completion_tokens => 8192 for a reasoning model';
    END IF;
    IF add_model.reasoning_effort IS NOT NULL AND add_model.reasoning_effort !~ '^[a-z]{0,16}$' THEN
        RAISE EXCEPTION 'nl2sql.add_model: reasoning_effort must be a level the endpoint takes (none, minimal, low, medium, high), an empty string to never send it, or null to decide; got %', add_model.reasoning_effort
            USING HINT = 'e.g. reasoning_effort => ''low''';
    END IF;
    INSERT INTO nl2sql.model AS m (name, model, base_url, api_key_env, temperature, timeout_s, max_tokens, position, dialect,
                                   price_in_per_mtok, price_out_per_mtok, cap_parameter, reasoning_effort,
                                   send_temperature, send_n, context_window)
    VALUES (add_model.name, add_model.model, add_model.base_url, add_model.api_key_env,
            add_model.temperature, add_model.timeout_s,
            COALESCE(add_model.max_tokens, add_model.max_completion_tokens),
            COALESCE(add_model.priority, (SELECT COALESCE(max(x.position) + 1, 0) FROM nl2sql.model x)),
            add_model.dialect, add_model.price_in_per_mtok, add_model.price_out_per_mtok,
            CASE WHEN add_model.max_completion_tokens IS NOT NULL THEN 'max_completion_tokens' END,
            add_model.reasoning_effort, add_model.send_temperature, add_model.send_n,
            add_model.context_window)
    ON CONFLICT ON CONSTRAINT model_pkey DO UPDATE SET
        model = EXCLUDED.model, base_url = EXCLUDED.base_url, api_key_env = EXCLUDED.api_key_env,
        temperature = EXCLUDED.temperature, timeout_s = EXCLUDED.timeout_s,
        max_tokens = EXCLUDED.max_tokens, position = COALESCE(add_model.priority, m.position),
        enabled = true, dialect = EXCLUDED.dialect,
        price_in_per_mtok = EXCLUDED.price_in_per_mtok, price_out_per_mtok = EXCLUDED.price_out_per_mtok,
        cap_parameter = EXCLUDED.cap_parameter, reasoning_effort = EXCLUDED.reasoning_effort,
        send_temperature = EXCLUDED.send_temperature, send_n = EXCLUDED.send_n,
        context_window = EXCLUDED.context_window;
END
$$;
COMMENT ON FUNCTION nl2sql.add_model(text, text, text, text, float8, float8, int, int, text, numeric, numeric, int, text, boolean, boolean, int) IS
    'nl2sql: add or update an OpenAI-compatible model; the lowest priority (position) writes the PreSQL; null request arguments are decided per model (docs/models.md)';

CREATE OR REPLACE FUNCTION nl2sql.remove_model(name text) RETURNS boolean
LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH d AS (DELETE FROM nl2sql.model m WHERE m.name = remove_model.name RETURNING 1)
    SELECT count(*) > 0 FROM d
$$;
COMMENT ON FUNCTION nl2sql.remove_model(text) IS 'nl2sql: remove a configured model';

CREATE OR REPLACE FUNCTION nl2sql.set_setting(key text, value text) RETURNS text
LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.set_setting(plpy, key, value)
$py$;
COMMENT ON FUNCTION nl2sql.set_setting(text, text) IS 'nl2sql: validate and store one setting';

CREATE OR REPLACE FUNCTION nl2sql.add_example(question text, sql text, db_id text DEFAULT NULL,
                                              dialect text DEFAULT 'postgres')
RETURNS bigint LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.add_example(plpy, question, sql, db_id, dialect)
$py$;
COMMENT ON FUNCTION nl2sql.add_example(text, text, text, text) IS
    'nl2sql: add a question/SQL pair to the example pool (db_id null = this database, checked against the catalog)';

CREATE OR REPLACE FUNCTION nl2sql.load_examples(data text, dialect text DEFAULT 'sqlite', tables text DEFAULT NULL)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.load_examples(plpy, data, dialect, tables)
$py$;
COMMENT ON FUNCTION nl2sql.load_examples(text, text, text) IS
    'nl2sql: bulk-load Spider/BIRD-format pairs (JSON array or lines), transpiled to PostgreSQL; reports failures';

CREATE OR REPLACE FUNCTION nl2sql.feedback(log_id bigint, correct boolean, sql text DEFAULT NULL,
                                           verify boolean DEFAULT true)
RETURNS bigint LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.feedback(plpy, log_id, correct, sql, verify)
$py$;
COMMENT ON FUNCTION nl2sql.feedback(bigint, boolean, text, boolean) IS
    'nl2sql: turn a judged answer (query_log id) into an example and (verify) a verified query';

CREATE OR REPLACE FUNCTION nl2sql.calibrate(judged jsonb DEFAULT NULL)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.calibrate(plpy, judged)
$py$;
COMMENT ON FUNCTION nl2sql.calibrate(jsonb) IS
    'nl2sql: learn per-model reliability (vote weights, voter sets per PreSQL hardness) from judged answers (feedback, verified examples) and the judged questions given';

CREATE OR REPLACE VIEW nl2sql.example_pool AS
    SELECT source, db_id, count(*) AS examples, count(embedding) AS embedded
    FROM nl2sql.example GROUP BY source, db_id ORDER BY source, db_id;

-- Retrieval without a model: what nl2sql() would retrieve and send for a question.
CREATE OR REPLACE FUNCTION nl2sql._retrieve(question text, caller_search_path text, evidence text, presql text)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT
SET plan_cache_mode = force_custom_plan AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.retrieve(plpy, question, caller_search_path, evidence, presql)
$py$;

CREATE OR REPLACE FUNCTION nl2sql.retrieve(question text, evidence text DEFAULT NULL, presql text DEFAULT NULL,
                                           search_path text DEFAULT pg_catalog.current_setting('search_path'))
RETURNS jsonb LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT
AS $$ SELECT nl2sql._retrieve(question, search_path, evidence, presql) $$;
COMMENT ON FUNCTION nl2sql.retrieve(text, text, text, text) IS
    'nl2sql: retrieval only, no model call: masked question, matched cell values, examples, the PreSQL prompt (pruned to the token budget) and, given a PreSQL, schema linking, DAIL selection and the FinSQL prompt';
