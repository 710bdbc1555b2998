-- Curated knowledge (docs/curated.md): the
-- administrative functions (not executable by PUBLIC: the extension owner grants them, as for
-- add_example and reindex), the per-role views the pipeline reads, and the listing views.

CREATE OR REPLACE FUNCTION nl2sql.add_verified_query(question text, sql text,
                                                     dialect text DEFAULT 'postgres')
RETURNS bigint LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.add_verified_query(plpy, question, sql, dialect)
$py$;
COMMENT ON FUNCTION nl2sql.add_verified_query(text, text, text) IS
    'nl2sql: add a verified question/SQL pair (a matching question is answered from it without a model call)';

CREATE OR REPLACE FUNCTION nl2sql.add_template(question text, sql text)
RETURNS bigint LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.add_template(plpy, question, sql)
$py$;
COMMENT ON FUNCTION nl2sql.add_template(text, text) IS
    'nl2sql: add a parameterised query template (:name parameters bound from the question''s values)';

CREATE OR REPLACE FUNCTION nl2sql.remove_verified_query(id bigint) RETURNS boolean
LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH d AS (DELETE FROM nl2sql.verified_query v WHERE v.id = remove_verified_query.id
               RETURNING 1)
    SELECT count(*) > 0 FROM d
$$;
COMMENT ON FUNCTION nl2sql.remove_verified_query(bigint) IS
    'nl2sql: remove a verified query or template by id';

CREATE OR REPLACE FUNCTION nl2sql.remove_template(id bigint) RETURNS boolean
LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH d AS (DELETE FROM nl2sql.verified_query v WHERE v.id = remove_template.id
               AND v.kind = 'template' RETURNING 1)
    SELECT count(*) > 0 FROM d
$$;
COMMENT ON FUNCTION nl2sql.remove_template(bigint) IS 'nl2sql: remove a template by id';

CREATE OR REPLACE FUNCTION nl2sql.add_term(term text, definition text,
                                           sql_expression text DEFAULT NULL)
RETURNS bigint LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.add_term(plpy, term, definition, sql_expression)
$py$;
COMMENT ON FUNCTION nl2sql.add_term(text, text, text) IS
    'nl2sql: add or update a business term (glossary entry, synonym, metric) shown in the prompts';

CREATE OR REPLACE FUNCTION nl2sql.remove_term(term text) RETURNS boolean
LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.remove_term(plpy, term)
$py$;
COMMENT ON FUNCTION nl2sql.remove_term(text) IS 'nl2sql: remove a business term (case-insensitive)';

CREATE OR REPLACE FUNCTION nl2sql.add_instruction(instruction text)
RETURNS bigint LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.add_instruction(plpy, instruction)
$py$;
COMMENT ON FUNCTION nl2sql.add_instruction(text) IS
    'nl2sql: add a database-wide instruction shown in the prompts';

CREATE OR REPLACE FUNCTION nl2sql.remove_instruction(id bigint) RETURNS boolean
LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH d AS (DELETE FROM nl2sql.instruction i WHERE i.id = remove_instruction.id RETURNING 1)
    SELECT count(*) > 0 FROM d
$$;
COMMENT ON FUNCTION nl2sql.remove_instruction(bigint) IS 'nl2sql: remove an instruction by id';

-- What the calling role may use: a verified query or template whose every relation it may
-- SELECT (a relation that no longer exists hides it), a term whose sql_expression reads only
-- relations it may SELECT; every instruction.
CREATE OR REPLACE VIEW nl2sql.visible_verified_query WITH (security_barrier) AS
    SELECT v.id, v.kind, v.question, v.sql, v.template_sql, v.parameters, v.question_info,
           v.masked_question, v.source, v.added_at, v.embedding
    FROM nl2sql.verified_query v
    WHERE NOT EXISTS (
        SELECT 1 FROM nl2sql.verified_query_relation r
        WHERE r.query_id = v.id
          AND NOT COALESCE(pg_catalog.has_table_privilege(pg_catalog.to_regclass(
                  pg_catalog.quote_ident(r.schema_name) || '.' || pg_catalog.quote_ident(r.table_name)),
                  'SELECT'), false));

CREATE OR REPLACE VIEW nl2sql.visible_term WITH (security_barrier) AS
    SELECT t.id, t.term, t.definition, t.sql_expression, t.added_at, t.embedding
    FROM nl2sql.term t
    WHERE t.embedding IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM nl2sql.term_relation r
        WHERE r.term_id = t.id
          AND NOT COALESCE(pg_catalog.has_table_privilege(pg_catalog.to_regclass(
                  pg_catalog.quote_ident(r.schema_name) || '.' || pg_catalog.quote_ident(r.table_name)),
                  'SELECT'), false));

-- An instruction added beside the database waits for the client to embed it (embedding NULL).
CREATE OR REPLACE VIEW nl2sql.visible_instruction AS
    SELECT i.id, i.instruction, i.added_at, i.embedding FROM nl2sql.instruction i
    WHERE i.embedding IS NOT NULL;

-- Listing, for people (no embeddings): what the calling role may see.
CREATE OR REPLACE VIEW nl2sql.verified_queries AS
    SELECT id, kind, question, sql, parameters, source, added_at
    FROM nl2sql.visible_verified_query ORDER BY id;
COMMENT ON VIEW nl2sql.verified_queries IS
    'nl2sql: the verified queries and templates the calling role may use';
CREATE OR REPLACE VIEW nl2sql.terms AS
    SELECT t.id, t.term, t.definition, t.sql_expression, t.added_at FROM nl2sql.term t
    WHERE t.embedding IS NULL OR t.id IN (SELECT v.id FROM nl2sql.visible_term v) ORDER BY t.id;
COMMENT ON VIEW nl2sql.terms IS 'nl2sql: the business terms the calling role may see';
CREATE OR REPLACE VIEW nl2sql.instructions AS
    SELECT id, instruction, added_at FROM nl2sql.instruction ORDER BY id;
COMMENT ON VIEW nl2sql.instructions IS 'nl2sql: the database-wide instructions';

GRANT SELECT ON nl2sql.visible_verified_query, nl2sql.visible_term, nl2sql.visible_instruction,
                nl2sql.verified_queries, nl2sql.terms, nl2sql.instructions TO PUBLIC;

-- Administration is for the extension owner (and roles it grants): not for PUBLIC.
REVOKE EXECUTE ON FUNCTION
    nl2sql.add_verified_query(text, text, text), nl2sql.add_template(text, text),
    nl2sql.remove_verified_query(bigint), nl2sql.remove_template(bigint),
    nl2sql.add_term(text, text, text), nl2sql.remove_term(text),
    nl2sql.add_instruction(text), nl2sql.remove_instruction(bigint)
    FROM PUBLIC;
