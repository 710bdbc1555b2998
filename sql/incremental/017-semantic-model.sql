-- The semantic model (docs/semantic-model.md): logical tables over indexed tables, their
-- dimensions, time dimensions, facts, metrics and filters (SQL expressions checked against the
-- catalog), and relationships between logical tables, declared as foreign keys or not. Written by
-- nl2sql.import_semantic_model (administrative), so pg_dump keeps the rows and sequences.

-- The model's own name, description and the keys nl2sql keeps only for export (one row).
CREATE TABLE nl2sql.semantic_model (
    id           int PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    name         text NOT NULL,
    description  text,
    extra        jsonb NOT NULL DEFAULT '{}',
    imported_at  timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.semantic_model', '');

-- A logical table: its name in the model and the table of this database it stands for.
CREATE TABLE nl2sql.semantic_table (
    id           bigserial PRIMARY KEY,
    name         text NOT NULL,
    schema_name  name NOT NULL,
    table_name   name NOT NULL,
    description  text,
    synonyms     text[] NOT NULL DEFAULT '{}',
    primary_key  text[] NOT NULL DEFAULT '{}',
    extra        jsonb NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX semantic_table_lower_name ON nl2sql.semantic_table (lower(name));
SELECT pg_catalog.pg_extension_config_dump('nl2sql.semantic_table', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.semantic_table_id_seq', '');

-- A dimension, time dimension, fact, metric or filter of a logical table: expr is the SQL
-- expression as the model wrote it, sql the same checked and resolved (columns qualified by
-- schema.table, PostgreSQL dialect); extra keeps the keys nl2sql does not use (export only).
CREATE TABLE nl2sql.semantic_object (
    id           bigserial PRIMARY KEY,
    table_id     bigint NOT NULL REFERENCES nl2sql.semantic_table (id) ON DELETE CASCADE,
    kind         text NOT NULL
                 CHECK (kind IN ('dimension', 'time_dimension', 'fact', 'metric', 'filter')),
    name         text NOT NULL,
    expr         text NOT NULL,
    sql          text NOT NULL,
    description  text,
    synonyms     text[] NOT NULL DEFAULT '{}',
    data_type    text,
    extra        jsonb NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX semantic_object_lower_name ON nl2sql.semantic_object (table_id, lower(name));
SELECT pg_catalog.pg_extension_config_dump('nl2sql.semantic_object', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.semantic_object_id_seq', '');

-- Relations an object's expression reads: the object is shown only to roles that may SELECT all.
CREATE TABLE nl2sql.semantic_object_relation (
    object_id    bigint NOT NULL REFERENCES nl2sql.semantic_object (id) ON DELETE CASCADE,
    schema_name  name NOT NULL,
    table_name   name NOT NULL,
    PRIMARY KEY (object_id, schema_name, table_name)
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.semantic_object_relation', '');

-- A relationship: left_table(left_columns) joins right_table(right_columns).
CREATE TABLE nl2sql.semantic_relationship (
    id                 bigserial PRIMARY KEY,
    name               text NOT NULL,
    left_table_id      bigint NOT NULL REFERENCES nl2sql.semantic_table (id) ON DELETE CASCADE,
    right_table_id     bigint NOT NULL REFERENCES nl2sql.semantic_table (id) ON DELETE CASCADE,
    left_columns       text[] NOT NULL,
    right_columns      text[] NOT NULL,
    join_type          text NOT NULL DEFAULT 'left_outer' CHECK (join_type IN ('left_outer', 'inner')),
    relationship_type  text NOT NULL DEFAULT 'many_to_one'
                       CHECK (relationship_type IN ('many_to_one', 'one_to_one')),
    CHECK (cardinality(left_columns) > 0 AND cardinality(left_columns) = cardinality(right_columns))
);
CREATE UNIQUE INDEX semantic_relationship_lower_name ON nl2sql.semantic_relationship (lower(name));
SELECT pg_catalog.pg_extension_config_dump('nl2sql.semantic_relationship', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.semantic_relationship_id_seq', '');
