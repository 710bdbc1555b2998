-- What each model's endpoint takes, in the providers' own words (docs/models.md); NULL means
-- "decide" (known from the model name, else learned from the endpoint's refusals).
ALTER TABLE nl2sql.model
    ADD COLUMN cap_parameter text CHECK (cap_parameter IN ('max_tokens', 'max_completion_tokens')),
    ADD COLUMN send_temperature boolean,
    ADD COLUMN send_n boolean,
    ADD COLUMN reasoning_effort text,
    ADD COLUMN context_window int CHECK (context_window > 0);
-- The output cap becomes "decide" when unset: 512 for a model that answers at once, the
-- setting llm_reasoning_max_tokens for one that thinks. Rows that hold the old default (512)
-- keep it: a reply cut by it while thinking raises it once (docs/models.md).
ALTER TABLE nl2sql.model ALTER COLUMN max_tokens DROP NOT NULL, ALTER COLUMN max_tokens DROP DEFAULT;
ALTER TABLE nl2sql.model ADD CHECK (max_tokens IS NULL OR max_tokens > 0);
-- add_model gained max_completion_tokens, reasoning_effort, send_temperature, send_n and
-- context_window (defaults null): the old signature goes, the new one is in idempotent/.
DROP FUNCTION IF EXISTS nl2sql.add_model(text, text, text, text, float8, float8, int, int, text, numeric, numeric);
