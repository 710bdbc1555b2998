-- The install without PL/Python only: curated knowledge added in SQL with the extension's
-- names, signatures and privileges (sql/idempotent/004-curated.sql). What needs Python (the
-- embedding) is left pending (embedding NULL) and done by the client process: nl2sql reindex,
-- or the first ask of a connection (docs/install.md "PostgreSQL without PL/Python").

-- As the extension's: the text trimmed, kept once; a new or re-added instruction is (re)embedded.
CREATE OR REPLACE FUNCTION nl2sql.add_instruction(instruction text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    t text := pg_catalog.btrim(COALESCE(add_instruction.instruction, ''), E' \t\n\r\f\x0B');
    new_id bigint;
BEGIN
    IF t = '' THEN
        RAISE EXCEPTION 'nl2sql: the instruction is empty'
            USING HINT = 'e.g. SELECT nl2sql.add_instruction(''Amounts are in euros; round them to 2 decimals.'')';
    END IF;
    INSERT INTO nl2sql.instruction AS i (instruction, embedding) VALUES (t, NULL)
        ON CONFLICT ON CONSTRAINT instruction_instruction_key DO UPDATE SET embedding = NULL
        RETURNING i.id INTO new_id;
    RETURN new_id;
END
$$;
COMMENT ON FUNCTION nl2sql.add_instruction(text) IS
    'nl2sql: add a database-wide instruction shown in the prompts';
REVOKE EXECUTE ON FUNCTION nl2sql.add_instruction(text) FROM PUBLIC;

-- As the extension's for a term without sql_expression: term and definition trimmed and
-- required, upserted on the lower-cased term, (re)embedded by the client. A term with an
-- sql_expression needs sqlglot's check of the expression (read-only, over tables the caller may
-- read): a deferred call (sql/beside/003-deferred.sql), applied by the client; returns NULL.
CREATE OR REPLACE FUNCTION nl2sql.add_term(term text, definition text,
                                           sql_expression text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    ws constant text := E' \t\n\r\f\x0B';
    t text := pg_catalog.btrim(COALESCE(add_term.term, ''), ws);
    d text := pg_catalog.btrim(COALESCE(add_term.definition, ''), ws);
    new_id bigint;
BEGIN
    IF t = '' OR d = '' THEN
        RAISE EXCEPTION 'nl2sql: term and definition are required'
            USING HINT = 'e.g. SELECT nl2sql.add_term(''active customer'', ''ordered in the last 90 days'')';
    END IF;
    IF pg_catalog.btrim(COALESCE(add_term.sql_expression, ''), ws) <> '' THEN
        PERFORM nl2sql._defer(current_user, 'nl2sql.add_term(text, text, text)'::regprocedure,
                              pg_catalog.jsonb_build_array(add_term.term, add_term.definition,
                                                           add_term.sql_expression));
        RETURN NULL;
    END IF;
    INSERT INTO nl2sql.term AS x (term, definition, sql_expression, embedding)
        VALUES (t, d, NULL, NULL)
        ON CONFLICT (pg_catalog.lower(term)) DO UPDATE SET term = EXCLUDED.term,
            definition = EXCLUDED.definition, sql_expression = NULL, embedding = NULL,
            added_at = pg_catalog.now()
        RETURNING x.id INTO new_id;
    DELETE FROM nl2sql.term_relation r WHERE r.term_id = new_id;
    RETURN new_id;
END
$$;
COMMENT ON FUNCTION nl2sql.add_term(text, text, text) IS
    'nl2sql: add or update a business term (glossary entry, synonym, metric) shown in the prompts';
REVOKE EXECUTE ON FUNCTION nl2sql.add_term(text, text, text) FROM PUBLIC;
