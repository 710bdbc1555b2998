-- Guardrails a DBA sets (docs/guardrails.md): the plan-cost limit's EXPLAIN, per-role quotas
-- and the usage view.

-- The planner's estimate of a candidate, before it runs (generation/execute.py plan_checked;
-- explain_sql plans through it too; the planner runs stable and immutable functions, so the
-- caller guards it as a run: watchdog, advisory locks released):
-- EXPLAIN (FORMAT JSON) as the caller, read-only, over the caller's search_path, in the
-- subtransaction the caller rolls back (as nl2sql._run_candidate). The query is not executed.
CREATE OR REPLACE FUNCTION nl2sql._explain_candidate(candidate text, caller_search_path text)
RETURNS text LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    plan text;
BEGIN
    SET LOCAL transaction_read_only = on;
    PERFORM pg_catalog.set_config('search_path', caller_search_path, true);
    EXECUTE 'EXPLAIN (FORMAT JSON) ' || candidate INTO plan;
    RETURN plan;
END
$$;

-- A DBA's quota for a role ('public': the default of every role without its own); null = no
-- limit. Administrative (not for PUBLIC).
CREATE OR REPLACE FUNCTION nl2sql.set_quota(role name, questions_per_minute int DEFAULT NULL,
                                            tokens_per_day bigint DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF set_quota.role IS NULL THEN
        RAISE EXCEPTION 'nl2sql.set_quota: role is required'
            USING HINT = 'name a role, or ''public'' for the default of every role without its own';
    END IF;
    IF set_quota.role <> 'public' AND NOT EXISTS (
            SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = set_quota.role) THEN
        RAISE EXCEPTION 'nl2sql.set_quota: there is no role named %', set_quota.role
            USING HINT = 'name an existing role, or ''public'' for the default of every role without its own';
    END IF;
    IF set_quota.questions_per_minute < 0 OR set_quota.tokens_per_day < 0 THEN
        RAISE EXCEPTION 'nl2sql.set_quota: limits must be >= 0 or null (no limit)'
            USING HINT = 'e.g. SELECT nl2sql.set_quota(''analyst'', questions_per_minute => 10, tokens_per_day => 2000000)';
    END IF;
    INSERT INTO nl2sql.quota AS q (role_name, questions_per_minute, tokens_per_day)
    VALUES (set_quota.role, set_quota.questions_per_minute, set_quota.tokens_per_day)
    ON CONFLICT (role_name) DO UPDATE SET
        questions_per_minute = EXCLUDED.questions_per_minute,
        tokens_per_day = EXCLUDED.tokens_per_day, updated_at = pg_catalog.now();
    RETURN pg_catalog.jsonb_build_object('role', set_quota.role,
        'questions_per_minute', set_quota.questions_per_minute,
        'tokens_per_day', set_quota.tokens_per_day);
END
$$;
COMMENT ON FUNCTION nl2sql.set_quota(name, int, bigint) IS
    'nl2sql: a role''s questions per minute and tokens per day (null: no limit; role ''public'': the default)';

CREATE OR REPLACE FUNCTION nl2sql.remove_quota(role name) RETURNS boolean
LANGUAGE sql SET search_path FROM CURRENT AS $$
    WITH d AS (DELETE FROM nl2sql.quota q WHERE q.role_name = remove_quota.role RETURNING 1)
    SELECT count(*) > 0 FROM d
$$;
COMMENT ON FUNCTION nl2sql.remove_quota(name) IS
    'nl2sql: remove a role''s own quota (it falls back to the default, role ''public'')';

REVOKE EXECUTE ON FUNCTION nl2sql.set_quota(name, int, bigint), nl2sql.remove_quota(name)
    FROM PUBLIC;

-- The quota check of one question (ops/quota.py), for the role the session acts as
-- (nl2sql._acting_role). kind 'question': before anything else, the questions_per_minute limit,
-- and the question is counted; kind 'tokens': before the first model request, tokens_per_day.
-- A role with a quota locks its row of nl2sql.usage_day (FOR UPDATE) until its transaction
-- ends: a second session of the same role waits there and then sees the first's count, so two
-- sessions cannot both take the last slot; other roles lock other rows. On a read replica (and
-- in a read-only transaction) nothing is written or locked: the limits are checked against the
-- usage recorded.
-- Returns {role, limited, counted, replica} or, over a limit, {refused, limit, used, resets_at}.
CREATE OR REPLACE FUNCTION nl2sql._quota_take(who name, kind text)
RETURNS jsonb LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r name := nl2sql._acting_role(who);
    q nl2sql.quota%ROWTYPE;
    u nl2sql.usage_day%ROWTYPE;
    t timestamptz := pg_catalog.clock_timestamp();
    d date := (t AT TIME ZONE 'UTC')::date;
    m timestamptz := pg_catalog.date_trunc('minute', t);
    minute_q int := 0;
    used bigint := 0;
    -- a replica, or a read-only transaction (an MCP client's): check, but write nothing
    replica boolean := pg_catalog.pg_is_in_recovery()
                       OR pg_catalog.current_setting('transaction_read_only') = 'on';
BEGIN
    SELECT * INTO q FROM nl2sql.quota x WHERE x.role_name IN (r, 'public')
     ORDER BY x.role_name = 'public' LIMIT 1;
    IF NOT FOUND OR (q.questions_per_minute IS NULL AND q.tokens_per_day IS NULL) THEN
        RETURN jsonb_build_object('role', r, 'limited', false, 'counted', false,
                                  'replica', replica);
    END IF;
    IF NOT replica THEN
        INSERT INTO nl2sql.usage_day (role_name, day) VALUES (r, d) ON CONFLICT DO NOTHING;
        SELECT * INTO u FROM nl2sql.usage_day x WHERE x.role_name = r AND x.day = d FOR UPDATE;
    ELSE
        SELECT * INTO u FROM nl2sql.usage_day x WHERE x.role_name = r AND x.day = d;
    END IF;
    IF u.minute_start = m THEN
        minute_q := u.minute_questions;
    END IF;
    used := COALESCE(u.prompt_tokens + u.completion_tokens, 0);
    IF kind = 'question' AND minute_q >= q.questions_per_minute THEN
        RETURN jsonb_build_object('role', r, 'limited', true, 'refused', 'questions_per_minute',
            'limit', q.questions_per_minute, 'used', minute_q, 'quota_of', q.role_name,
            'resets_at', m + interval '1 minute');
    END IF;
    IF kind = 'tokens' AND used >= q.tokens_per_day THEN
        RETURN jsonb_build_object('role', r, 'limited', true, 'refused', 'tokens_per_day',
            'limit', q.tokens_per_day, 'used', used, 'quota_of', q.role_name,
            'resets_at', (d + 1)::timestamp AT TIME ZONE 'UTC');
    END IF;
    IF kind = 'question' AND NOT replica THEN
        UPDATE nl2sql.usage_day x SET questions = x.questions + 1, minute_start = m,
               minute_questions = minute_q + 1
         WHERE x.role_name = r AND x.day = d;
    END IF;
    RETURN jsonb_build_object('role', r, 'limited', true,
                              'counted', kind = 'question' AND NOT replica, 'replica', replica);
END
$$;

-- The quota state of the acting role for the shared process's ledger of questions in flight
-- (model/quota.py "ledger"): the role's limits, its usage as committed (no row is locked), this
-- transaction's id, and which of the ledger's transaction ids `pending` are settled: aborted, or
-- committed before this statement's snapshot (their counts are in the usage read here). Nothing
-- is written. Returns {role, limited, replica} and, for a limited role on a primary, {quota_of,
-- questions_per_minute, tokens_per_day, minute, minute_questions, tokens_used, day, xid,
-- settled}.
CREATE OR REPLACE FUNCTION nl2sql._quota_state(who name, pending bigint[])
RETURNS jsonb LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    r name := nl2sql._acting_role(who);
    q nl2sql.quota%ROWTYPE;
    t timestamptz := pg_catalog.clock_timestamp();
    d date := (t AT TIME ZONE 'UTC')::date;
    m timestamptz := pg_catalog.date_trunc('minute', t);
    replica boolean := pg_catalog.pg_is_in_recovery()
                       OR pg_catalog.current_setting('transaction_read_only') = 'on';
BEGIN
    SELECT * INTO q FROM nl2sql.quota x WHERE x.role_name IN (r, 'public')
     ORDER BY x.role_name = 'public' LIMIT 1;
    IF NOT FOUND OR (q.questions_per_minute IS NULL AND q.tokens_per_day IS NULL) THEN
        RETURN jsonb_build_object('role', r, 'limited', false, 'replica', replica);
    END IF;
    IF replica THEN
        RETURN jsonb_build_object('role', r, 'limited', true, 'replica', true);
    END IF;
    -- one statement, one snapshot: the usage read and the ids settled before it agree
    RETURN (SELECT jsonb_build_object(
        'role', r, 'limited', true, 'replica', false, 'quota_of', q.role_name,
        'questions_per_minute', q.questions_per_minute, 'tokens_per_day', q.tokens_per_day,
        'minute', m, 'resets_minute', m + interval '1 minute',
        'minute_questions',
        COALESCE(CASE WHEN u.minute_start = m THEN u.minute_questions END, 0),
        'tokens_used', COALESCE(u.prompt_tokens + u.completion_tokens, 0),
        'day', d, 'resets_day', (d + 1)::timestamp AT TIME ZONE 'UTC',
        'xid', pg_catalog.txid_current(),
        'settled', COALESCE((
            SELECT pg_catalog.jsonb_agg(p) FROM pg_catalog.unnest(pending) p
             WHERE p <> pg_catalog.txid_current()
               AND (pg_catalog.pg_xact_status(p::text::xid8) IS DISTINCT FROM 'in progress'
                    AND pg_catalog.pg_xact_status(p::text::xid8) IS DISTINCT FROM 'committed'
                    OR pg_catalog.pg_visible_in_snapshot(p::text::xid8,
                                                         pg_catalog.pg_current_snapshot()))),
            '[]'::jsonb))
      FROM (SELECT 1) one
      LEFT JOIN nl2sql.usage_day u ON u.role_name = r AND u.day = d);
END
$$;

-- Adds one call's use to the acting role's row of the day (UTC): questions not yet counted by
-- nl2sql._quota_take, tokens, estimated tokens and cost. Only ever adds (a negative amount is
-- refused), so a role calling it by itself can only raise its own usage. Nothing on a replica
-- or in a read-only transaction.
CREATE OR REPLACE FUNCTION nl2sql._usage_add(who name, add_questions int, add_prompt bigint,
                                             add_completion bigint, add_estimated bigint,
                                             add_cost numeric)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF LEAST(add_questions, add_prompt, add_completion, add_estimated, add_cost) < 0 THEN
        RAISE EXCEPTION 'nl2sql._usage_add: amounts must be >= 0';
    END IF;
    IF pg_catalog.pg_is_in_recovery()
       OR pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        RETURN false;
    END IF;
    INSERT INTO nl2sql.usage_day AS x (role_name, day, questions, prompt_tokens,
                                       completion_tokens, estimated_tokens, cost_usd,
                                       minute_start, minute_questions)
    VALUES (nl2sql._acting_role(who), (pg_catalog.clock_timestamp() AT TIME ZONE 'UTC')::date,
            COALESCE(add_questions, 0), COALESCE(add_prompt, 0), COALESCE(add_completion, 0),
            COALESCE(add_estimated, 0), COALESCE(add_cost, 0),
            pg_catalog.date_trunc('minute', pg_catalog.clock_timestamp()),
            COALESCE(add_questions, 0))
    ON CONFLICT (role_name, day) DO UPDATE SET
        questions = x.questions + EXCLUDED.questions,
        prompt_tokens = x.prompt_tokens + EXCLUDED.prompt_tokens,
        completion_tokens = x.completion_tokens + EXCLUDED.completion_tokens,
        estimated_tokens = x.estimated_tokens + EXCLUDED.estimated_tokens,
        cost_usd = x.cost_usd + EXCLUDED.cost_usd,
        -- a question counted here (not by nl2sql._quota_take) counts in the minute it ends
        minute_questions = CASE WHEN EXCLUDED.questions = 0 THEN x.minute_questions
                                WHEN x.minute_start = EXCLUDED.minute_start
                                THEN x.minute_questions + EXCLUDED.questions
                                ELSE EXCLUDED.questions END,
        minute_start = CASE WHEN EXCLUDED.questions = 0 THEN x.minute_start
                            ELSE EXCLUDED.minute_start END;
    RETURN true;
END
$$;

-- Questions, tokens and cost per role per day (UTC): each role sees its own rows, a superuser
-- every role's.
CREATE OR REPLACE VIEW nl2sql.usage WITH (security_barrier) AS
    SELECT u.role_name, u.day, u.questions, u.prompt_tokens, u.completion_tokens,
           u.prompt_tokens + u.completion_tokens AS tokens, u.estimated_tokens, u.cost_usd
      FROM nl2sql.usage_day u
     WHERE u.role_name = current_user
        OR (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user);
GRANT SELECT ON nl2sql.usage TO PUBLIC;
