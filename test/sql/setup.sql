-- The extension and a tiny schema for the other files (pg_regress runs them in order, in one
-- fresh database). The Python package must be importable by the server (setting nl2sql.venv).
SET client_min_messages = warning;
CREATE EXTENSION nl2sql CASCADE;
RESET client_min_messages;
SELECT extversion = default_version AS current
  FROM pg_extension e JOIN pg_available_extensions a ON a.name = e.extname
 WHERE extname = 'nl2sql';
CREATE TABLE harbour (hid int PRIMARY KEY, hname text NOT NULL, country text);
CREATE TABLE ship (sid int PRIMARY KEY, sname text NOT NULL,
                   home int REFERENCES harbour (hid), tonnage int);
COMMENT ON TABLE ship IS 'ships and their home harbours';
INSERT INTO harbour VALUES (1, 'Valletta', 'Malta'), (2, 'Kotor', 'Montenegro');
INSERT INTO ship VALUES (1, 'Sea Lark', 1, 1200), (2, 'Blue Heron', 2, 800),
                        (3, 'Morning Star', 1, 450);
SELECT nl2sql.reindex() IS NOT NULL AS indexed;
SELECT table_name FROM nl2sql.schema_table ORDER BY 1;
