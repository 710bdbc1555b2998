-- ==== incremental {name} ====
DO $nl2sql_migration$
DECLARE
    _name text := $nl2sql_name${name}$nl2sql_name$;
    _body text := $nl2sql_body${body}$nl2sql_body$;
    _done nl2sql.migration%ROWTYPE;
BEGIN
    SELECT * INTO _done FROM nl2sql.migration m WHERE m.name OPERATOR(pg_catalog.=) _name;
    IF FOUND THEN
        IF _done.body OPERATOR(pg_catalog.<>) _body THEN
            RAISE WARNING 'nl2sql: migration % changed after it ran (at version %)',
                _name, _done.applied_at_version;
        END IF;
        RETURN;
    END IF;
    EXECUTE _body;
    INSERT INTO nl2sql.migration (name, applied_at_version, body)
    VALUES (_name, $nl2sql_version${version}$nl2sql_version$, _body);
END
$nl2sql_migration$;
