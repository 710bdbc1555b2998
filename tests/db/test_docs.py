"""The documentation stays true to the database: docs/sql-reference.md documents every SQL
function a fresh install creates for users (and no function that is gone), and the README names
each of them. tests/unit/test_docs.py checks the rest of the documentation."""

from __future__ import annotations

import re

from conftest import ROOT

README = ROOT / "README.md"
SQL_REFERENCE = ROOT / "docs" / "sql-reference.md"


# --- sql-reference.md against pg_proc of a fresh install ---------------------------------------

USER_FUNCTIONS = r"""
SELECT n.nspname, p.proname, pg_catalog.pg_get_function_arguments(p.oid),
       pg_catalog.pg_get_function_result(p.oid),
       pg_catalog.has_function_privilege('public', p.oid, 'EXECUTE')
FROM pg_catalog.pg_depend d
JOIN pg_catalog.pg_proc p ON d.classid = 'pg_catalog.pg_proc'::regclass AND d.objid = p.oid
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.deptype = 'e'
  AND d.refobjid = (SELECT oid FROM pg_catalog.pg_extension WHERE extname = 'nl2sql')
  AND (n.nspname = 'nl2sql' OR (n.nspname = 'public' AND p.proname = 'nl2sql'))
  AND p.proname NOT LIKE '\_%'
  AND p.prorettype NOT IN ('pg_catalog.trigger'::regtype, 'pg_catalog.event_trigger'::regtype)
ORDER BY 1, 2, 3
"""

# pg_get_function_arguments prints defaults with casts (NULL::text, 'postgres'::text,
# current_setting('search_path'::text)); the reference writes them as a user would.
CAST = re.compile(r"::[a-z_]+(?: precision| varying| with(?:out)? time zone)?(?:\[\])?")


def _signature(schema: str, name: str, args: str, result: str) -> str:
    """How the reference writes a function's signature (``public.nl2sql`` as ``nl2sql``)."""
    called = "nl2sql" if (schema, name) == ("public", "nl2sql") else f"{schema}.{name}"
    return f"{called}({CAST.sub('', args)}) RETURNS {result}"


def _reference_sections() -> dict[str, str]:
    """``### <schema>.<name>`` heading → the text of its section, from docs/sql-reference.md."""
    sections: dict[str, str] = {}
    current = None
    for line in SQL_REFERENCE.read_text().splitlines():
        if m := re.match(r"### (\S+)$", line):
            current = m.group(1)
            sections[current] = ""
        elif re.match(r"#{1,2} ", line):
            current = None
        elif current is not None:
            sections[current] += line + "\n"
    return sections


def test_sql_reference_documents_every_function(cluster):
    """Every function a user calls, and nothing else, has a section in docs/sql-reference.md.

    Functions a user calls: the members of extension nl2sql (pg_depend, deptype 'e') in schema
    nl2sql, plus ``public.nl2sql``, whose name does not start with ``_`` and which return
    neither ``trigger`` nor ``event_trigger``. The rule is the name: a leading ``_`` marks an
    internal function (called by other functions, the event triggers or ``nl2sql-index``),
    whatever its privileges; the administrative functions, not executable by PUBLIC, are
    user-called and documented. Each section (heading ``### <schema>.<name>``) holds the
    function's signature as ``pg_get_function_arguments`` prints it without casts, followed by
    ``RETURNS`` and ``pg_get_function_result``, and says who may call it:
    ``**Privileges:** any role`` when PUBLIC may execute it, else
    ``**Privileges:** administrative``. Every ``###`` heading of the reference names a
    function. The README names every such function too.
    """
    cluster.create_database("nl2sql_docs", drop=True)
    with cluster.connect("nl2sql_docs") as conn:
        conn.execute("CREATE EXTENSION nl2sql CASCADE")
        functions = conn.execute(USER_FUNCTIONS).fetchall()
    assert len(functions) > 20, functions

    sections = _reference_sections()
    names = {f"{schema}.{name}" for schema, name, *_ in functions}
    problems = [f"missing from docs/sql-reference.md: {n}" for n in sorted(names - set(sections))]
    problems += [
        f"documented in docs/sql-reference.md but not created by the extension: {n}"
        for n in sorted(set(sections) - names)
    ]
    readme = README.read_text()
    for schema, name, args, result, public in functions:
        section = sections.get(f"{schema}.{name}")
        called = "nl2sql" if schema == "public" else f"{schema}.{name}"
        if not re.search(rf"(?<![\w.]){re.escape(called)}\(", readme):
            problems.append(f"README.md does not name {called}()")
        if section is None:
            continue
        signature = _signature(schema, name, args, result)
        if signature not in section:
            problems.append(f"{schema}.{name}: the signature is not\n    {signature}")
        privileges = "**Privileges:** any role" if public else "**Privileges:** administrative"
        if privileges not in section:
            problems.append(f"{schema}.{name}: its section does not say {privileges!r}")
    assert not problems, "\n".join(problems)
