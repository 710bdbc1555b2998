-- Value lookups of strings that many columns hold (README "Retrieval and schema linking"): a
-- status word in 1,000 tables is one string of nl2sql.cell_value_text but 1,000 rows of
-- nl2sql.cell_value. nl2sql._match_values read every row of each trigram match (9,003 rows,
-- ~70 ms for the phrase "category" at 979,000 values) to keep 3; with the rows of a string in id
-- order it reads them one by one and stops at the first per_phrase ones the role may see.
-- The index serves the exact lookups (lower(value) = ...) as the one it replaces did.
CREATE INDEX cell_value_lower_id ON nl2sql.cell_value (lower(value), id);
DROP INDEX nl2sql.cell_value_lower;
