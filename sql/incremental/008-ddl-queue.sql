-- The index follows DDL (README "Keeping the index true"): the event triggers of
-- sql/idempotent/004-ddl-tracking.sql correct the schema index at once and record what changed
-- here; nl2sql.reindex() then re-indexes the queued tables and empties the queue.

-- The relation each indexed table was read from: a renamed or moved table is found by its oid
-- (pg_event_trigger_ddl_commands() gives the oid and the new name only). The schema index is
-- not dumped, so oids never outlive the database they were read in.
ALTER TABLE nl2sql.schema_table ADD COLUMN relid oid;
UPDATE nl2sql.schema_table t
   SET relid = pg_catalog.to_regclass(pg_catalog.quote_ident(t.schema_name) || '.'
                                      || pg_catalog.quote_ident(t.table_name));
CREATE INDEX schema_table_relid ON nl2sql.schema_table (relid);

-- One row per DDL command and relation (or column): created, altered, renamed or dropped.
-- schema_name/table_name/column_name are the names after the command; old_name the former
-- `schema.table` (a table renamed or moved) or column name (a column renamed).
CREATE TABLE nl2sql.ddl_queue (
    id           bigserial PRIMARY KEY,
    queued_at    timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    event        text NOT NULL CHECK (event IN ('created', 'altered', 'renamed', 'dropped')),
    object_type  text NOT NULL CHECK (object_type IN ('table', 'column')),
    relid        oid,
    schema_name  name NOT NULL,
    table_name   name NOT NULL,
    column_name  name,
    old_name     text,
    command_tag  text NOT NULL,
    role_name    name NOT NULL DEFAULT session_user
);
CREATE INDEX ddl_queue_relid ON nl2sql.ddl_queue (relid);

-- A table renamed or moved takes its schema index rows along (the event trigger updates
-- schema_table; its columns and foreign keys follow). Its cell values are deleted instead and
-- re-embedded by the next reindex: an UPDATE would re-insert every value into the hnsw index
-- while the user's DDL waits.
ALTER TABLE nl2sql.schema_column
    DROP CONSTRAINT schema_column_schema_name_table_name_fkey,
    ADD CONSTRAINT schema_column_schema_name_table_name_fkey FOREIGN KEY (schema_name, table_name)
        REFERENCES nl2sql.schema_table ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE nl2sql.schema_fk
    DROP CONSTRAINT schema_fk_schema_name_table_name_fkey,
    ADD CONSTRAINT schema_fk_schema_name_table_name_fkey FOREIGN KEY (schema_name, table_name)
        REFERENCES nl2sql.schema_table ON DELETE CASCADE ON UPDATE CASCADE;

-- Citus only: a distributed or reference table's change signature, read from its shards'
-- statistics when it was indexed (py_udf/nl2sql/citus.py); an unchanged one skips the table
-- without reading its data. NULL for every other table.
ALTER TABLE nl2sql.schema_table ADD COLUMN shard_signature text;
