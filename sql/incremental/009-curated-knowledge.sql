-- Curated knowledge (README "Verified queries, templates and business context"): verified
-- queries and parameterised templates (answered without a model call when a question matches),
-- business terms and database-wide instructions (retrieved into the prompts). Every table here
-- is written by users (the administrative functions), so pg_dump keeps its rows and sequence.

-- Verified queries (kind 'query': a question/SQL pair a person checked) and templates (kind
-- 'template': SQL with named parameters :name). template_sql is the SQL with every bindable
-- literal (a query's) or parameter (a template's) as a named placeholder; parameters describes
-- each one (name, kind value|number, column, data_type, default); question_info holds what the
-- fast path compares with a new question (the verified question's matched value phrases and its
-- numbers, a number parameter's position marked ':name').
CREATE TABLE nl2sql.verified_query (
    id              bigserial PRIMARY KEY,
    kind            text NOT NULL DEFAULT 'query' CHECK (kind IN ('query', 'template')),
    question        text NOT NULL,
    sql             text NOT NULL,
    template_sql    text NOT NULL,
    parameters      jsonb NOT NULL DEFAULT '[]',
    question_info   jsonb NOT NULL DEFAULT '{}',
    masked_question text NOT NULL,
    embedding       vector(384) NOT NULL,
    source          text NOT NULL DEFAULT 'user',   -- user | feedback
    added_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (kind, question, sql)
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.verified_query', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.verified_query_id_seq', '');

-- Relations each verified query reads: shown (and used) only for roles that may SELECT them all.
CREATE TABLE nl2sql.verified_query_relation (
    query_id     bigint NOT NULL REFERENCES nl2sql.verified_query (id) ON DELETE CASCADE,
    schema_name  name NOT NULL,
    table_name   name NOT NULL,
    PRIMARY KEY (query_id, schema_name, table_name)
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.verified_query_relation', '');

-- Business terms: glossary entries, synonyms, metrics. sql_expression (optional) is what the term
-- means in SQL; embedding is of 'term: definition'.
CREATE TABLE nl2sql.term (
    id              bigserial PRIMARY KEY,
    term            text NOT NULL,
    definition      text NOT NULL,
    sql_expression  text,
    embedding       vector(384) NOT NULL,
    added_at        timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX term_lower_term ON nl2sql.term (lower(term));
SELECT pg_catalog.pg_extension_config_dump('nl2sql.term', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.term_id_seq', '');

-- Relations a term's sql_expression reads: the term is shown only to roles that may SELECT them.
CREATE TABLE nl2sql.term_relation (
    term_id      bigint NOT NULL REFERENCES nl2sql.term (id) ON DELETE CASCADE,
    schema_name  name NOT NULL,
    table_name   name NOT NULL,
    PRIMARY KEY (term_id, schema_name, table_name)
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.term_relation', '');

-- Database-wide instructions (rules every prompt should follow), shown to every role.
CREATE TABLE nl2sql.instruction (
    id           bigserial PRIMARY KEY,
    instruction  text NOT NULL UNIQUE,
    embedding    vector(384) NOT NULL,
    added_at     timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.instruction', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.instruction_id_seq', '');

-- feedback() gained `verify` (a judged-correct answer also becomes a verified query): the old
-- signature goes; sql/idempotent/001-functions.sql creates the new one.
DROP FUNCTION IF EXISTS nl2sql.feedback(bigint, boolean, text);
