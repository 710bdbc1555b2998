-- Model configuration: what add_model refuses, and nl2sql() without a model.
\set VERBOSITY terse
SELECT nl2sql.add_model('', 'gpt-4o');
SELECT nl2sql.add_model('gpt', '');
SELECT nl2sql.add_model('gpt', 'gpt-4o', api_key_env => 'sk-abcdefghijklmnopqrstuvwxyz012345');
SELECT nl2sql.add_model('gpt', 'gpt-4o', dialect => 'oracle');
SELECT count(*) FROM nl2sql.model;
SELECT nl2sql('How many ships are there?');
SELECT nl2sql.add_model('gpt', 'gpt-4o', base_url => 'http://127.0.0.1:9/v1',
                        api_key_env => 'NL2SQL_REGRESS_KEY');
SELECT name, model, base_url, api_key_env, dialect, enabled FROM nl2sql.model;
SELECT nl2sql.remove_model('gpt');
SELECT count(*) FROM nl2sql.model;
