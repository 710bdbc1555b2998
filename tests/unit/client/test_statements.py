"""The SQL sources as a database without PL/Python runs them (client._statements): statements
split by PostgreSQL's parser, extension-only ones left out, PL/Python functions as stubs."""

from __future__ import annotations

import pglast
import pytest

from nl2sql.client._statements import STUB_HINTS, kept_statements
from nl2sql.client.install import Sources

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


def _stub_hint(statement: str) -> str:
    """The HINT text of a stub's RAISE (read back with PostgreSQL's parser)."""
    body = {o.defname: o.arg for o in pglast.parse_sql(statement)[0].stmt.options}["as"][0].sval
    raise_stmt = pglast.parse_plpgsql(
        f"CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $${body}$$"
    )
    options = raise_stmt[0]["PLpgSQL_function"]["action"]["PLpgSQL_stmt_block"]["body"][0][
        "PLpgSQL_stmt_raise"
    ]["options"]
    hint = next(o for o in options if o["PLpgSQL_raise_option"]["opt_type"] == 3)
    return hint["PLpgSQL_raise_option"]["expr"]["PLpgSQL_expr"]["query"]


@pytest.mark.parametrize(
    "name, names",
    [
        ("nl2sql._narrate", ["nl2sql narrate", "Client.narrate()"]),
        ("nl2sql._explain_sql", ["nl2sql explain-sql", "Client.explain_sql()"]),
        ("nl2sql._doctor", ["nl2sql doctor", "Client.doctor()"]),
        ("nl2sql._evaluate", ["nl2sql evaluate", "Client.evaluate()"]),
        ("nl2sql.export_semantic_model", ["nl2sql export-semantic-model"]),
        ("nl2sql.calibrate", ["Client.calibrate()"]),
        ("nl2sql.other", ["nl2sql ask", "nl2sql.submit()"]),
    ],
)
def test_a_stub_s_hint_names_the_command_and_method_that_do_its_work(name, names):
    source = (
        f"CREATE FUNCTION {name}(a int) RETURNS text LANGUAGE plpython3u AS $py$\nreturn 1\n$py$;"
    )
    kept = kept_statements(source)
    hint = _stub_hint(kept.statements[0])
    for n in names:
        assert n in hint, (name, hint)
    other = {"nl2sql._narrate": "nl2sql evaluate", "nl2sql._evaluate": "nl2sql narrate"}
    assert other.get(name, "nl2sql worker") not in hint


def test_every_hinted_function_is_a_plpython_function_of_the_sources():
    stubbed = set()
    for _, text in Sources.load().idempotent:  # the built sources nl2sql install runs
        stubbed.update(kept_statements(text).stubbed)
    assert set(STUB_HINTS) <= stubbed, set(STUB_HINTS) - stubbed
