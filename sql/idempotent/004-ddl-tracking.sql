-- The index follows DDL (docs/indexing.md, "DDL"). Two event triggers watch every DDL
-- command of the database: on ddl_command_end (tables, views, materialized views, foreign tables
-- created or altered, renamed, moved, commented) and on sql_drop (those relations and their
-- columns dropped). For each they correct the schema index at once, with a few keyed statements
-- (a dropped or renamed table or column never reaches a prompt after the DDL commits), and add a
-- row to nl2sql.ddl_queue; the next nl2sql.reindex() re-indexes the queued tables (values and
-- embeddings) and empties the queue. The trigger functions are SECURITY DEFINER (they write the
-- index for whoever runs the DDL) with a pinned search_path, take no input but the event's, and
-- never fail the user's command: an error becomes a WARNING and the command goes on. Nor do they
-- wait long: an index row a running reindex rewrote stays locked until that reindex commits,
-- so the triggers give up after 500 ms (lock_timeout, below deadlock_timeout's default 1 s: a
-- DDL never deadlocks with a reindex) with that WARNING; the views the prompts read filter the
-- index by the live catalog meanwhile, and the next reindex sees the change in the catalog.

-- Forget one column of the index: its row, its cell values, the foreign keys naming it.
CREATE OR REPLACE FUNCTION nl2sql._ddl_forget_column(sch name, tbl name, col name)
RETURNS void LANGUAGE sql SET search_path FROM CURRENT AS $$
    DELETE FROM nl2sql.cell_value v
     WHERE v.schema_name = sch AND v.table_name = tbl AND v.column_name = col;
    DELETE FROM nl2sql.schema_fk f
     WHERE (f.schema_name = sch AND f.table_name = tbl AND col = ANY (f.columns))
        OR (f.ref_schema = sch AND f.ref_table = tbl AND col = ANY (f.ref_columns));
    DELETE FROM nl2sql.schema_column c
     WHERE c.schema_name = sch AND c.table_name = tbl AND c.column_name = col;
$$;

-- Rename one column of the index (the index row keeps its sample values; its cell values go and
-- are re-embedded by the next reindex). The value policy follows the column.
CREATE OR REPLACE FUNCTION nl2sql._ddl_rename_column(sch name, tbl name, old name, new name)
RETURNS void LANGUAGE sql SET search_path FROM CURRENT AS $$
    DELETE FROM nl2sql.cell_value v
     WHERE v.schema_name = sch AND v.table_name = tbl AND v.column_name = old;
    UPDATE nl2sql.schema_column c SET column_name = new
     WHERE c.schema_name = sch AND c.table_name = tbl AND c.column_name = old;
    UPDATE nl2sql.schema_fk f SET columns = pg_catalog.array_replace(f.columns, old, new)
     WHERE f.schema_name = sch AND f.table_name = tbl AND old = ANY (f.columns);
    UPDATE nl2sql.schema_fk f SET ref_columns = pg_catalog.array_replace(f.ref_columns, old, new)
     WHERE f.ref_schema = sch AND f.ref_table = tbl AND old = ANY (f.ref_columns);
    UPDATE nl2sql.value_policy p SET column_name = new
     WHERE p.schema_name = sch AND p.table_name = tbl AND p.column_name = old
       AND NOT EXISTS (SELECT 1 FROM nl2sql.value_policy q WHERE q.schema_name = sch
                       AND q.table_name = tbl AND q.column_name = new);
$$;

-- Rename (or move) one table of the index, found by its oid: schema_table's row (its columns
-- and foreign keys follow by ON UPDATE CASCADE), foreign keys of other tables pointing at it,
-- its value policy. A stale row under the new name goes first; the cell values go too.
CREATE OR REPLACE FUNCTION nl2sql._ddl_rename_table(rel oid, old_sch name, old_tbl name,
                                                    sch name, tbl name)
RETURNS void LANGUAGE sql SET search_path FROM CURRENT AS $$
    DELETE FROM nl2sql.schema_table t WHERE t.schema_name = sch AND t.table_name = tbl;
    DELETE FROM nl2sql.cell_value v WHERE v.schema_name = old_sch AND v.table_name = old_tbl;
    UPDATE nl2sql.schema_table t SET schema_name = sch, table_name = tbl WHERE t.relid = rel;
    UPDATE nl2sql.schema_fk f SET ref_schema = sch, ref_table = tbl
     WHERE f.ref_schema = old_sch AND f.ref_table = old_tbl;
    UPDATE nl2sql.value_policy p SET schema_name = sch, table_name = tbl
     WHERE p.schema_name = old_sch AND p.table_name = old_tbl
       AND NOT EXISTS (SELECT 1 FROM nl2sql.value_policy q WHERE q.schema_name = sch
                       AND q.table_name = tbl AND q.column_name = p.column_name);
$$;

-- Bring the index rows of one relation in line with the catalog after a DDL command and queue
-- it: a renamed table (index row found by oid under another name) is renamed; an index row
-- under this name for another relation (one dropped while the triggers were off) is removed;
-- a column row whose name is gone is renamed when the column of the same attnum has a name the
-- index does not hold, else forgotten; data types follow. Queues one 'renamed' row per rename,
-- else one 'created' or 'altered' row (column_name set for a command on one column).
CREATE OR REPLACE FUNCTION nl2sql._ddl_sync_relation(rel oid, tag text, subid int)
RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    sch name;
    tbl name;
    old record;
    c record;
    new_col name;
    renamed int := 0;
BEGIN
    SELECT n.nspname, r.relname INTO sch, tbl FROM pg_catalog.pg_class r
      JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace WHERE r.oid = rel;
    SELECT t.schema_name, t.table_name INTO old FROM nl2sql.schema_table t WHERE t.relid = rel;
    IF FOUND AND (old.schema_name, old.table_name) IS DISTINCT FROM (sch, tbl) THEN
        PERFORM nl2sql._ddl_rename_table(rel, old.schema_name, old.table_name, sch, tbl);
        INSERT INTO nl2sql.ddl_queue (event, object_type, relid, schema_name, table_name,
                                      old_name, command_tag)
        VALUES ('renamed', 'table', rel, sch, tbl,
                pg_catalog.quote_ident(old.schema_name) || '.' || pg_catalog.quote_ident(old.table_name), tag);
        renamed := renamed + 1;
    ELSE
        DELETE FROM nl2sql.schema_table t WHERE t.schema_name = sch AND t.table_name = tbl
           AND t.relid IS DISTINCT FROM rel;
    END IF;
    FOR c IN SELECT sc.column_name, sc.ordinal FROM nl2sql.schema_column sc
              WHERE sc.schema_name = sch AND sc.table_name = tbl
                AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a WHERE a.attrelid = rel
                                AND a.attname = sc.column_name AND a.attnum > 0 AND NOT a.attisdropped)
    LOOP
        SELECT a.attname INTO new_col FROM pg_catalog.pg_attribute a
         WHERE a.attrelid = rel AND a.attnum = c.ordinal AND NOT a.attisdropped
           AND NOT EXISTS (SELECT 1 FROM nl2sql.schema_column x WHERE x.schema_name = sch
                           AND x.table_name = tbl AND x.column_name = a.attname);
        IF FOUND THEN
            PERFORM nl2sql._ddl_rename_column(sch, tbl, c.column_name, new_col);
            INSERT INTO nl2sql.ddl_queue (event, object_type, relid, schema_name, table_name,
                                          column_name, old_name, command_tag)
            VALUES ('renamed', 'column', rel, sch, tbl, new_col, c.column_name, tag);
            renamed := renamed + 1;
        ELSE
            PERFORM nl2sql._ddl_forget_column(sch, tbl, c.column_name);
        END IF;
    END LOOP;
    UPDATE nl2sql.schema_column sc SET data_type = pg_catalog.format_type(a.atttypid, a.atttypmod)
      FROM pg_catalog.pg_attribute a
     WHERE sc.schema_name = sch AND sc.table_name = tbl AND a.attrelid = rel
       AND a.attname = sc.column_name AND NOT a.attisdropped
       AND sc.data_type IS DISTINCT FROM pg_catalog.format_type(a.atttypid, a.atttypmod);
    IF renamed = 0 THEN
        INSERT INTO nl2sql.ddl_queue (event, object_type, relid, schema_name, table_name,
                                      column_name, command_tag)
        SELECT CASE WHEN tag LIKE 'CREATE %' OR tag = 'SELECT INTO' THEN 'created' ELSE 'altered' END,
               CASE WHEN subid > 0 THEN 'column' ELSE 'table' END, rel, sch, tbl,
               (SELECT a.attname FROM pg_catalog.pg_attribute a
                 WHERE subid > 0 AND a.attrelid = rel AND a.attnum = subid), tag;
    END IF;
END
$$;

-- The relations (and columns) a DDL command touched that the index may hold: tables, views,
-- materialized views, foreign tables outside nl2sql's and the system schemas, not partitions,
-- not temporary, not created by an extension script.
CREATE OR REPLACE FUNCTION nl2sql._ddl_command_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '500ms' AS $$
DECLARE
    cmd record;
BEGIN
    FOR cmd IN
        SELECT DISTINCT ON (c.objid, c.objsubid) c.objid, c.objsubid, c.command_tag
          FROM pg_catalog.pg_event_trigger_ddl_commands() c
          JOIN pg_catalog.pg_class r ON r.oid = c.objid
          JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
         WHERE c.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND NOT c.in_extension
           AND r.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT r.relispartition
           AND r.relpersistence <> 't'
           AND n.nspname NOT IN ('nl2sql', 'pg_catalog', 'information_schema', 'pg_toast')
         ORDER BY c.objid, c.objsubid
    LOOP
        BEGIN
            PERFORM nl2sql._ddl_sync_relation(cmd.objid, cmd.command_tag, cmd.objsubid);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'nl2sql: could not update the schema index after %: %', cmd.command_tag, SQLERRM
                USING HINT = 'run SELECT nl2sql.reindex() to bring the index up to date';
        END;
    END LOOP;
END
$$;

-- Dropped relations and columns leave the index at once (cascading to their columns, cell
-- values and foreign keys; foreign keys of other tables pointing at a dropped table go too).
CREATE OR REPLACE FUNCTION nl2sql._ddl_sql_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '500ms' AS $$
DECLARE
    o record;
BEGIN
    FOR o IN
        SELECT d.objid, d.object_type, d.address_names, d.schema_name, d.object_name
          FROM pg_catalog.pg_event_trigger_dropped_objects() d
         WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND NOT d.is_temporary
           AND d.object_type IN ('table', 'view', 'materialized view', 'foreign table',
                                 'table column', 'view column', 'materialized view column',
                                 'foreign table column')
           AND d.address_names[1] NOT IN ('nl2sql', 'pg_catalog', 'information_schema', 'pg_toast')
    LOOP
        BEGIN
            IF o.object_type LIKE '% column' THEN
                PERFORM nl2sql._ddl_forget_column(o.address_names[1], o.address_names[2],
                                                  o.address_names[3]);
            ELSE
                DELETE FROM nl2sql.schema_fk f
                 WHERE f.ref_schema = o.address_names[1] AND f.ref_table = o.address_names[2];
                DELETE FROM nl2sql.schema_table t
                 WHERE t.relid = o.objid
                    OR (t.schema_name = o.address_names[1] AND t.table_name = o.address_names[2]);
            END IF;
            INSERT INTO nl2sql.ddl_queue (event, object_type, relid, schema_name, table_name,
                                          column_name, command_tag)
            VALUES ('dropped', CASE WHEN o.object_type LIKE '% column' THEN 'column' ELSE 'table' END,
                    o.objid, o.address_names[1], o.address_names[2], o.address_names[3], TG_TAG);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'nl2sql: could not update the schema index after %: %', TG_TAG, SQLERRM
                USING HINT = 'run SELECT nl2sql.reindex() to bring the index up to date';
        END;
    END LOOP;
END
$$;

-- The triggers need a superuser (CREATE EVENT TRIGGER); so does CREATE EXTENSION nl2sql
-- (superuser = true in nl2sql.control). Without them the extension still installs: the views
-- the prompts read keep filtering the index against the live catalog, and reindex() catches up.
DO $nl2sql_ddl$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger WHERE evtname = 'nl2sql_ddl_command_end') THEN
        CREATE EVENT TRIGGER nl2sql_ddl_command_end ON ddl_command_end
            EXECUTE FUNCTION nl2sql._ddl_command_end();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_event_trigger WHERE evtname = 'nl2sql_ddl_sql_drop') THEN
        CREATE EVENT TRIGGER nl2sql_ddl_sql_drop ON sql_drop EXECUTE FUNCTION nl2sql._ddl_sql_drop();
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'nl2sql: DDL tracking is off: creating event triggers needs a superuser (%)', SQLERRM
        USING HINT = 'a superuser can create them (docs/indexing.md, "DDL"); until then run SELECT nl2sql.reindex() after DDL';
END
$nl2sql_ddl$;

REVOKE EXECUTE ON FUNCTION nl2sql._ddl_forget_column(name, name, name),
    nl2sql._ddl_rename_column(name, name, name, name),
    nl2sql._ddl_rename_table(oid, name, name, name, name),
    nl2sql._ddl_sync_relation(oid, text, int) FROM PUBLIC;
REVOKE ALL ON nl2sql.ddl_queue FROM PUBLIC;
