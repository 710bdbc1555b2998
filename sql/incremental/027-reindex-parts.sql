-- A large table in several parts (docs/indexing.md "Several workers"): a reindex by N workers
-- queues a table of at least `reindex_part_rows` rows (its statistics' estimate) as N rows of
-- nl2sql.reindex_queue, part 0 .. N - 1. Each worker that claims a part reads the table and
-- writes the cell values whose string falls in its part (a CRC-32 of the string modulo parts);
-- part 0 also writes the table's catalog rows and deletes its values no longer there. The
-- table's data state is recorded only when every part is done (nl2sql._reindex_claim), so a
-- run that fails halfway leaves the table to be read again by the next reindex.
ALTER TABLE nl2sql.reindex_queue
    ADD COLUMN part int NOT NULL DEFAULT 0,
    ADD COLUMN parts int NOT NULL DEFAULT 1;
ALTER TABLE nl2sql.reindex_queue DROP CONSTRAINT reindex_queue_pkey,
    ADD PRIMARY KEY (run_id, schema_name, table_name, part);
DROP FUNCTION IF EXISTS nl2sql._reindex_enqueue(text[], boolean);
