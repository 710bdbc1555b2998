-- Query-log mining (README "Mining the query log"): the frequent read-only queries of
-- pg_stat_statements with the question a model wrote for each, pending until a DBA approves
-- (into the example pool and the verified queries) or rejects them. Written by users (through
-- nl2sql.mine_queries / approve_mined / reject_mined), so pg_dump keeps its rows and sequence.
--
-- query: the statement's text as pg_stat_statements shows it (constants normalised to $1, $2…);
-- sql: what is added on approval (kind 'query': the query itself; kind 'template': each $n
-- renamed to a named parameter :name after the column it is compared with); parameters: the
-- template's parameters (name, kind, column, data_type); status: pending (question written,
-- waiting for a DBA), approved, rejected, failed (the model gave no usable question: error says
-- why; the next mine_queries asks again).
CREATE TABLE nl2sql.mined_query (
    id            bigserial PRIMARY KEY,
    queryid       bigint,
    query         text NOT NULL,
    kind          text NOT NULL DEFAULT 'query' CHECK (kind IN ('query', 'template')),
    sql           text NOT NULL,
    parameters    jsonb NOT NULL DEFAULT '[]',
    question      text,
    calls         bigint NOT NULL DEFAULT 0,
    status        text NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'approved', 'rejected', 'failed')),
    model         text,
    error         text,
    mined_at      timestamptz NOT NULL DEFAULT now(),
    decided_at    timestamptz,
    decided_by    name,
    example_id    bigint,
    verified_id   bigint
);
CREATE UNIQUE INDEX mined_query_sql ON nl2sql.mined_query (md5(sql));
CREATE INDEX mined_query_queryid ON nl2sql.mined_query (queryid);
SELECT pg_catalog.pg_extension_config_dump('nl2sql.mined_query', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.mined_query_id_seq', '');
