-- The request queue's functions (table: sql/incremental/020-request-queue.sql). PL/pgSQL in
-- both modes: with the extension a worker is not needed (SELECT nl2sql(...) answers at once),
-- but the queue works the same. A request belongs to the role that submitted it
-- (nl2sql._acting_role: never a role the session may not act as); each role sees only its own.

-- Writes the request row for `who` and wakes the workers (NOTIFY nl2sql_request). Callable by
-- any role (as nl2sql._forget_conversation): it acts only for nl2sql._acting_role(who).
CREATE OR REPLACE FUNCTION nl2sql._submit(who name, question text, evidence text,
                                          conversation text)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id bigint;
    max_chars int := (SELECT s.value::int FROM nl2sql.settings s WHERE s.name = 'question_max_chars');
BEGIN
    IF pg_catalog.btrim(COALESCE(_submit.question, '')) = '' THEN
        RAISE EXCEPTION 'nl2sql.submit: the question is empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.length(_submit.question) > max_chars THEN
        RAISE EXCEPTION 'nl2sql.submit: the question has % characters, more than % (setting question_max_chars)',
            pg_catalog.length(_submit.question), max_chars USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO nl2sql.request (role_name, question, evidence, conversation)
        VALUES (nl2sql._acting_role(_submit.who), _submit.question, _submit.evidence, _submit.conversation)
        RETURNING request.id INTO id;
    PERFORM pg_catalog.pg_notify('nl2sql_request', id::text);
    RETURN id;
END
$$;

CREATE OR REPLACE FUNCTION nl2sql.submit(question text, evidence text DEFAULT NULL,
                                         conversation text DEFAULT NULL)
RETURNS bigint LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT AS $$
    SELECT nl2sql._submit(current_user, question, evidence, conversation)
$$;
COMMENT ON FUNCTION nl2sql.submit(text, text, text) IS
    'nl2sql: queue a question for the worker beside the database (answered as your role); returns the request id for nl2sql.answer()';

-- One request of `who`, or no row (another role's request looks like one that does not exist).
-- A request no worker claimed within request_expire_s expires; one claimed by a worker that
-- vanished (longer ago than request_time_limit_s + request_expire_s) fails.
CREATE OR REPLACE FUNCTION nl2sql._request(who name, request_id bigint)
RETURNS SETOF nl2sql.request LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    expire interval := pg_catalog.make_interval(secs => (SELECT s.value::int FROM nl2sql.settings s
                                                         WHERE s.name = 'request_expire_s'));
BEGIN
    UPDATE nl2sql.request r SET state = 'expired', answered_at = pg_catalog.clock_timestamp(),
           error = 'nl2sql: no worker answered this request in time (setting request_expire_s); is nl2sql worker running?'
     WHERE r.id = _request.request_id AND r.state = 'queued'
       AND r.submitted_at < pg_catalog.clock_timestamp() - expire;
    UPDATE nl2sql.request r SET state = 'failed', answered_at = pg_catalog.clock_timestamp(),
           error = 'nl2sql worker: the worker answering this request stopped'
     WHERE r.id = _request.request_id AND r.state = 'running'
       AND r.claimed_at < pg_catalog.clock_timestamp() - expire - pg_catalog.make_interval(
           secs => (SELECT s.value::int FROM nl2sql.settings s WHERE s.name = 'request_time_limit_s'));
    RETURN QUERY SELECT * FROM nl2sql.request r
     WHERE r.id = _request.request_id AND r.role_name = nl2sql._acting_role(_request.who);
END
$$;

-- The answer of one of your requests, waiting up to wait_s seconds for the worker (in short
-- sleeps: each look is a new statement, so it sees the worker's commit under READ COMMITTED).
CREATE OR REPLACE FUNCTION nl2sql.answer(id bigint, wait_s float8 DEFAULT 30)
RETURNS TABLE (request_id bigint, state text, question text, sql text, columns jsonb, rows jsonb,
               row_count bigint, confidence float8, error text, log_id bigint,
               submitted_at timestamptz, answered_at timestamptz)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    r nl2sql.request;
    deadline timestamptz := pg_catalog.clock_timestamp()
                            + pg_catalog.make_interval(secs => GREATEST(COALESCE(answer.wait_s, 0), 0));
BEGIN
    LOOP
        SELECT * INTO r FROM nl2sql._request(current_user, answer.id);
        IF NOT FOUND THEN
            RAISE EXCEPTION 'nl2sql.answer: no request % of role %', answer.id, current_user
                USING ERRCODE = 'no_data_found',
                      HINT = 'pass an id nl2sql.submit() returned to this role; nl2sql.my_requests lists yours';
        END IF;
        EXIT WHEN r.state NOT IN ('queued', 'running') OR pg_catalog.clock_timestamp() >= deadline;
        PERFORM pg_catalog.pg_sleep(LEAST(0.2, GREATEST(0.01,
            EXTRACT(EPOCH FROM deadline - pg_catalog.clock_timestamp())::float8)));
    END LOOP;
    RETURN QUERY SELECT r.id, r.state, r.question, r.sql, r.columns, r.rows, r.row_count,
                        r.confidence, r.error, r.log_id, r.submitted_at, r.answered_at;
END
$$;
COMMENT ON FUNCTION nl2sql.answer(bigint, float8) IS
    'nl2sql: the answer of your request (SQL, rows as jsonb, or the error), waiting up to wait_s seconds for the worker';

-- Your requests, newest first.
CREATE OR REPLACE VIEW nl2sql.my_requests WITH (security_barrier) AS
    SELECT id, state, question, submitted_at, answered_at, sql, row_count, confidence, error
    FROM nl2sql.request WHERE role_name = current_user;
GRANT SELECT ON nl2sql.my_requests TO PUBLIC;
