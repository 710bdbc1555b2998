-- Deferred calls (docs/install.md, "PostgreSQL without PL/Python"): beside the database the
-- configuration functions whose checks need Python (sqlglot, the embedding model) record the
-- call here (sql/beside/003-deferred.sql); the client process applies it as the role that made
-- it (nl2sql apply, nl2sql reindex, a Client's first question, the worker). Only nl2sql's
-- functions and views read and write it for ordinary roles, each role its own rows.
CREATE TABLE nl2sql.deferred_call (
    id             bigserial PRIMARY KEY,
    function_name  name NOT NULL,
    args           jsonb NOT NULL DEFAULT '[]',
    role_name      name NOT NULL,
    called_at      timestamptz NOT NULL DEFAULT pg_catalog.clock_timestamp(),
    status         text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'refused')),
    result         jsonb,
    error          text,
    done_at        timestamptz
);
CREATE INDEX deferred_call_pending ON nl2sql.deferred_call (id) WHERE status = 'pending';
REVOKE ALL ON nl2sql.deferred_call FROM PUBLIC;

-- Your deferred calls, with what became of them.
CREATE VIEW nl2sql.my_deferred_calls WITH (security_barrier) AS
    SELECT id, function_name, args, called_at, status, result, error, done_at
    FROM nl2sql.deferred_call WHERE role_name = current_user;
GRANT SELECT ON nl2sql.my_deferred_calls TO PUBLIC;

-- Every role's deferred calls: for the administrator (not PUBLIC).
CREATE VIEW nl2sql.deferred_calls AS
    SELECT id, function_name, args, role_name, called_at, status, result, error, done_at
    FROM nl2sql.deferred_call;
REVOKE ALL ON nl2sql.deferred_calls FROM PUBLIC;
