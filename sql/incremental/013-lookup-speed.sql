-- Value lookups at scale (README "Value retrieval"): the trigram lookup of nl2sql._match_values
-- searches a narrow table of the value index's distinct strings instead of nl2sql.cell_value.
-- A cell_value row carries its 384-float embedding inline (~1.6 kB, 5 rows a page), so each
-- GIN candidate of `value % phrase` cost one heap page to recheck: at 212,000 values, 10
-- phrases read ~4,000 pages (68 ms a question). Here a page holds ~150 strings, a string shared
-- by many columns is one row, and only the strings that match are looked up in cell_value (by
-- its btree on lower(value)). n counts the cell_value rows with that string; the triggers of
-- sql/idempotent/013-lookup-speed.sql keep it (a string leaves when its count reaches 0).
CREATE TABLE nl2sql.cell_value_text (
    value text PRIMARY KEY,
    n     int NOT NULL CHECK (n > 0)
);
INSERT INTO nl2sql.cell_value_text (value, n)
    SELECT value, count(*) FROM nl2sql.cell_value GROUP BY value;
CREATE INDEX cell_value_text_trgm ON nl2sql.cell_value_text USING gin (value gin_trgm_ops);
-- nothing else searches cell_value by trigram: its GIN index only cost writes
DROP INDEX nl2sql.cell_value_trgm;
