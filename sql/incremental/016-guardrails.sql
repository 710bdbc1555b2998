-- Guardrails a DBA sets (docs/guardrails.md): prices per model, per-role quotas and the usage
-- they are checked against.

-- Prices in US dollars per million tokens (null: unknown, no cost is computed for the model).
ALTER TABLE nl2sql.model
    ADD COLUMN price_in_per_mtok numeric CHECK (price_in_per_mtok IS NULL OR price_in_per_mtok >= 0),
    ADD COLUMN price_out_per_mtok numeric CHECK (price_out_per_mtok IS NULL OR price_out_per_mtok >= 0);

-- add_model gained price_in_per_mtok and price_out_per_mtok (defaults null): the old signature
-- goes, the new one (sql/idempotent/001-functions.sql) takes every call the old one took.
DROP FUNCTION IF EXISTS nl2sql.add_model(text, text, text, text, float8, float8, int, int, text);

-- One row per role with its own quota; the row of role 'public' (no role can be named so) is the
-- default of every role without its own. Null: no limit.
CREATE TABLE nl2sql.quota (
    role_name            name PRIMARY KEY,
    questions_per_minute int CHECK (questions_per_minute IS NULL OR questions_per_minute >= 0),
    tokens_per_day       bigint CHECK (tokens_per_day IS NULL OR tokens_per_day >= 0),
    updated_at           timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.quota', '');

-- What each role used per day (UTC): questions, tokens (those neither reported by the endpoint
-- nor counted by a tokenizer, but estimated from the text's length, also in estimated_tokens),
-- cost; and the current minute's questions (the questions_per_minute window).
CREATE TABLE nl2sql.usage_day (
    role_name         name NOT NULL,
    day               date NOT NULL,
    questions         bigint NOT NULL DEFAULT 0 CHECK (questions >= 0),
    prompt_tokens     bigint NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens bigint NOT NULL DEFAULT 0 CHECK (completion_tokens >= 0),
    estimated_tokens  bigint NOT NULL DEFAULT 0 CHECK (estimated_tokens >= 0),
    cost_usd          numeric NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    minute_start      timestamptz,
    minute_questions  int NOT NULL DEFAULT 0,
    PRIMARY KEY (role_name, day)
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.usage_day', '');
