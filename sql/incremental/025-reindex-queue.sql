-- The queue of a reindex run by several workers (`nl2sql-index --jobs N`, `nl2sql reindex
-- --jobs N`, and `--join` workers on other machines; docs/indexing.md "Several workers"): one
-- row per changed table of a run. A worker claims a row with FOR UPDATE SKIP LOCKED (as pgai's
-- vectorizer workers claim their batches) in the same transaction that indexes the table and
-- marks it done, so a worker that dies rolls its claim back with its work and the row is
-- claimed again by the next worker. weight (the table's estimated rows) orders the claims
-- largest first, so the last table claimed is a small one.
CREATE SEQUENCE nl2sql.reindex_run_seq;
CREATE TABLE nl2sql.reindex_queue (
    run_id      bigint NOT NULL,
    schema_name name NOT NULL,
    table_name  name NOT NULL,
    force       boolean NOT NULL DEFAULT false,
    weight      float8 NOT NULL DEFAULT 0,
    queued_at   timestamptz NOT NULL DEFAULT now(),
    done_at     timestamptz,
    done_by     text,
    result      jsonb,
    PRIMARY KEY (run_id, schema_name, table_name)
);
CREATE INDEX reindex_queue_pending ON nl2sql.reindex_queue (run_id, weight DESC)
    WHERE done_at IS NULL;
REVOKE ALL ON nl2sql.reindex_queue FROM PUBLIC;
REVOKE ALL ON SEQUENCE nl2sql.reindex_run_seq FROM PUBLIC;
