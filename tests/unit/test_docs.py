"""The documentation stays true to the code: docs/settings.md's table is the one generated from
the settings declaration, the README stays short and points to every doc, and every relative
link of README.md, DEVELOPERS.md and docs/*.md leads somewhere. tests/db/test_docs.py checks
docs/sql-reference.md against a fresh install; test_docs_facts.py the version requirements,
defaults and limits the docs state in their prose."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT
from nl2sql.core import settings_export as S

DOCS = ROOT / "docs"
README = ROOT / "README.md"
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


# --- layout.md: every module of the server package has its line ---------------------------------


def test_layout_lists_every_module_of_the_server_package():
    layout = (DOCS / "layout.md").read_text()
    pkg = ROOT / "py_udf" / "nl2sql"
    missing = []
    for sub in sorted(p for p in pkg.iterdir() if (p / "__init__.py").exists()):
        if f"`{sub.name}/`" not in layout:
            missing.append(f"{sub.name}/")
        missing += [
            f"{sub.name}/{m.name}"
            for m in sorted(sub.glob("*.py"))
            if m.name != "__init__.py" and f"| `{m.name}` |" not in layout
        ]
    assert not missing, f"docs/layout.md has no line for {missing}"
