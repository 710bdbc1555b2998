-- pg_dump / pg_restore keeps every user-owned row, and the database keeps working afterwards.
--
-- 1. nl2sql.setting holds only the values a user set; a setting without a row has its declared
--    default (nl2sql.settings shows both). Until 0.1.0 every default was a row, so a restore,
--    whose CREATE EXTENSION inserted the defaults before the dumped rows were copied in, failed
--    on the primary key and brought every changed setting back as its default. The rows that
--    still hold 0.1.0's default are removed; a changed value stays.
DELETE FROM nl2sql.setting s
USING (VALUES
    ('k_examples', '9'), ('candidate_timeout_ms', '5000'), ('max_rows', '10000'),
    ('schemas', 'public'), ('sample_values', '3'), ('presql_votes', 'off'),
    ('question_max_chars', '4000'), ('values_per_column', '1000'), ('value_max_chars', '200'),
    ('llm_timeout_s', '60'), ('llm_max_retries', '2'), ('send_values', 'on'),
    ('prompt_variants', '1'), ('samples_per_model', '1'), ('sample_temperature', '1.0'),
    ('repair_rounds', '3'), ('value_alignment', 'on'), ('align_min_trigram', '0.4'),
    ('align_min_cosine', '0.8'), ('confidence_threshold', '0.2'), ('tie_break', 'fastest'),
    ('selection', 'majority'), ('selection_model', ''), ('hardness_voters', ''),
    ('rewrite_time', 'on'), ('value_top_k', '10'), ('value_trgm_min', '0.5'),
    ('value_vector_min', '0.8'), ('value_vector_phrases', '8'), ('link_value_min', '0.9'),
    ('link_column_min', '0.6'), ('dail_tau', '0.6'), ('dail_candidates', '50'),
    ('prompt_token_budget', '3000')) AS d(key, value)
WHERE s.key = d.key AND s.value = d.value;

-- 2. The sequences behind dumped tables are dumped too: after a restore, new log rows and new
--    examples continue after the restored ids instead of colliding with them.
SELECT pg_catalog.pg_extension_config_dump('nl2sql.query_log_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.example_id_seq', '');
