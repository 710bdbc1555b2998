-- nl2sql.doctor(): one row per check of the installation, the models and the index
-- (py_udf/nl2sql/ops/doctor.py; docs/install.md, "doctor()"). Administrative: not executable
-- by PUBLIC; GRANT EXECUTE ON FUNCTION nl2sql.doctor() TO a role lets it run the checks.
--
-- nl2sql._doctor() runs the checks in Python; it is executable by every role but refuses a role
-- that may not execute nl2sql.doctor() (so one GRANT decides). nl2sql.doctor() catches what stops
-- the Python side from starting at all (the venv missing, a package of another version: both
-- raised by nl2sql._boot()) and returns it as a row.
CREATE OR REPLACE FUNCTION nl2sql._doctor()
RETURNS TABLE ("check" text, status text, detail text, fix text)
LANGUAGE plpython3u SET search_path FROM CURRENT AS $py$
if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")
from nl2sql import udf
return udf.doctor(plpy)
$py$;

CREATE OR REPLACE FUNCTION nl2sql.doctor()
RETURNS TABLE ("check" text, status text, detail text, fix text)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    msg text;
    hint text;
    state text;
BEGIN
    RETURN QUERY SELECT d."check", d.status, d.detail, d.fix FROM nl2sql._doctor() d;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, hint = PG_EXCEPTION_HINT, state = RETURNED_SQLSTATE;
    IF state OPERATOR(pg_catalog.=) '42501' OR msg LIKE 'nl2sql.doctor: permission denied%' THEN
        RAISE;
    END IF;
    RETURN QUERY SELECT CASE WHEN msg LIKE '%extension nl2sql%' OR msg LIKE '%older than%'
                             THEN 'extension version' ELSE 'venv' END,
                        'fail'::text,
                        msg || ' (the other checks need the Python package: fix this first)',
                        COALESCE(NULLIF(hint, ''), 'see docs/install.md');
END
$$;
COMMENT ON FUNCTION nl2sql.doctor() IS
    'nl2sql: check the installation, the models and the index; one row per check (ok, warn, fail)';
REVOKE EXECUTE ON FUNCTION nl2sql.doctor() FROM PUBLIC;
