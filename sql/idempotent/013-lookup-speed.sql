-- nl2sql.cell_value_text (sql/incremental/013-lookup-speed.sql) follows nl2sql.cell_value: one
-- row per distinct string with the number n of cell_value rows holding it. Statement-level
-- triggers with transition tables: one statement per reindex batch, not per row. Concurrent
-- writers keep the counts exact: a count changes under its row lock (UPDATE, DELETE,
-- INSERT ... ON CONFLICT DO UPDATE wait for each other and recheck), and old rows are locked in
-- value order first, so two batches cannot deadlock. An UPDATE of cell_value counts as its old
-- rows deleted and its new rows inserted. The writer of cell_value (the index owner: reindex,
-- the DDL triggers) writes the mirror with its own rights.
CREATE OR REPLACE FUNCTION nl2sql._cell_value_text_sync() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE nl2sql.cell_value_text;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        PERFORM 1 FROM nl2sql.cell_value_text t
          WHERE t.value IN (SELECT r.value FROM old_rows r) ORDER BY t.value FOR UPDATE;
        DELETE FROM nl2sql.cell_value_text t
         USING (SELECT r.value, count(*) AS k FROM old_rows r GROUP BY r.value) d
         WHERE t.value = d.value AND t.n <= d.k;
        UPDATE nl2sql.cell_value_text t SET n = t.n - d.k
          FROM (SELECT r.value, count(*) AS k FROM old_rows r GROUP BY r.value) d
         WHERE t.value = d.value;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO nl2sql.cell_value_text AS t (value, n)
        SELECT r.value, count(*) FROM new_rows r GROUP BY r.value ORDER BY r.value
        ON CONFLICT (value) DO UPDATE SET n = t.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER cell_value_text_insert AFTER INSERT ON nl2sql.cell_value
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION nl2sql._cell_value_text_sync();
CREATE OR REPLACE TRIGGER cell_value_text_delete AFTER DELETE ON nl2sql.cell_value
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION nl2sql._cell_value_text_sync();
CREATE OR REPLACE TRIGGER cell_value_text_update AFTER UPDATE ON nl2sql.cell_value
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION nl2sql._cell_value_text_sync();
CREATE OR REPLACE TRIGGER cell_value_text_truncate AFTER TRUNCATE ON nl2sql.cell_value
    FOR EACH STATEMENT EXECUTE FUNCTION nl2sql._cell_value_text_sync();

REVOKE ALL ON nl2sql.cell_value_text FROM PUBLIC;
REVOKE ALL ON FUNCTION nl2sql._cell_value_text_sync() FROM PUBLIC;
