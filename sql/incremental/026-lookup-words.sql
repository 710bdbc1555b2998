-- Value lookups at 1,000,000 values (docs/benchmarks.md "Indexing at scale"): a phrase's trigram
-- lookup reads the posting lists of all its trigrams over every string (14 ms a phrase at
-- 820,000 strings, 2-4 phrases a question). nl2sql._match_values first looks the phrase's words
-- up in this index (the strings' English stems without stop words, as an array: one short
-- posting list a word) and scores those strings by trigram similarity; the trigram indexes are
-- read only for a phrase the words did not resolve that has a word no string holds.
CREATE INDEX cell_value_text_words ON nl2sql.cell_value_text
    USING gin (pg_catalog.tsvector_to_array(pg_catalog.to_tsvector('pg_catalog.english'::regconfig, value)));
