-- One-time table creation (runs once per CREATE EXTENSION; later versions ALTER these).
-- Everything lives in schema nl2sql; the `vector` type comes from pgvector's schema,
-- which is on the search_path while this script runs.

-- Settings: key/value, documented in README ("Configuration").
CREATE TABLE nl2sql.setting (
    key   text PRIMARY KEY,
    value text NOT NULL
);
INSERT INTO nl2sql.setting (key, value) VALUES
    ('k_examples', '9'),               -- top-k examples by masked-question similarity (PET-SQL uses 9)
    ('candidate_timeout_ms', '5000'),  -- per-candidate execution time limit
    ('max_rows', '10000'),             -- rows fetched per candidate for voting
    ('schemas', 'public'),             -- comma-separated schemas reindex() covers by default
    ('sample_values', '3'),            -- cell values per column shown in the prompt (PET-SQL)
    ('presql_votes', 'off'),           -- PreSQL is a candidate too (replay: no gain, see README)
    ('question_max_chars', '4000'),    -- longer questions are refused
    ('values_per_column', '1000'),     -- distinct string cell values indexed per column
    ('value_max_chars', '200'),        -- longer strings are not indexed as cell values
    ('llm_timeout_s', '60'),           -- default per-call model timeout
    ('llm_max_retries', '2'),          -- retries with backoff on HTTP 429/5xx (openai client)
    ('send_values', 'on'),             -- off: no cell value is sent to any model
    -- generation and selection (README "Generation and selection")
    ('prompt_variants', '1'),          -- FinSQL prompts per model (MCS-SQL multiple prompts)
    ('samples_per_model', '1'),        -- samples per prompt and model (self-consistency)
    ('sample_temperature', '1.0'),     -- temperature for samples of a model configured at 0
    ('repair_rounds', '3'),            -- repair rounds for failing/empty candidates (ReBoost, max 3)
    ('value_alignment', 'on'),         -- snap compared literals to indexed cell values
    ('align_min_trigram', '0.4'),      -- minimum pg_trgm similarity for alignment
    ('align_min_cosine', '0.8'),       -- minimum embedding cosine for alignment
    ('confidence_threshold', '0.2'),   -- result groups below this share are dropped (MCS-SQL)
    ('tie_break', 'fastest'),          -- fastest | priority (the PreSQL writer first)
    ('selection', 'majority'),         -- majority | multiple_choice
    ('selection_model', ''),           -- model for multiple choice ('' = PreSQL writer)
    ('hardness_voters', ''),           -- JSON {level: [models]} for PET-SQL fine-grained voting
    ('rewrite_time', 'on'),            -- relative time in the question made explicit
    ('value_top_k', '10'),             -- cell values retrieved for a question (prompt, linking)
    ('value_trgm_min', '0.5'),         -- pg_trgm similarity a value needs to match a phrase
    ('value_vector_min', '0.8'),       -- embedding cosine similarity a value needs to match a phrase
    ('value_vector_phrases', '8'),     -- question phrases (at most) looked up by embedding
    ('link_value_min', '0.9'),         -- score a matched value needs to link its column (exact always)
    ('link_column_min', '0.6'),        -- question/column embedding similarity that links a column
    ('dail_tau', '0.6'),               -- DAIL selection: skeleton Jaccard with PreSQL's, at least
    ('dail_candidates', '50'),         -- examples re-ranked by DAIL selection
    ('prompt_token_budget', '3000');   -- PreSQL prompt above this (estimated tokens) gets a pruned schema
SELECT pg_catalog.pg_extension_config_dump('nl2sql.setting', '');

-- Models: any OpenAI-compatible endpoint. The API key is NOT stored: api_key_env names an
-- environment variable of the server process.
CREATE TABLE nl2sql.model (
    name        text PRIMARY KEY,
    base_url    text,                         -- null = the openai client's default endpoint
    model       text NOT NULL,                -- model id sent to the endpoint
    api_key_env text,                         -- server environment variable holding the key
    temperature float8 NOT NULL DEFAULT 0,
    timeout_s   float8,                       -- null = setting llm_timeout_s
    max_tokens  int NOT NULL DEFAULT 512,
    position    int NOT NULL DEFAULT 0,       -- lowest position writes the PreSQL
    enabled     boolean NOT NULL DEFAULT true,
    dialect     text NOT NULL DEFAULT 'postgres',  -- SQL dialect it writes (transpiled to postgres)
    CHECK (temperature >= 0 AND temperature <= 2),
    CHECK (dialect IN ('postgres', 'sqlite', 'mysql')),
    CHECK (timeout_s IS NULL OR timeout_s > 0)
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.model', '');

-- Schema index: tables, columns, types, keys, comments, sample cell values.
CREATE TABLE nl2sql.schema_table (
    schema_name  name NOT NULL,
    table_name   name NOT NULL,
    comment      text,
    n_rows       bigint,
    fingerprint  text,                      -- changes when columns/keys/comments change
    indexed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schema_name, table_name)
);
CREATE TABLE nl2sql.schema_column (
    schema_name   name NOT NULL,
    table_name    name NOT NULL,
    column_name   name NOT NULL,
    ordinal       int NOT NULL,
    data_type     text NOT NULL,
    is_primary_key boolean NOT NULL DEFAULT false,
    comment       text,
    sample_values text[] NOT NULL DEFAULT '{}',
    embedding     vector(384),
    PRIMARY KEY (schema_name, table_name, column_name),
    FOREIGN KEY (schema_name, table_name) REFERENCES nl2sql.schema_table ON DELETE CASCADE
);
CREATE TABLE nl2sql.schema_fk (
    schema_name  name NOT NULL,
    table_name   name NOT NULL,
    constraint_name name NOT NULL,
    columns      name[] NOT NULL,
    ref_schema   name NOT NULL,
    ref_table    name NOT NULL,
    ref_columns  name[] NOT NULL,
    PRIMARY KEY (schema_name, table_name, constraint_name),
    FOREIGN KEY (schema_name, table_name) REFERENCES nl2sql.schema_table ON DELETE CASCADE
);

-- Value index: distinct string cell values, embedded (all-MiniLM-L6-v2, 384-d) and trigram-indexed.
CREATE TABLE nl2sql.cell_value (
    id          bigserial PRIMARY KEY,
    schema_name name NOT NULL,
    table_name  name NOT NULL,
    column_name name NOT NULL,
    value       text NOT NULL,
    embedding   vector(384) NOT NULL,
    UNIQUE (schema_name, table_name, column_name, value),
    FOREIGN KEY (schema_name, table_name) REFERENCES nl2sql.schema_table ON DELETE CASCADE
);
CREATE INDEX cell_value_embedding_hnsw ON nl2sql.cell_value USING hnsw (embedding vector_cosine_ops);
CREATE INDEX cell_value_trgm ON nl2sql.cell_value USING gin (value gin_trgm_ops);
CREATE INDEX cell_value_lower ON nl2sql.cell_value (lower(value));

-- Example pool: question/SQL pairs, with the masked question's embedding (PET-SQL §3.2).
CREATE TABLE nl2sql.example (
    id              bigserial PRIMARY KEY,
    db_id           text NOT NULL,            -- the schema the example was written for
    question        text NOT NULL,
    sql             text NOT NULL,            -- PostgreSQL
    masked_question text,
    sql_skeleton    text,
    schema          jsonb NOT NULL DEFAULT '{}',   -- {table: [columns]} of db_id, for masking
    source          text NOT NULL DEFAULT 'user',  -- builtin | user | load | feedback
    embedding       vector(384),
    added_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (db_id, question, sql)
);
CREATE INDEX example_embedding_hnsw ON nl2sql.example USING hnsw (embedding vector_cosine_ops);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.example', $$WHERE source <> 'builtin'$$);

-- Query log: one row per nl2sql()/ask()/explain() call, with the whole trace.
CREATE TABLE nl2sql.query_log (
    id          bigserial PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now(),
    role_name   name NOT NULL DEFAULT current_user,
    question    text NOT NULL,
    sql         text,                         -- the chosen SQL (null on error)
    confidence  float8,
    error       text,
    trace       jsonb NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.query_log', '');
