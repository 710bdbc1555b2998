-- nl2sql._run_candidate gained a byte budget (max_bytes, setting max_result_bytes): the old
-- three-argument signature goes; sql/idempotent/001-functions.sql creates the new one.
DROP FUNCTION IF EXISTS nl2sql._run_candidate(text, text, int);
