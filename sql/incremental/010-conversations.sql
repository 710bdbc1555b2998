-- Follow-up questions: a call's conversation key (any text the caller chooses) is kept with its
-- query_log row; a conversation's turns are the rows of one role with one key.
ALTER TABLE nl2sql.query_log ADD COLUMN conversation text;
CREATE INDEX query_log_conversation ON nl2sql.query_log (role_name, conversation, id)
    WHERE conversation IS NOT NULL;
-- nl2sql(), nl2sql.ask(), nl2sql.explain() and their internal bodies gained the parameter
-- conversation, and nl2sql._log_query stores it: the old signatures go;
-- sql/idempotent/001-functions.sql and 002-privileges.sql create the new ones.
DROP FUNCTION IF EXISTS public.nl2sql(text, text, text);
DROP FUNCTION IF EXISTS nl2sql.ask(text, text, text);
DROP FUNCTION IF EXISTS nl2sql.explain(text, text, text);
DROP FUNCTION IF EXISTS nl2sql._nl2sql(text, text, text);
DROP FUNCTION IF EXISTS nl2sql._ask(text, text, text);
DROP FUNCTION IF EXISTS nl2sql._explain(text, text, text);
DROP FUNCTION IF EXISTS nl2sql._log_query(name, text, text, float8, text, jsonb);
DROP FUNCTION IF EXISTS nl2sql._log_query(text, name, text, text, float8, text, jsonb);
