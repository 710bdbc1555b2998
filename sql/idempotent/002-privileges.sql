-- Privileges: ordinary roles may call nl2sql(), nl2sql.explain() and nl2sql.ask();
-- they never read the index tables directly, only through the security_barrier views below,
-- which show exactly the tables, columns, values and examples the *calling* role may SELECT.
--
-- How it works: a view is owned by the extension owner, so its base tables (the index) are read
-- with the owner's rights, while current_user inside the view is still the querying role; the
-- WHERE clauses call has_table_privilege / has_column_privilege for that role. security_barrier
-- keeps a caller's own functions in a query from seeing rows before that filter.

GRANT USAGE ON SCHEMA nl2sql TO PUBLIC;
REVOKE ALL ON nl2sql.schema_table, nl2sql.schema_column, nl2sql.schema_fk, nl2sql.cell_value,
              nl2sql.example, nl2sql.example_relation, nl2sql.query_log, nl2sql.value_policy,
              nl2sql.example_pool
    FROM PUBLIC;
-- configuration is not secret (API keys are never stored: api_key_env names a server variable)
GRANT SELECT ON nl2sql.setting, nl2sql.model, nl2sql.embedding_model TO PUBLIC;

-- Tables the caller may SELECT (any column is enough; columns are filtered below).
CREATE OR REPLACE VIEW nl2sql.visible_table WITH (security_barrier) AS
    SELECT t.schema_name, t.table_name, t.comment, t.n_rows, t.indexed_at
    FROM nl2sql.schema_table t
    JOIN pg_catalog.pg_namespace n ON n.nspname = t.schema_name
    JOIN pg_catalog.pg_class r ON r.relnamespace = n.oid AND r.relname = t.table_name
    WHERE pg_catalog.has_any_column_privilege(r.oid, 'SELECT');

-- The role a SECURITY DEFINER helper acts for: the given role when the session may act as it
-- (SET ROLE), else session_user: never a role the session is not (e.g. when called from inside
-- some other SECURITY DEFINER function, current_user is that function's owner).
-- This and the other per-column helpers below are PL/pgSQL with a generic plan, kept per
-- backend: an SQL-language function with a SET clause is planned anew at every call, and
-- _nl2sql's force_custom_plan would replan a PL/pgSQL statement at every call too (planning
-- them was 4 ms of a question's 12 ms of planning on the superhero replay, docs/benchmarks.md
-- "Planning per question, and a model call's own cost"). Their statements look rows up by key, so the generic plan is the custom one.
CREATE OR REPLACE FUNCTION nl2sql._acting_role(who name) RETURNS name
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN CASE WHEN who IS NULL
                     OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = who)
                THEN session_user
                ELSE CASE WHEN pg_catalog.pg_has_role(session_user, who, 'USAGE') THEN who
                          ELSE session_user END END;
END
$$;

-- The value-policy rule, in one place: a column's cell values may reach a model when the setting
-- send_values is on and the column's value_policy, else its table's (column_name ''), allows it;
-- without a policy, unless the table has row-level security.
CREATE OR REPLACE FUNCTION nl2sql._value_rule(send_values_on boolean, column_policy boolean,
                                              table_policy boolean, row_security boolean)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- a simple expression: PL/pgSQL keeps its plan (an SQL function with a SET clause is
    -- planned at every call, once per column checked)
    RETURN COALESCE(send_values_on, true) AND COALESCE(column_policy, table_policy, NOT row_security);
END
$$;

-- nl2sql._value_rule for one column, reading the setting and the (non-public) policy table.
-- SECURITY DEFINER: it says only yes or no for the one column asked about.
CREATE OR REPLACE FUNCTION nl2sql._values_allowed(schema_name name, table_name name,
                                                  column_name name, row_security boolean)
RETURNS boolean LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN nl2sql._value_rule(
        (SELECT s.value <> 'off' FROM nl2sql.setting s WHERE s.key = 'send_values'),
        (SELECT p.send_values FROM nl2sql.value_policy p WHERE p.schema_name = $1
            AND p.table_name = $2 AND p.column_name = $3),
        (SELECT p.send_values FROM nl2sql.value_policy p WHERE p.schema_name = $1
            AND p.table_name = $2 AND p.column_name = ''),
        $4);
END
$$;

-- Columns the caller may SELECT. values_allowed: nl2sql._value_rule (setting send_values and
-- value_policy), joined set-wise here (a per-row call of nl2sql._values_allowed cost ~40 us per
-- column: 200 ms on 5,000 columns). sample_values are empty where values are not allowed.
-- values_complete: false when the column's value index is partial (more distinct values than
-- values_per_column, or sampled), NULL when it has no indexed values.
CREATE OR REPLACE VIEW nl2sql.visible_column WITH (security_barrier) AS
    SELECT c.schema_name, c.table_name, c.column_name, c.ordinal, c.data_type, c.is_primary_key,
           c.comment,
           CASE WHEN va.allowed THEN c.sample_values ELSE '{}'::text[] END AS sample_values,
           c.embedding, va.allowed AS values_allowed, c.values_indexed, c.values_complete
    FROM nl2sql.schema_column c
    JOIN pg_catalog.pg_namespace n ON n.nspname = c.schema_name
    JOIN pg_catalog.pg_class r ON r.relnamespace = n.oid AND r.relname = c.table_name
    JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attname = c.column_name
                                  AND NOT a.attisdropped
    LEFT JOIN nl2sql.value_policy pc ON pc.schema_name = c.schema_name
          AND pc.table_name = c.table_name AND pc.column_name = c.column_name
    LEFT JOIN nl2sql.value_policy pt ON pt.schema_name = c.schema_name
          AND pt.table_name = c.table_name AND pt.column_name = ''
    CROSS JOIN LATERAL (SELECT nl2sql._value_rule(
        (SELECT s.value <> 'off' FROM nl2sql.setting s WHERE s.key = 'send_values'),
        pc.send_values, pt.send_values, r.relrowsecurity) AS allowed) va
    WHERE pg_catalog.has_column_privilege(r.oid, a.attnum, 'SELECT');

-- Schema linking's column similarities (linking/pruning.py column_similarities): the cosine
-- similarity of the question's embedding q with every column of visible_column that has one,
-- best first. PL/pgSQL with a generic plan kept per backend: the query has no parameter but q,
-- so the generic plan is the custom one, and planning the view at every question cost more
-- than running it (1.4 ms a question on the superhero replay, docs/benchmarks.md
-- "Planning per question, and a model call's own cost").
CREATE OR REPLACE FUNCTION nl2sql._column_similarities(q vector)
RETURNS TABLE (schema_name name, table_name name, column_name name, sim float8)
LANGUAGE plpgsql STABLE SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT c.schema_name, c.table_name, c.column_name, (1 - (c.embedding <=> q))::float8
      FROM nl2sql.visible_column c
     WHERE c.embedding IS NOT NULL
     ORDER BY 4 DESC;
END
$$;

-- Foreign keys whose both sides the caller may read (every column named on both sides).
CREATE OR REPLACE VIEW nl2sql.visible_fk WITH (security_barrier) AS
    SELECT f.schema_name, f.table_name, f.constraint_name, f.columns, f.ref_schema, f.ref_table,
           f.ref_columns
    FROM nl2sql.schema_fk f
    WHERE NOT EXISTS (
        SELECT 1 FROM (SELECT f.schema_name AS s, f.table_name AS t, unnest(f.columns) AS c
                       UNION ALL
                       SELECT f.ref_schema, f.ref_table, unnest(f.ref_columns)) x
        LEFT JOIN nl2sql.visible_column vc
               ON vc.schema_name = x.s AND vc.table_name = x.t AND vc.column_name = x.c
        WHERE vc.column_name IS NULL);

-- Cell values of columns the caller may read and whose values may go to a model.
CREATE OR REPLACE VIEW nl2sql.visible_cell_value WITH (security_barrier) AS
    SELECT v.id, v.schema_name, v.table_name, v.column_name, v.value, v.embedding
    FROM nl2sql.cell_value v
    JOIN nl2sql.visible_column vc
      ON vc.schema_name = v.schema_name AND vc.table_name = v.table_name
     AND vc.column_name = v.column_name
    WHERE vc.values_allowed;

-- Whether role `grantee` may SELECT column sch.tbl.col and nl2sql._values_allowed lets its values
-- reach a model: what nl2sql.visible_cell_value shows of that column. The catalog rows are
-- found by their unique indexes (~40 us a column). Called by the SECURITY DEFINER lookups with
-- the role they checked (nl2sql._acting_role).
CREATE OR REPLACE FUNCTION nl2sql._column_values_visible(grantee name, sch name, tbl name,
                                                         col name)
RETURNS boolean LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN COALESCE((
        SELECT pg_catalog.has_column_privilege(grantee, r.oid, a.attnum, 'SELECT')
               AND nl2sql._values_allowed(sch, tbl, col, r.relrowsecurity)
          FROM pg_catalog.pg_namespace n
          JOIN pg_catalog.pg_class r ON r.relnamespace = n.oid AND r.relname = tbl
          JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attname = col
                                        AND NOT a.attisdropped
         WHERE n.nspname = sch), false);
END
$$;
REVOKE ALL ON FUNCTION nl2sql._column_values_visible(name, name, name, name) FROM PUBLIC;

-- Value retrieval (OpenSearch-SQL §3.4) with the value index's own indexes. Through the
-- security_barrier view visible_cell_value, pg_trgm's % and pgvector's <=> (not leakproof) cannot
-- use the gin / hnsw indexes, so every visible value was compared with every phrase (~100 ms for
-- 1,500 values x 15 phrases). This SECURITY DEFINER function reads nl2sql.cell_value directly,
-- then keeps only the values of columns role `who` (checked by nl2sql._acting_role) may SELECT
-- and whose values nl2sql._values_allowed lets reach a model: what visible_cell_value shows that
-- role (nl2sql._column_values_visible), never per indexed column. Per phrase i (1-based):
-- 'exact' — lower(value) = lower(phrases[i]) (btree on (lower(value), id)), the first 100
-- rows in id order the role may see; 'trigram' — the per_phrase values with the best
-- similarity(value, fuzzy[i]) >= trgm_min (gin over the distinct strings of
-- nl2sql.cell_value_text, whose narrow rows make the recheck of the index's candidates cheap; a
-- phrase that only strings of at most 20 trigrams can match, e.g. one word, searches the partial
-- gin index of those); of the cell_value rows of each matching string (ignoring case), read in
-- id order, the first per_phrase the role may see (a string held by more visible columns than
-- that is matched in those first ones); 'vector' — of the 4 x per_phrase nearest values to vecs[i] (hnsw) the
-- per_phrase best visible ones with cosine >= vector_min. NULL elements / arrays are skipped.
-- On a small index the planner prefers a full scan with the (costly) similarity filter; the
-- function's SET clauses steer it to the indexes (and keep JIT, which the disabled scans' cost
-- estimates would trigger, off: it cost 0.9 s per call). With full scans disabled, the generic
-- plan uses the same indexes as a custom one, so the query is planned once per backend
-- (plan_cache_mode = force_generic_plan): planning it per call cost 1-4 ms, more than running it.
CREATE OR REPLACE FUNCTION nl2sql._match_values(who name, phrases text[], fuzzy text[],
                                                vecs vector[], trgm_min float8,
                                                vector_min float8, per_phrase int)
RETURNS TABLE (how text, i int, schema_name name, table_name name, column_name name,
               value text, score float8)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT
SET pg_trgm.similarity_threshold = 0.3 SET enable_seqscan = off SET enable_indexonlyscan = off
SET jit = off SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    role name := nl2sql._acting_role(who);
    -- exact matches kept per phrase: a value that 1,000 columns hold cost 68 ms read in full;
    -- retrieval keeps at most value_top_k (10) matches in all
    exact_cap int := 100;
BEGIN
    PERFORM pg_catalog.set_config('pg_trgm.similarity_threshold',
                                  LEAST(GREATEST(COALESCE(trgm_min, 1), 0), 1)::text, true);
    -- COLLATE "default": a PL/pgSQL variable carries the call's input collation (here "C", from
    -- `who name`), and a comparison in another collation than the indexes' cannot use them
    RETURN QUERY
    WITH ph0 AS (SELECT p.x COLLATE pg_catalog."default" AS x,
                        p.t COLLATE pg_catalog."default" AS t, p.n::int AS n,
                        COALESCE(pg_catalog.array_length(show_trgm(p.t), 1), 0) AS nt
                   FROM unnest(phrases, fuzzy) WITH ORDINALITY AS p(x, t, n)),
    -- lo .. hi: the trigram counts a string needs to reach similarity trgm_min with phrase t
    ph AS MATERIALIZED (SELECT p.x, p.t, p.n, CASE WHEN trgm_min > 0 THEN
                                   pg_catalog.ceil(p.nt * trgm_min - 1e-9)::int ELSE 0 END AS lo,
                               CASE WHEN trgm_min > 0 THEN
                                   pg_catalog.floor(p.nt / trgm_min + 1e-9)::int END AS hi,
                               pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(
                                   'pg_catalog.english'::regconfig, p.t)) AS w
                        FROM ph0 p),
    -- words first (sql/incremental/026-lookup-words.sql): the strings sharing a word (English
    -- stems, no stop words) with the phrase, by the word index, scored by trigram similarity
    wrd AS MATERIALIZED (
        SELECT p.n, d.value, similarity(d.value, p.t)::float8 AS s
          FROM ph p JOIN nl2sql.cell_value_text d
            ON pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(
                   'pg_catalog.english'::regconfig, d.value)) OPERATOR(pg_catalog.&&) p.w
         WHERE p.t IS NOT NULL AND similarity(d.value, p.t) >= trgm_min),
    -- the trigram indexes only for a phrase the words did not resolve that has no word or a
    -- word no string has (a misspelling, part of a word): a phrase of known words that matched
    -- nothing by them is not looked up by trigrams (14 ms a phrase at 1,000,000 strings)
    fz AS MATERIALIZED (
        SELECT p.* FROM ph p
         WHERE p.t IS NOT NULL AND NOT EXISTS (SELECT 1 FROM wrd x WHERE x.n = p.n)
           AND (COALESCE(pg_catalog.cardinality(p.w), 0) = 0 OR EXISTS (
                SELECT 1 FROM unnest(p.w) AS u(word) WHERE NOT EXISTS (
                    SELECT 1 FROM nl2sql.cell_value_text d
                     WHERE pg_catalog.tsvector_to_array(pg_catalog.to_tsvector(
                               'pg_catalog.english'::regconfig, d.value))
                           OPERATOR(pg_catalog.@>) ARRAY[u.word])))),
    -- halfvec: the type of cell_value.embedding (sql/incremental/023-value-halfvec.sql), so
    -- that its hnsw index (halfvec_cosine_ops) serves the nearest-value search; no typmod: the
    -- column follows the embedding model's dimensions (sql/incremental/024-embedding-model.sql)
    ev AS MATERIALIZED (SELECT e.q::halfvec AS q, e.n::int AS n
                          FROM unnest(vecs) WITH ORDINALITY AS e(q, n) WHERE e.q IS NOT NULL),
    -- a phrase whose strings have at most 20 trigrams reads the partial index of those
    -- (sql/incremental/014-lookup-knn.sql); the others the whole one
    trg AS MATERIALIZED (
        SELECT p.n, d.value, similarity(d.value, p.t)::float8 AS s
          FROM fz p JOIN nl2sql.cell_value_text d ON d.value % p.t
         WHERE NOT COALESCE(p.hi <= 20, false) AND similarity(d.value, p.t) >= trgm_min
        UNION ALL
        SELECT p.n, d.value, similarity(d.value, p.t)::float8
          FROM fz p JOIN nl2sql.cell_value_text d ON d.value % p.t AND d.n_trgm <= 20
                                                  AND d.n_trgm BETWEEN p.lo AND p.hi
         WHERE p.hi <= 20 AND similarity(d.value, p.t) >= trgm_min
        UNION ALL
        SELECT w.n, w.value, w.s FROM wrd w),
    -- the matching strings' cell_value rows in id order (btree on (lower(value), id)), the first
    -- per_phrase the role may see: a string that many columns hold is not read in full. pg_trgm
    -- compares lower-cased trigrams, so strings that differ only in case score the same and are
    -- read together
    tcand AS MATERIALIZED (
        SELECT 'trigram'::text AS how, g.n, r.schema_name, r.table_name, r.column_name, r.value,
               g.s AS score
          FROM (SELECT DISTINCT t.n, lower(t.value) AS lv, t.s FROM trg t) g CROSS JOIN LATERAL (
              SELECT v.schema_name, v.table_name, v.column_name, v.value
                FROM nl2sql.cell_value v
               WHERE lower(v.value) = g.lv
                 AND nl2sql._column_values_visible(role, v.schema_name, v.table_name,
                                                   v.column_name)
               ORDER BY lower(v.value), v.id LIMIT per_phrase) r),
    -- exact matches the same way, at most exact_cap rows a phrase
    xcand AS MATERIALIZED (
        SELECT 'exact'::text AS how, p.n, r.schema_name, r.table_name, r.column_name, r.value,
               1.0::float8 AS score
          FROM ph p CROSS JOIN LATERAL (
              SELECT v.schema_name, v.table_name, v.column_name, v.value
                FROM nl2sql.cell_value v
               WHERE lower(v.value) = lower(p.x)
                 AND nl2sql._column_values_visible(role, v.schema_name, v.table_name,
                                                   v.column_name)
               ORDER BY lower(v.value), v.id LIMIT exact_cap) r
         WHERE p.x IS NOT NULL),
    cand AS MATERIALIZED (
        SELECT 'vector'::text AS how, e.n, m.schema_name, m.table_name, m.column_name, m.value,
               m.s AS score
          FROM ev e CROSS JOIN LATERAL (
            SELECT v.schema_name, v.table_name, v.column_name, v.value,
                   (1 - (v.embedding <=> e.q))::float8 AS s
              FROM nl2sql.cell_value v ORDER BY v.embedding <=> e.q LIMIT 4 * per_phrase) m
         WHERE m.s >= vector_min),
    cols AS MATERIALIZED (SELECT DISTINCT c.schema_name, c.table_name, c.column_name FROM cand c),
    ok AS MATERIALIZED (
        SELECT c.schema_name, c.table_name, c.column_name FROM cols c
         WHERE nl2sql._column_values_visible(role, c.schema_name, c.table_name, c.column_name)),
    ranked AS (
        SELECT c.*, row_number() OVER (PARTITION BY c.how, c.n
                                       ORDER BY c.score DESC, c.value, c.schema_name,
                                                c.table_name, c.column_name) AS rk
          FROM (SELECT c.* FROM cand c JOIN ok USING (schema_name, table_name, column_name)
                UNION ALL SELECT * FROM tcand UNION ALL SELECT * FROM xcand) c)
    SELECT r.how, r.n, r.schema_name, r.table_name, r.column_name, r.value, r.score
      FROM ranked r WHERE r.how = 'exact' OR r.rk <= per_phrase;
END
$$;

-- Value alignment's lookups (OpenSearch-SQL §3.5) in one column: SECURITY DEFINER like
-- _match_values, so that a lookup is a short index scan of that column's values instead of a
-- plan over the privilege-filtered views. Nothing when role `who` (nl2sql._acting_role) may not
-- SELECT the column or its values are withheld (n_values 0). Returns one row when nothing
-- matches (value NULL); otherwise up to k values, best first: equal to `literal`, then equal
-- ignoring case, then by similarity(value, literal) (only those >= trgm_min unless it is NULL).
-- PL/pgSQL with a generic plan, kept per backend: an SQL-language function is planned anew at
-- every call.
CREATE OR REPLACE FUNCTION nl2sql._column_values(who name, sch name, tbl name, col name,
                                                 literal text, trgm_min float8, k int)
RETURNS TABLE (n_values bigint, value text, score float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH vals AS MATERIALIZED (
        SELECT v.value FROM nl2sql.cell_value v
        WHERE v.schema_name = sch AND v.table_name = tbl AND v.column_name = col
          AND nl2sql._column_values_visible(nl2sql._acting_role(who), sch, tbl, col))
    SELECT (SELECT count(*) FROM vals), b.value, b.score
    FROM (SELECT 1) AS one LEFT JOIN LATERAL (
        SELECT x.value, similarity(x.value, literal)::float8 AS score FROM vals x
        WHERE literal IS NOT NULL
          AND (lower(x.value) = lower(literal) OR trgm_min IS NULL
               OR similarity(x.value, literal) >= trgm_min)
        ORDER BY x.value = literal DESC, lower(x.value) = lower(literal) DESC, 2 DESC, x.value
        LIMIT k) b ON true;
END
$$;

-- Examples: those of other databases, and those of this one whose every relation the caller
-- may SELECT (a relation that no longer exists hides the example).
CREATE OR REPLACE VIEW nl2sql.visible_example WITH (security_barrier) AS
    SELECT e.id, e.db_id, e.question, e.sql, e.masked_question, e.sql_skeleton, e.schema,
           e.source, e.embedding, e.added_at
    FROM nl2sql.example e
    WHERE NOT EXISTS (
        SELECT 1 FROM nl2sql.example_relation er
        WHERE er.example_id = e.id
          AND NOT COALESCE(pg_catalog.has_table_privilege(pg_catalog.to_regclass(
                  pg_catalog.quote_ident(er.schema_name) || '.' || pg_catalog.quote_ident(er.table_name)),
                  'SELECT'), false));

-- The caller's own query log rows.
CREATE OR REPLACE VIEW nl2sql.my_query_log WITH (security_barrier) AS
    SELECT id, created_at, role_name, question, sql, confidence, error, trace, conversation
    FROM nl2sql.query_log WHERE role_name = current_user;

GRANT SELECT ON nl2sql.visible_table, nl2sql.visible_column, nl2sql.visible_fk,
                nl2sql.visible_cell_value, nl2sql.visible_example, nl2sql.my_query_log TO PUBLIC;

-- The one write a user call needs: its query_log row. The log holds only what the pipeline
-- wrote: the writer is SECURITY DEFINER (ordinary roles cannot write the table) and accepts a
-- row only with the one-time token the pipeline issued for it in this backend's Python
-- interpreter (nl2sql.core.query_log.log_query): the token never leaves the server process,
-- and only code that runs inside PL/Python can read it, i.e. functions in plpython3u, an
-- untrusted language in which only superusers can create functions. A role calling the writer
-- itself has no token and is refused (SQLSTATE 42501). The row is attributed to the given role
-- only when the session may act as it (SET ROLE), else to session_user: never to a role the
-- caller is not (e.g. when called from inside some other SECURITY DEFINER function,
-- current_user is that function's owner).
CREATE OR REPLACE FUNCTION nl2sql._log_query(token text, role_name name, question text,
                                             sql text, confidence float8, error text,
                                             trace jsonb, conversation text DEFAULT NULL)
RETURNS bigint LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.write_log(plpy, SD, token, role_name, question, sql, confidence, error, trace, conversation)
$py$;

-- Forgetting a conversation detaches the acting role's turns from the key (conversation set
-- to NULL): later questions with that key start afresh; the rows stay in the query log, the
-- DBA's record (feedback() refers to them by id). Acts only for nl2sql._acting_role(who).
CREATE OR REPLACE FUNCTION nl2sql._forget_conversation(who name, key text)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint;
BEGIN
    UPDATE nl2sql.query_log q SET conversation = NULL
    WHERE q.role_name = nl2sql._acting_role(_forget_conversation.who)
      AND q.conversation = _forget_conversation.key;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- A conversation's turns: the caller's own query_log rows with that key, oldest first.
CREATE OR REPLACE FUNCTION nl2sql.conversation(key text)
RETURNS TABLE (turn bigint, log_id bigint, asked_at timestamptz, question text, sql text,
               confidence float8, error text)
LANGUAGE sql STABLE SECURITY INVOKER SET search_path FROM CURRENT AS $$
    SELECT pg_catalog.row_number() OVER (ORDER BY q.id), q.id, q.created_at, q.question, q.sql,
           q.confidence, q.error
    FROM nl2sql.my_query_log q WHERE q.conversation OPERATOR(pg_catalog.=) key ORDER BY q.id
$$;
COMMENT ON FUNCTION nl2sql.conversation(text) IS
    'nl2sql: the turns of one of your conversations (question, chosen SQL), oldest first';

CREATE OR REPLACE FUNCTION nl2sql.forget_conversation(key text) RETURNS bigint
LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT AS $$
    SELECT nl2sql._forget_conversation(current_user, key)
$$;
COMMENT ON FUNCTION nl2sql.forget_conversation(text) IS
    'nl2sql: detach your turns from a conversation (later questions no longer build on them); returns how many';

-- Per-table/column cell-value policy (see nl2sql.value_policy); re-indexes the table's values.
CREATE OR REPLACE FUNCTION nl2sql.set_value_policy(tbl regclass, send_values boolean,
                                                   column_name name DEFAULT NULL)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.set_value_policy(plpy, tbl, send_values, column_name)
$py$;
COMMENT ON FUNCTION nl2sql.set_value_policy(regclass, boolean, name) IS
    'nl2sql: keep a table''s or column''s cell values out of the index and prompts (false), or opt a row-level-security table in (true)';

-- Administration is for the extension owner (and roles it grants): not for PUBLIC.
REVOKE EXECUTE ON FUNCTION
    nl2sql.reindex(text[], boolean), nl2sql._reindex_plan(text[]),
    nl2sql._reindex_table(text, text, boolean), nl2sql._reindex_finish(text[], text[], boolean),
    nl2sql.add_model(text, text, text, text, float8, float8, int, int, text, numeric, numeric, int, text, boolean, boolean, int),
    nl2sql.remove_model(text), nl2sql.set_setting(text, text),
    nl2sql.add_embedding_model(text, text, text, int, text, int, int, float8, boolean),
    nl2sql.add_example(text, text, text, text), nl2sql.load_examples(text, text, text),
    nl2sql.feedback(bigint, boolean, text, boolean), nl2sql.set_value_policy(regclass, boolean, name),
    nl2sql.calibrate(jsonb)
    FROM PUBLIC;
-- the vote reads the calibrated weights for every role (model names and weights, no data)
GRANT SELECT ON nl2sql.model_reliability TO PUBLIC;
