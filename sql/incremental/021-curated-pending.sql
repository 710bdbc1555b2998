-- Curated knowledge added beside the database (nl2sql install, no PL/Python): the PL/pgSQL
-- add_instruction and add_term store the row with no embedding, and the client process (nl2sql reindex, the
-- first ask of a connection) embeds it. In the extension the embedding is filled at once, as
-- before; retrieval skips a row whose embedding is still NULL.
ALTER TABLE nl2sql.instruction ALTER COLUMN embedding DROP NOT NULL;
ALTER TABLE nl2sql.term ALTER COLUMN embedding DROP NOT NULL;
