"""The documentation stays true to the code: docs/settings.md's table is the one generated from
the settings declaration, docs/sql-reference.md documents every SQL function a fresh install
creates for users (and no function that is gone), the README names each of them and stays
short, and every relative link of README.md, DEVELOPERS.md and docs/*.md leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

from nl2sql.core import settings_export as S

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
SQL_REFERENCE = DOCS / "sql-reference.md"
README_MAX_LINES = 300

# --- settings.md: generated from the one declaration ------------------------------------------


def test_settings_doc_is_generated_from_the_declaration():
    text = (DOCS / "settings.md").read_text()
    begin, end = "<!-- settings:begin -->\n", "<!-- settings:end -->"
    assert text.count(begin) == 1 and text.count(end) == 1
    block = text[text.index(begin) + len(begin) : text.index(end)]
    assert block == S.markdown_table(), (
        "docs/settings.md's settings table is stale: replace the block between the settings "
        "markers with the output of python -m nl2sql.core.settings_export --markdown"
    )


# --- README and links ---------------------------------------------------------------------------


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a markdown heading (lower case, punctuation dropped, spaces → -)."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    in_code = False
    found = set()
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and (m := re.match(r"#{1,6} (.+)$", line)):
            found.add(_anchor(m.group(1)))
    return found


def test_readme_is_short_and_points_to_every_doc():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    text = "\n".join(lines)
    unlinked = [p.name for p in sorted(DOCS.glob("*.md")) if f"docs/{p.name}" not in text]
    assert not unlinked, f"README.md does not link {unlinked}"


def test_every_relative_link_resolves():
    pages = [README, ROOT / "DEVELOPERS.md", *sorted(DOCS.glob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.endswith("/"):
                continue  # http(s) and mailto: links, and folders (docs/internals/), not checked
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, "broken links:\n  " + "\n  ".join(broken)


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
