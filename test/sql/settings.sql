-- Settings: validated and normalised, reset to the default, refused with what is allowed.
\set VERBOSITY terse
SELECT nl2sql.set_setting('k_examples', ' 4 ');
SELECT nl2sql.set_setting('send_values', 'False');
SELECT key, value FROM nl2sql.setting WHERE key IN ('k_examples', 'send_values') ORDER BY key;
SELECT nl2sql.reset_setting('k_examples');
SELECT nl2sql.reset_setting('send_values');
SELECT count(*) FROM nl2sql.setting WHERE key IN ('k_examples', 'send_values');
SELECT nl2sql.set_setting('k_examples', 'many');
SELECT nl2sql.set_setting('k_examples', '-1');
SELECT nl2sql.set_setting('embedder', 'remote');
SELECT name, value FROM nl2sql.settings WHERE name IN ('k_examples', 'embedder') ORDER BY name;
