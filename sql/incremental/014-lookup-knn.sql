-- Value lookups at 1,000,000 values (README "Retrieval and schema linking"): a trigram lookup of
-- a short phrase reads only short strings. pg_trgm's GIN index cannot bound a string's length,
-- so `value % 'Slung'` returned every string sharing half of the word's trigrams (4,429
-- candidates at 820,221 strings, each rechecked on its heap page: 15-40 ms a word). Since
-- similarity(v, p) <= n(p) / n(v) for the numbers n of distinct trigrams (pg_trgm's Jaccard
-- measure: |v ∩ p| / |v ∪ p| with |v ∩ p| <= n(p)), a string can reach similarity t only when
-- n(v) <= n(p) / t; n_trgm stores n(v), and the partial index below holds the strings with at
-- most 20 trigrams (a word of up to 9 letters looked up with t = 0.5; 16 % of the strings
-- in bench/scale.py's index), which nl2sql._match_values searches for a phrase whose bound
-- n(p) / t is within it. Same matches as the whole index (tests/test_retrieval.py).
ALTER TABLE nl2sql.cell_value_text
    ADD COLUMN n_trgm int GENERATED ALWAYS AS
        (COALESCE(pg_catalog.array_length(show_trgm(value), 1), 0)) STORED;
CREATE INDEX cell_value_text_trgm_short ON nl2sql.cell_value_text
    USING gin (value gin_trgm_ops) WHERE n_trgm <= 20;
