-- Privileges (issue 4): ordinary roles may call nl2sql(), nl2sql.explain() and nl2sql.ask();
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
GRANT SELECT ON nl2sql.setting, nl2sql.model TO PUBLIC;

-- Tables the caller may SELECT (any column is enough; columns are filtered below).
CREATE OR REPLACE VIEW nl2sql.visible_table WITH (security_barrier) AS
    SELECT t.schema_name, t.table_name, t.comment, t.n_rows, t.indexed_at
    FROM nl2sql.schema_table t
    JOIN pg_catalog.pg_namespace n ON n.nspname = t.schema_name
    JOIN pg_catalog.pg_class r ON r.relnamespace = n.oid AND r.relname = t.table_name
    WHERE pg_catalog.has_any_column_privilege(r.oid, 'SELECT');

-- Columns the caller may SELECT. values_allowed: the setting send_values is on, and the
-- value_policy of the column (else of its table) allows it (default: yes, unless the table has
-- row-level security). sample_values are empty where values are not allowed.
CREATE OR REPLACE VIEW nl2sql.visible_column WITH (security_barrier) AS
    SELECT c.schema_name, c.table_name, c.column_name, c.ordinal, c.data_type, c.is_primary_key,
           c.comment,
           CASE WHEN va.allowed THEN c.sample_values ELSE '{}'::text[] END AS sample_values,
           c.embedding, va.allowed AS values_allowed
    FROM nl2sql.schema_column c
    JOIN pg_catalog.pg_namespace n ON n.nspname = c.schema_name
    JOIN pg_catalog.pg_class r ON r.relnamespace = n.oid AND r.relname = c.table_name
    JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attname = c.column_name
                                  AND NOT a.attisdropped
    CROSS JOIN LATERAL (SELECT
        COALESCE((SELECT s.value <> 'off' FROM nl2sql.setting s WHERE s.key = 'send_values'), true)
        AND COALESCE(
            (SELECT p.send_values FROM nl2sql.value_policy p WHERE p.schema_name = c.schema_name
                AND p.table_name = c.table_name AND p.column_name = c.column_name),
            (SELECT p.send_values FROM nl2sql.value_policy p WHERE p.schema_name = c.schema_name
                AND p.table_name = c.table_name AND p.column_name = ''),
            NOT r.relrowsecurity) AS allowed) va
    WHERE pg_catalog.has_column_privilege(r.oid, a.attnum, 'SELECT');

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
    SELECT id, created_at, role_name, question, sql, confidence, error, trace
    FROM nl2sql.query_log WHERE role_name = current_user;

GRANT SELECT ON nl2sql.visible_table, nl2sql.visible_column, nl2sql.visible_fk,
                nl2sql.visible_cell_value, nl2sql.visible_example, nl2sql.my_query_log TO PUBLIC;

-- The one write a user call needs: its query_log row. SECURITY DEFINER, pinned search_path;
-- the row is attributed to the given role only when the session may act as it (SET ROLE),
-- else to session_user: never to a role the caller is not (e.g. when called from inside some
-- other SECURITY DEFINER function, current_user is that function's owner).
CREATE OR REPLACE FUNCTION nl2sql._log_query(role_name name, question text, sql text,
                                             confidence float8, error text, trace jsonb)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    new_id bigint;
    who name := _log_query.role_name;
BEGIN
    IF who IS NULL OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = who) THEN
        who := session_user;
    ELSIF NOT pg_catalog.pg_has_role(session_user, who, 'USAGE') THEN
        who := session_user;
    END IF;
    INSERT INTO nl2sql.query_log AS q (role_name, question, sql, confidence, error, trace)
    VALUES (who, _log_query.question, _log_query.sql, _log_query.confidence,
            _log_query.error, _log_query.trace)
    RETURNING q.id INTO new_id;
    RETURN new_id;
END
$$;

-- Per-table/column cell-value policy (see nl2sql.value_policy); re-indexes the table's values.
CREATE OR REPLACE FUNCTION nl2sql.set_value_policy(tbl regclass, send_values boolean,
                                                   column_name name DEFAULT NULL)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import safety
return safety.set_value_policy(plpy, tbl, send_values, column_name)
$py$;
COMMENT ON FUNCTION nl2sql.set_value_policy(regclass, boolean, name) IS
    'nl2sql: keep a table''s or column''s cell values out of the index and prompts (false), or opt a row-level-security table in (true)';

-- Administration is for the extension owner (and roles it grants): not for PUBLIC.
REVOKE EXECUTE ON FUNCTION
    nl2sql.reindex(text[], boolean), nl2sql._reindex_plan(text[]),
    nl2sql._reindex_table(text, text, boolean), nl2sql._reindex_finish(text[], text[]),
    nl2sql.add_model(text, text, text, text, float8, float8, int, int),
    nl2sql.remove_model(text), nl2sql.set_setting(text, text),
    nl2sql.add_example(text, text, text, text), nl2sql.load_examples(text, text, text),
    nl2sql.feedback(bigint, boolean, text), nl2sql.set_value_policy(regclass, boolean, name)
    FROM PUBLIC;
