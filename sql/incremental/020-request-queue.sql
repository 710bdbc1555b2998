-- The request queue (docs/install.md, "The request queue"): a SQL client submits a question
-- (nl2sql.submit), a worker beside the database answers it as the submitting role
-- (nl2sql worker), the client reads the answer (nl2sql.answer). Rows are short-lived (setting
-- request_expire_s) and not dumped. Only the functions of sql/idempotent/020-request-queue.sql
-- read and write it for ordinary roles, each role its own rows.
CREATE TABLE nl2sql.request (
    id            bigserial PRIMARY KEY,
    role_name     name NOT NULL,
    question      text NOT NULL,
    evidence      text,
    conversation  text,
    submitted_at  timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    state         text NOT NULL DEFAULT 'queued'
                  CHECK (state IN ('queued', 'running', 'done', 'failed', 'expired')),
    claimed_at    timestamptz,
    worker        text,
    answered_at   timestamptz,
    sql           text,
    columns       jsonb,
    rows          jsonb,
    row_count     bigint,
    confidence    float8,
    log_id        bigint,
    error         text
);
CREATE INDEX request_open ON nl2sql.request (id) WHERE state IN ('queued', 'running');
CREATE INDEX request_role ON nl2sql.request (role_name, id);
REVOKE ALL ON nl2sql.request FROM PUBLIC;
