-- Deferred calls (sql/incremental/022-deferred-calls.sql): the configuration functions of the
-- install beside the database (sql/beside/003-deferred.sql) record their calls through this
-- helper. In both modes so that both have the same functions; the extension never calls it.

-- Records a call for role ``who`` (nl2sql._acting_role: only a role the session may act as) when
-- that role may EXECUTE ``fn``; the NOTICE says where it went. SECURITY DEFINER: the only writer
-- of nl2sql.deferred_call for ordinary roles.
CREATE OR REPLACE FUNCTION nl2sql._defer(who name, fn regprocedure, args jsonb) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r name := nl2sql._acting_role(who);
    fname name;
    new_id bigint;
BEGIN
    SELECT p.proname INTO fname FROM pg_catalog.pg_proc p WHERE p.oid = fn;
    IF NOT pg_catalog.has_function_privilege(r, fn, 'EXECUTE') THEN
        RAISE EXCEPTION 'nl2sql: role % may not call nl2sql.%', r, fname
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'the administrator grants it: GRANT EXECUTE ON FUNCTION ' || fn::text || ' TO ' || pg_catalog.quote_ident(r);
    END IF;
    INSERT INTO nl2sql.deferred_call (function_name, args, role_name) VALUES (fname, args, r)
        RETURNING id INTO new_id;
    RAISE NOTICE 'nl2sql: %() queued as deferred call %; applied as role % by the next nl2sql reindex, nl2sql apply, a Client''s first ask, or the worker; see nl2sql.my_deferred_calls',
        fname, new_id, r;
    RETURN new_id;
END
$$;
GRANT EXECUTE ON FUNCTION nl2sql._defer(name, regprocedure, jsonb) TO PUBLIC;
