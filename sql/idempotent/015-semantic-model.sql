-- The semantic model (docs/semantic-model.md): import and export (administrative, not for
-- PUBLIC), the per-role views the pipeline reads and the listing views.

CREATE OR REPLACE FUNCTION nl2sql.import_semantic_model(model text)
RETURNS jsonb LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.import_semantic_model(plpy, model)
$py$;
COMMENT ON FUNCTION nl2sql.import_semantic_model(text) IS
    'nl2sql: import a semantic model (Cortex Analyst YAML): logical tables, dimensions, metrics, relationships, verified queries';

CREATE OR REPLACE FUNCTION nl2sql.export_semantic_model()
RETURNS text LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.export_semantic_model(plpy)
$py$;
COMMENT ON FUNCTION nl2sql.export_semantic_model() IS
    'nl2sql: the semantic model as Cortex Analyst YAML (what the calling role may see)';

-- What the calling role may use: a logical table it may SELECT, an object whose every relation
-- it may SELECT (a relation that no longer exists hides it), a relationship between two such
-- tables.
CREATE OR REPLACE VIEW nl2sql.visible_semantic_table WITH (security_barrier) AS
    SELECT t.id, t.name, t.schema_name, t.table_name, t.description, t.synonyms, t.primary_key,
           t.extra
    FROM nl2sql.semantic_table t
    WHERE COALESCE(pg_catalog.has_table_privilege(pg_catalog.to_regclass(
              pg_catalog.quote_ident(t.schema_name) || '.' || pg_catalog.quote_ident(t.table_name)),
              'SELECT'), false);

CREATE OR REPLACE VIEW nl2sql.visible_semantic_object WITH (security_barrier) AS
    SELECT o.id, o.table_id, o.kind, o.name, o.expr, o.sql, o.description, o.synonyms,
           o.data_type, o.extra
    FROM nl2sql.semantic_object o
    WHERE o.table_id IN (SELECT id FROM nl2sql.visible_semantic_table)
      AND NOT EXISTS (
        SELECT 1 FROM nl2sql.semantic_object_relation r
        WHERE r.object_id = o.id
          AND NOT COALESCE(pg_catalog.has_table_privilege(pg_catalog.to_regclass(
                  pg_catalog.quote_ident(r.schema_name) || '.' || pg_catalog.quote_ident(r.table_name)),
                  'SELECT'), false));

CREATE OR REPLACE VIEW nl2sql.visible_semantic_relationship WITH (security_barrier) AS
    SELECT r.id, r.name, r.left_table_id, r.right_table_id, r.left_columns, r.right_columns,
           r.join_type, r.relationship_type
    FROM nl2sql.semantic_relationship r
    WHERE r.left_table_id IN (SELECT id FROM nl2sql.visible_semantic_table)
      AND r.right_table_id IN (SELECT id FROM nl2sql.visible_semantic_table);

-- Listing, for people: what the calling role may see.
CREATE OR REPLACE VIEW nl2sql.semantic_objects AS
    SELECT o.id, t.name AS logical_table, t.schema_name, t.table_name, o.kind, o.name, o.expr,
           o.description, o.synonyms
    FROM nl2sql.visible_semantic_object o JOIN nl2sql.visible_semantic_table t ON t.id = o.table_id
    ORDER BY t.name, o.kind, o.name;
COMMENT ON VIEW nl2sql.semantic_objects IS
    'nl2sql: the semantic model''s dimensions, time dimensions, facts, metrics and filters the calling role may see';
CREATE OR REPLACE VIEW nl2sql.semantic_relationships AS
    SELECT r.id, r.name, l.name AS left_table, r.left_columns, rt.name AS right_table,
           r.right_columns, r.join_type, r.relationship_type
    FROM nl2sql.visible_semantic_relationship r
    JOIN nl2sql.visible_semantic_table l ON l.id = r.left_table_id
    JOIN nl2sql.visible_semantic_table rt ON rt.id = r.right_table_id
    ORDER BY r.name;
COMMENT ON VIEW nl2sql.semantic_relationships IS
    'nl2sql: the semantic model''s relationships between tables the calling role may see';

GRANT SELECT ON nl2sql.visible_semantic_table, nl2sql.visible_semantic_object,
                nl2sql.visible_semantic_relationship, nl2sql.semantic_objects,
                nl2sql.semantic_relationships TO PUBLIC;

-- Administration is for the extension owner (and roles it grants): not for PUBLIC.
REVOKE EXECUTE ON FUNCTION nl2sql.import_semantic_model(text), nl2sql.export_semantic_model()
    FROM PUBLIC;
