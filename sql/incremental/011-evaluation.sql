-- Evaluation on the user's own questions (README "Evaluation on your own questions"): each run
-- of nl2sql.evaluate() asks every verified question the calling role may use through the models
-- (fast path bypassed, the question left out of its own examples) and keeps what happened, so a
-- DBA sees the trend after a change of models or settings; nl2sql.calibrate() learns from the
-- last finished run's judged candidates. Rows are written by users' calls: pg_dump keeps them.

-- One run: who ran it, the settings and models in force, and its totals (filled in when it
-- finishes; finished_at NULL: it stopped part-way or is running).
CREATE TABLE nl2sql.evaluation_run (
    id           bigserial PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    role_name    name NOT NULL,
    note         text,
    settings     jsonb NOT NULL,           -- every setting's effective value
    models       jsonb NOT NULL,           -- the enabled models (name, model, base_url, dialect, ...)
    questions    integer NOT NULL DEFAULT 0 CHECK (questions >= 0),  -- verified queries asked
    judged       integer NOT NULL DEFAULT 0 CHECK (judged >= 0),     -- whose verified SQL ran
    "right"      integer NOT NULL DEFAULT 0 CHECK ("right" >= 0),
    ex           float8,                   -- right / judged
    per_model    jsonb NOT NULL DEFAULT '{}',  -- model -> {questions, right, ex}
    categories   jsonb NOT NULL DEFAULT '{}',  -- miss category -> count
    stopped      text                      -- why the run stopped before its last question
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.evaluation_run', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.evaluation_run_id_seq', '');

-- One verified question of a run. verified_query_id has no foreign key: a run's record stays
-- when the verified query is removed later. right NULL: the verified SQL itself failed (not
-- judged). candidates: the judged FinSQL candidates [{model, group, right}] calibrate() reads.
CREATE TABLE nl2sql.evaluation_result (
    run_id             bigint NOT NULL REFERENCES nl2sql.evaluation_run (id) ON DELETE CASCADE,
    verified_query_id  bigint NOT NULL,
    question           text NOT NULL,
    expected_sql       text NOT NULL,
    chosen_sql         text,
    "right"            boolean,
    category           text,               -- the miss's category (NULL when right)
    detail             text,               -- the miss in words
    per_model          jsonb NOT NULL DEFAULT '{}',  -- model -> right (its first FinSQL candidate)
    candidates         jsonb NOT NULL DEFAULT '[]',
    level              text,               -- the PreSQL's hardness
    log_id             bigint,             -- the call's nl2sql.query_log row
    ms                 float8,             -- the question's wall time
    PRIMARY KEY (run_id, verified_query_id)
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.evaluation_result', '');
