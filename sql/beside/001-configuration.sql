-- The install without PL/Python only (nl2sql install, docs/install.md "PostgreSQL without
-- PL/Python"): the configuration functions that are PL/Python in the extension, as PL/pgSQL
-- with the same names, signatures and privileges, so a DBA configures both modes alike. They
-- run after sql/idempotent/ (whose PL/Python functions that install turns into stubs that say
-- where the function runs instead), and replace those stubs.

-- The settings' checks (py_udf/nl2sql/core/settings.py, rendered by the build).
CREATE OR REPLACE VIEW nl2sql._setting_rule AS
    SELECT * FROM (
    @SETTINGS_RULES@
    ) AS r(name, type, minimum, minimum_exclusive, maximum, choices);
REVOKE ALL ON nl2sql._setting_rule FROM PUBLIC;

-- One setting's value checked as core/settings.py checks it (type, bounds, choices) and stored
-- in its normal form. hardness_voters (JSON) is checked for being a JSON object here; the rest
-- of its shape is checked by the process that reads it (nl2sql ask, the worker).
CREATE OR REPLACE FUNCTION nl2sql.set_setting(key text, value text) RETURNS text
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    r record;
    v text := pg_catalog.btrim(COALESCE(set_setting.value, ''));
    n float8;
    bad text;
BEGIN
    SELECT * INTO r FROM nl2sql._setting_rule s WHERE s.name = set_setting.key;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'nl2sql: unknown setting "%"', set_setting.key
            USING HINT = 'SELECT name FROM nl2sql.settings lists the settings';
    END IF;
    IF pg_catalog.length(set_setting.value) > 10000 THEN
        RAISE EXCEPTION 'nl2sql: setting ''%'': the value has % characters, more than 10,000',
            r.name, pg_catalog.length(set_setting.value);
    END IF;
    bad := pg_catalog.format('nl2sql: setting %L must be %s, got %L', r.name,
        CASE r.type WHEN 'int' THEN 'an integer' WHEN 'float' THEN 'a number'
                    WHEN 'bool' THEN 'on or off'
                    WHEN 'enum' THEN pg_catalog.array_to_string(r.choices, ' or ')
                    WHEN 'list' THEN 'comma-separated names, at least one'
                    WHEN 'json' THEN 'a JSON object mapping easy/medium/hard/extra to lists of model names, or empty'
                    ELSE 'any text' END
        || CASE WHEN r.minimum IS NOT NULL OR r.maximum IS NOT NULL
                THEN pg_catalog.format(' (%s%s)',
                     CASE WHEN r.minimum IS NULL THEN ''
                          ELSE (CASE WHEN r.minimum_exclusive THEN '> ' ELSE '>= ' END) || r.minimum END,
                     CASE WHEN r.maximum IS NULL THEN '' ELSE ', <= ' || r.maximum END)
                ELSE '' END,
        set_setting.value);
    IF r.type IN ('int', 'float') THEN
        BEGIN
            IF r.type = 'int' THEN
                v := v::bigint::text;
            END IF;
            n := v::float8;
        EXCEPTION WHEN data_exception THEN
            RAISE EXCEPTION '%', bad USING ERRCODE = 'invalid_parameter_value';
        END;
        IF n = 'NaN'::float8
           OR (r.minimum IS NOT NULL AND (n < r.minimum OR (r.minimum_exclusive AND n = r.minimum)))
           OR (r.maximum IS NOT NULL AND n > r.maximum) THEN
            RAISE EXCEPTION '%', bad USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF r.type = 'float' THEN
            v := n::text;
        END IF;
    ELSIF r.type = 'bool' THEN
        v := CASE WHEN pg_catalog.lower(v) IN ('on', 'true') THEN 'on'
                  WHEN pg_catalog.lower(v) IN ('off', 'false') THEN 'off' END;
    ELSIF r.type = 'enum' THEN
        v := CASE WHEN pg_catalog.lower(v) = ANY (r.choices) THEN pg_catalog.lower(v) END;
    ELSIF r.type = 'list' THEN
        SELECT pg_catalog.string_agg(p, ',' ORDER BY o) INTO v
          FROM (SELECT pg_catalog.btrim(p) AS p, o
                  FROM pg_catalog.unnest(pg_catalog.string_to_array(v, ',')) WITH ORDINALITY AS u(p, o)) s
         WHERE p <> '';
    ELSIF r.type = 'json' AND v <> '' AND pg_catalog.lower(v) <> 'off' THEN
        BEGIN
            IF pg_catalog.jsonb_typeof(v::jsonb) <> 'object' THEN
                v := NULL;
            END IF;
        EXCEPTION WHEN data_exception THEN
            v := NULL;
        END;
    ELSIF r.type = 'json' THEN
        v := '';
    END IF;
    IF v IS NULL THEN
        RAISE EXCEPTION '%', bad USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO nl2sql.setting (key, value) VALUES (set_setting.key, v)
        ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;
    RETURN v;
END
$$;

-- A cell-value policy (as the extension's). The table's index is not rewritten here (that
-- needs the embedding model, which runs beside the database): values a policy now keeps out
-- are deleted from the value index at once, and the table is queued for the next
-- `nl2sql reindex` (nl2sql.ddl_queue), which indexes what a policy now lets in.
CREATE OR REPLACE FUNCTION nl2sql.set_value_policy(tbl regclass, send_values boolean,
                                                   column_name name DEFAULT NULL)
RETURNS jsonb LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
#variable_conflict use_column
DECLARE
    sch name;
    rel name;
    col name := COALESCE(set_value_policy.column_name, '');
    indexed boolean;
BEGIN
    IF set_value_policy.send_values IS NULL THEN
        RAISE EXCEPTION 'nl2sql.set_value_policy: send_values must be true or false'
            USING HINT = 'false keeps the values out of the index and prompts; true opts in';
    END IF;
    SELECT n.nspname, c.relname INTO sch, rel FROM pg_catalog.pg_class c
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = set_value_policy.tbl;
    IF col <> '' AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                                 WHERE a.attrelid = set_value_policy.tbl AND a.attname = col
                                   AND a.attnum > 0 AND NOT a.attisdropped) THEN
        RAISE EXCEPTION 'nl2sql.set_value_policy: table %.% has no column %', sch, rel,
            pg_catalog.quote_literal(col)
            USING HINT = 'pass column_name => NULL for the whole table';
    END IF;
    INSERT INTO nl2sql.value_policy (schema_name, table_name, column_name, send_values)
        VALUES (sch, rel, col, set_value_policy.send_values)
        ON CONFLICT (schema_name, table_name, column_name)
        DO UPDATE SET send_values = EXCLUDED.send_values;
    indexed := EXISTS (SELECT 1 FROM nl2sql.schema_table t
                       WHERE t.schema_name = sch AND t.table_name = rel);
    IF indexed THEN
        IF NOT set_value_policy.send_values THEN
            DELETE FROM nl2sql.cell_value v
             WHERE v.schema_name = sch AND v.table_name = rel AND (col = '' OR v.column_name = col);
        END IF;
        INSERT INTO nl2sql.ddl_queue (event, object_type, relid, schema_name, table_name, command_tag)
            VALUES ('altered', 'table', set_value_policy.tbl, sch, rel, 'nl2sql.set_value_policy');
    END IF;
    RETURN pg_catalog.jsonb_build_object('table', sch || '.' || rel,
                                         'column', set_value_policy.column_name,
                                         'send_values', set_value_policy.send_values,
                                         'reindexed', false, 'queued', indexed);
END
$$;

-- The query log's writer. The extension's accepts a row only with a token that never leaves
-- the server's PL/Python; beside the database the pipeline runs in a client process, so there
-- is no such token: a row is accepted from any caller and attributed to the role the session
-- may act as (nl2sql._acting_role), never to another. The log then holds what clients
-- reported (docs/safety.md); an ordinary role can still read only its own rows.
CREATE OR REPLACE FUNCTION nl2sql._log_query(token text, role_name name, question text,
                                             sql text, confidence float8, error text,
                                             trace jsonb, conversation text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    id bigint;
BEGIN
    INSERT INTO nl2sql.query_log (role_name, question, sql, confidence, error, trace, conversation)
        VALUES (nl2sql._acting_role(_log_query.role_name), _log_query.question, _log_query.sql,
                _log_query.confidence, _log_query.error, _log_query.trace, _log_query.conversation)
        RETURNING query_log.id INTO id;
    RETURN id;
END
$$;
