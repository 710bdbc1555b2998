-- The query log's retention (setting query_log_retention_days; nl2sql.prune_query_log() and the
-- end of every reindex delete older rows, oldest first, 10,000 a statement): rows are found by
-- their age without reading the whole log.
CREATE INDEX query_log_created_at ON nl2sql.query_log (created_at);
