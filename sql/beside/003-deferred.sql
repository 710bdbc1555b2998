-- The install without PL/Python only: the configuration functions whose checks need Python
-- (sqlglot, the embedding model) keep the extension's names, signatures, comments and
-- privileges, but record the call in nl2sql.deferred_call (sql/incremental/022-deferred-calls.sql)
-- and return NULL; the client process applies it as the role that made it, through the same
-- nl2sql.udf entry point as the extension's PL/Python body (client/deferred.py: nl2sql apply,
-- nl2sql reindex, a Client's first question, the worker). docs/install.md, "PostgreSQL without
-- PL/Python".

-- Each records its call through nl2sql._defer (sql/idempotent/022-deferred-calls.sql).

CREATE OR REPLACE FUNCTION nl2sql.add_verified_query(question text, sql text, dialect text DEFAULT 'postgres') RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF pg_catalog.btrim(COALESCE(add_verified_query.question, '')) = '' OR pg_catalog.btrim(COALESCE(add_verified_query.sql, '')) = '' THEN
        RAISE EXCEPTION 'nl2sql: add_verified_query: question and sql are required';
    END IF;
    PERFORM nl2sql._defer(current_user, 'nl2sql.add_verified_query(text, text, text)'::regprocedure,
                          pg_catalog.jsonb_build_array(add_verified_query.question, add_verified_query.sql, add_verified_query.dialect));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION nl2sql.add_verified_query(text, text, text) IS
    'nl2sql: add a verified question/SQL pair (a matching question is answered from it without a model call)';
REVOKE EXECUTE ON FUNCTION nl2sql.add_verified_query(text, text, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION nl2sql.add_template(question text, sql text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF pg_catalog.btrim(COALESCE(add_template.question, '')) = '' OR pg_catalog.btrim(COALESCE(add_template.sql, '')) = '' THEN
        RAISE EXCEPTION 'nl2sql: add_template: question and sql are required';
    END IF;
    PERFORM nl2sql._defer(current_user, 'nl2sql.add_template(text, text)'::regprocedure,
                          pg_catalog.jsonb_build_array(add_template.question, add_template.sql));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION nl2sql.add_template(text, text) IS
    'nl2sql: add a parameterised query template (:name parameters bound from the question''s values)';
REVOKE EXECUTE ON FUNCTION nl2sql.add_template(text, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION nl2sql.remove_term(term text) RETURNS boolean
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF pg_catalog.btrim(COALESCE(remove_term.term, '')) = '' THEN
        RAISE EXCEPTION 'nl2sql: remove_term: term is required';
    END IF;
    PERFORM nl2sql._defer(current_user, 'nl2sql.remove_term(text)'::regprocedure,
                          pg_catalog.jsonb_build_array(remove_term.term));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION nl2sql.remove_term(text) IS
    'nl2sql: remove a business term (case-insensitive)';
REVOKE EXECUTE ON FUNCTION nl2sql.remove_term(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION nl2sql.add_example(question text, sql text, db_id text DEFAULT NULL, dialect text DEFAULT 'postgres') RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF pg_catalog.btrim(COALESCE(add_example.question, '')) = '' OR pg_catalog.btrim(COALESCE(add_example.sql, '')) = '' THEN
        RAISE EXCEPTION 'nl2sql: add_example: question and sql are required';
    END IF;
    PERFORM nl2sql._defer(current_user, 'nl2sql.add_example(text, text, text, text)'::regprocedure,
                          pg_catalog.jsonb_build_array(add_example.question, add_example.sql, add_example.db_id, add_example.dialect));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION nl2sql.add_example(text, text, text, text) IS
    'nl2sql: add a question/SQL pair to the example pool (db_id null = this database, checked against the catalog)';
REVOKE EXECUTE ON FUNCTION nl2sql.add_example(text, text, text, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION nl2sql.load_examples(data text, dialect text DEFAULT 'sqlite', tables text DEFAULT NULL) RETURNS jsonb
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF pg_catalog.btrim(COALESCE(load_examples.data, '')) = '' THEN
        RAISE EXCEPTION 'nl2sql: load_examples: data is required';
    END IF;
    PERFORM nl2sql._defer(current_user, 'nl2sql.load_examples(text, text, text)'::regprocedure,
                          pg_catalog.jsonb_build_array(load_examples.data, load_examples.dialect, load_examples.tables));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION nl2sql.load_examples(text, text, text) IS
    'nl2sql: bulk-load Spider/BIRD-format pairs (JSON array or lines), transpiled to PostgreSQL; reports failures';
REVOKE EXECUTE ON FUNCTION nl2sql.load_examples(text, text, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION nl2sql.feedback(log_id bigint, correct boolean, sql text DEFAULT NULL, verify boolean DEFAULT true) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM nl2sql._defer(current_user, 'nl2sql.feedback(bigint, boolean, text, boolean)'::regprocedure,
                          pg_catalog.jsonb_build_array(feedback.log_id, feedback.correct, feedback.sql, feedback.verify));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION nl2sql.feedback(bigint, boolean, text, boolean) IS
    'nl2sql: turn a judged answer (query_log id) into an example and (verify) a verified query';
REVOKE EXECUTE ON FUNCTION nl2sql.feedback(bigint, boolean, text, boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION nl2sql.approve_mined(id bigint, question text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM nl2sql._defer(current_user, 'nl2sql.approve_mined(bigint, text)'::regprocedure,
                          pg_catalog.jsonb_build_array(approve_mined.id, approve_mined.question));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION nl2sql.approve_mined(bigint, text) IS
    'nl2sql: approve a mined question/SQL pair into the example pool and the verified queries';
REVOKE EXECUTE ON FUNCTION nl2sql.approve_mined(bigint, text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION nl2sql.import_semantic_model(model text) RETURNS jsonb
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF pg_catalog.btrim(COALESCE(import_semantic_model.model, '')) = '' THEN
        RAISE EXCEPTION 'nl2sql: import_semantic_model: model is required';
    END IF;
    PERFORM nl2sql._defer(current_user, 'nl2sql.import_semantic_model(text)'::regprocedure,
                          pg_catalog.jsonb_build_array(import_semantic_model.model));
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION nl2sql.import_semantic_model(text) IS
    'nl2sql: import a semantic model (Cortex Analyst YAML): logical tables, dimensions, metrics, relationships, verified queries';
REVOKE EXECUTE ON FUNCTION nl2sql.import_semantic_model(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION nl2sql.prune_query_log() RETURNS jsonb
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM nl2sql._defer(current_user, 'nl2sql.prune_query_log()'::regprocedure,
                          pg_catalog.jsonb_build_array());
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION nl2sql.prune_query_log() IS
    'nl2sql: delete query_log rows older than setting query_log_retention_days (0 keeps every row)';
REVOKE EXECUTE ON FUNCTION nl2sql.prune_query_log() FROM PUBLIC;

-- nl2sql.reindex() runs in the client process here: pg_cron would schedule its stub. Refused,
-- with what schedules it instead.
CREATE OR REPLACE FUNCTION nl2sql.schedule_reindex(schedule text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    RAISE EXCEPTION 'nl2sql: schedule_reindex() would schedule nl2sql.reindex(), which runs in the nl2sql command here (nl2sql is installed beside the database, without PL/Python)'
        USING ERRCODE = 'feature_not_supported',
              HINT = 'run "nl2sql reindex --dsn ..." from cron or a systemd timer, or keep "nl2sql worker --dsn ..." running (docs/install.md, "PostgreSQL without PL/Python")';
END
$$;
COMMENT ON FUNCTION nl2sql.schedule_reindex(text) IS
    'nl2sql: run nl2sql.reindex() in this database on a cron schedule (pg_cron); returns the job id';
REVOKE EXECUTE ON FUNCTION nl2sql.schedule_reindex(text) FROM PUBLIC;
