"""The SQL sources as a database without PL/Python runs them (client._statements): statements
split by PostgreSQL's parser, extension-only ones left out, PL/Python functions as stubs."""

from __future__ import annotations

import pglast

from nl2sql.client._statements import kept_statements

SOURCE = """
-- a comment — with a non-ASCII dash before the first statement
CREATE TABLE nl2sql.t (v text DEFAULT 'café');
SELECT pg_catalog.pg_extension_config_dump('nl2sql.t', '');
CREATE OR REPLACE FUNCTION nl2sql.py(a int, b text DEFAULT 'x') RETURNS TABLE (n int)
LANGUAGE plpython3u SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $py$
return [1]
$py$;
COMMENT ON FUNCTION nl2sql.py(int, text) IS 'naïve';
CREATE FUNCTION public.nl2sql(q text) RETURNS text LANGUAGE sql AS $$ SELECT q $$;
ALTER EXTENSION nl2sql ADD TABLE nl2sql.t;
SELECT 1 FROM @extschema@.t;
"""


def test_statements_are_split_whole_and_extension_only_ones_left_out():
    kept = kept_statements(SOURCE)
    assert kept.statements[0] == "CREATE TABLE nl2sql.t (v text DEFAULT 'café')"
    assert kept.statements[2] == "COMMENT ON FUNCTION nl2sql.py(int, text) IS 'naïve'"
    assert kept.statements[-1] == "SELECT 1 FROM nl2sql.t"
    assert len(kept.statements) == 5 and len(kept.skipped) == 2
    assert not any("config_dump" in s or "ALTER EXTENSION" in s for s in kept.statements)
    assert kept.outside == {("public", "nl2sql")}


def test_a_plpython_function_becomes_a_plpgsql_stub_of_the_same_signature():
    kept = kept_statements(SOURCE)
    assert kept.stubbed == ["nl2sql.py"]
    stub = pglast.parse_sql(kept.statements[1])[0].stmt
    options = {o.defname: o.arg for o in stub.options}
    assert options["language"].sval == "plpgsql"
    assert options["security"].boolval is True
    assert "runs in PL/Python" in options["as"][0].sval
    assert [p.name for p in stub.parameters] == ["a", "b", "n"]
