-- doctor()'s shape: its columns, one row per check, statuses from three, and who may run it.
SELECT pg_get_function_result('nl2sql.doctor()'::regprocedure);
SELECT has_function_privilege('public', 'nl2sql.doctor()', 'EXECUTE') AS public_may_run;
SELECT "check" FROM nl2sql.doctor() ORDER BY 1;
SELECT count(*) FILTER (WHERE status NOT IN ('ok', 'warn', 'fail')) AS other_statuses
  FROM nl2sql.doctor();
SELECT "check", status, left(detail, 36) AS detail FROM nl2sql.doctor() WHERE "check" IN ('models', 'settings') ORDER BY 1;
