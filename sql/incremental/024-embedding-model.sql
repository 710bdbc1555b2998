-- Embedding models (docs/embedding-models.md): an OpenAI-compatible /v1/embeddings endpoint
-- declared with nl2sql.add_embedding_model and chosen by setting embedding_model ('local': the
-- in-process all-MiniLM-L6-v2, the default). The index records which model embedded it
-- (nl2sql.setting keys _index_embedding_model and _index_embedding_endpoint); questions are
-- embedded by that model; a forced reindex with another re-embeds everything and makes the
-- vector columns follow its dimensions (halfvec up to 4,000 for the value index).
CREATE TABLE nl2sql.embedding_model (
    name            text PRIMARY KEY CHECK (name <> 'local' AND btrim(name) <> ''),
    base_url        text NOT NULL,                -- e.g. http://gpu-box:8080/v1
    model           text NOT NULL,                -- model id sent to the endpoint
    dimensions      int NOT NULL CHECK (dimensions BETWEEN 1 AND 4000),
    api_key_env     text,                         -- server environment variable holding the key
    batch_size      int NOT NULL DEFAULT 64 CHECK (batch_size BETWEEN 1 AND 2048),
    concurrency     int NOT NULL DEFAULT 1 CHECK (concurrency BETWEEN 1 AND 16),
    timeout_s       float8 NOT NULL DEFAULT 30 CHECK (timeout_s > 0),
    send_dimensions boolean NOT NULL DEFAULT false  -- send `dimensions` (text-embedding-3)
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.embedding_model', '');
