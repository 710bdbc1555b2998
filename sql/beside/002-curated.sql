-- The install without PL/Python only: curated knowledge added in SQL with the extension's
-- names, signatures and privileges (sql/idempotent/004-curated.sql). What needs Python (the
-- embedding) is left pending (embedding NULL) and done by the client process: nl2sql reindex,
-- or the first ask of a connection (docs/install.md "PostgreSQL without PL/Python").

-- As the extension's: the text trimmed, kept once; a new or re-added instruction is (re)embedded.
CREATE OR REPLACE FUNCTION nl2sql.add_instruction(instruction text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    t text := pg_catalog.btrim(COALESCE(add_instruction.instruction, ''), E' \t\n\r\f\v');
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
