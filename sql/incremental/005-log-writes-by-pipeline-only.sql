-- nl2sql._log_query takes the one-time token the pipeline issues for each log row (only what
-- the pipeline wrote enters nl2sql.query_log): the old six-argument signature, which any role
-- could call to write rows of its choosing, goes; sql/idempotent/002-privileges.sql creates the
-- new one.
DROP FUNCTION IF EXISTS nl2sql._log_query(name, text, text, float8, text, jsonb);
