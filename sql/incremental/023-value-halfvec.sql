-- The value index at 1,000,000 values (docs/benchmarks.md "Value index: halfvec storage"):
-- nl2sql.cell_value's embeddings stored as halfvec(384) (pgvector >= 0.7; 2 bytes a dimension
-- instead of 4): a row is ~0.8 kB instead of ~1.6 kB, so the table, its TOAST-free heap and the
-- HNSW graph (which holds a copy of each vector) are half as large, a lookup reads half the
-- pages and the index build moves half the bytes. Cosines change by less than halfvec's
-- precision (~1e-3, tests/upgrade/test_upgrade.py) while value_vector_min is 0.8.
-- Every comparison casts the question's vector to halfvec (nl2sql._match_values,
-- generation/alignment.py), so the halfvec_cosine_ops index serves it.
-- The view over the column is dropped for the change of type; sql/idempotent/002-privileges.sql
-- creates it again (with its grant) in the same install or update.
DROP VIEW IF EXISTS nl2sql.visible_cell_value;
-- IF EXISTS: a reindex stopped between its bulk start and end leaves the index missing
DROP INDEX IF EXISTS nl2sql.cell_value_embedding_hnsw;
ALTER TABLE nl2sql.cell_value ALTER COLUMN embedding TYPE halfvec(384)
    USING embedding::halfvec(384);
CREATE INDEX cell_value_embedding_hnsw ON nl2sql.cell_value
    USING hnsw (embedding halfvec_cosine_ops);
