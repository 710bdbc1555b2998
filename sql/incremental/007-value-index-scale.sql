-- Reindex at scale (README "Indexing"): change detection from the catalog and the statistics
-- counters instead of scans, and columns whose value index is partial.
--
-- schema_table.fingerprint now covers the catalog only (columns, types, keys, comments, value
-- policy, the indexing settings); data_state holds what the statistics say about the data
-- (relation oid, relfilenode, tuples inserted/updated/deleted, for a view those of the relations
-- it reads; nl2sql._data_state). A reindex re-reads a table only when either differs, so the
-- first reindex after this upgrade re-reads every table once.
ALTER TABLE nl2sql.schema_table ADD COLUMN data_state text;

-- values_indexed: distinct string values indexed for the column; values_complete: every distinct
-- value (up to value_max_chars) is indexed (false: more than values_per_column, or a sample of a
-- large table); both NULL for columns without indexed values.
ALTER TABLE nl2sql.schema_column ADD COLUMN values_indexed int,
                                 ADD COLUMN values_complete boolean;
