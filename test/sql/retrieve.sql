-- Retrieval on the tiny schema, no model: the value the question names, and the PreSQL
-- prompt's tables.
SELECT v->>'table' AS tbl, v->>'column' AS col, v->>'value' AS value, v->>'how' AS how
  FROM jsonb_array_elements(nl2sql.retrieve('Which ships have Valletta as home harbour?')->'values') v
 WHERE v->>'value' = 'Valletta';
SELECT r->'presql_tables' AS presql_tables, r->'pruning'->'tables_total' AS tables_total
  FROM nl2sql.retrieve('Which ships have Valletta as home harbour?') r;
SELECT r->'linked_tables' AS linked
  FROM nl2sql.retrieve('Which ships have Valletta as home harbour?',
                       presql => 'SELECT s.sname FROM ship s JOIN harbour h ON h.hid = s.home WHERE h.hname = ''Valletta''') r;
\set VERBOSITY terse
SELECT nl2sql.retrieve('');
