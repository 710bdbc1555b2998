-- One-time tables of the safety model (issue 4). See README "Safety".

-- Per-table / per-column policy on cell values (sample values in the schema index, the value
-- index). column_name '' = the whole table. send_values false keeps a table's/column's values
-- out of the index and out of every prompt; true opts a table with row-level security in
-- (RLS tables are not value-indexed by default: the indexer reads them with its own rights).
CREATE TABLE nl2sql.value_policy (
    schema_name  name NOT NULL,
    table_name   name NOT NULL,
    column_name  name NOT NULL DEFAULT '',
    send_values  boolean NOT NULL,
    PRIMARY KEY (schema_name, table_name, column_name)
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.value_policy', '');

-- Relations each example of this database reads (db_id 'local'), so that an example is shown
-- only to roles that may SELECT every relation it names.
CREATE TABLE nl2sql.example_relation (
    example_id   bigint NOT NULL REFERENCES nl2sql.example (id) ON DELETE CASCADE,
    schema_name  name NOT NULL,
    table_name   name NOT NULL,
    PRIMARY KEY (example_id, schema_name, table_name)
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.example_relation', '');
