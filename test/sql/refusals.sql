-- What nl2sql refuses to store: writes as verified queries or examples, unknown tables.
\set VERBOSITY terse
SELECT nl2sql.add_verified_query('Remove every ship', 'DELETE FROM ship');
SELECT nl2sql.add_verified_query('Ships', 'SELECT * FROM ship; DROP TABLE ship');
SELECT nl2sql.add_example('Remove every ship', 'DELETE FROM ship', NULL, 'postgres');
SELECT nl2sql.add_verified_query('Boats', 'SELECT * FROM boat');
SELECT count(*) FROM ship;
SELECT nl2sql.add_verified_query('How many ships are there?', 'SELECT count(*) FROM ship') > 0 AS stored;
