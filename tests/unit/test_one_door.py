"""One door from SQL into Python: every PL/Python function of the built install script is at
most three lines that call ``nl2sql.udf`` only (``nl2sql._boot``, which puts the venv on
sys.path and imports ``nl2sql.version``, aside). No database needed.

The bodies are found by the dollar-quote tag the SQL files use for PL/Python (``$py$``) and
parsed with ``ast``: they are Python.
"""

from __future__ import annotations

import ast
import importlib.util

import pytest

from conftest import ROOT

spec = importlib.util.spec_from_file_location(
    "build_extension", ROOT / "scripts/build_extension.py"
)
build = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build)

TAG = "$py$"
LANGUAGE = "language plpython3u"
MAX_LINES = 3
BOOT = "nl2sql._boot"
DOOR = "nl2sql.udf"


def plpython_bodies(script: str) -> list[tuple[str, str]]:
    """``(function name, body)`` of every ``$py$``-quoted body of ``script``.

    Args:
        script: SQL text.

    Returns:
        The function each body belongs to (the name after the last ``FUNCTION`` before it) and
        the body, in order.
    """
    parts = script.split(TAG)
    assert len(parts) % 2 == 1, f"an unclosed {TAG} quote"
    out = []
    for before, body in zip(parts[0::2], parts[1::2]):
        head = before[before.upper().rfind("FUNCTION ") + len("FUNCTION ") :]
        assert LANGUAGE in " ".join(head.lower().split()), f"{TAG} quotes a body not in PL/Python"
        out.append((head.split("(", 1)[0].strip(), body))
    return out


def _module_names(node: ast.AST) -> list[str]:
    """The modules an import statement names (``from a import b`` names ``a`` and ``a.b``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
    return []


def door_problems(name: str, body: str) -> list[str]:
    """What is wrong with one PL/Python body: more than ``MAX_LINES`` lines, or an import or a
    name of any module other than ``nl2sql.udf`` (``nl2sql`` itself only as its parent).

    Args:
        name: the SQL function's name.
        body: its Python body.

    Returns:
        One message per problem; empty when the body is a door.
    """
    lines = [ln for ln in body.strip("\n").splitlines() if ln.strip()]
    problems = [] if len(lines) <= MAX_LINES else [f"{name}: {len(lines)} lines"]
    tree = ast.parse(body.strip("\n"))  # a body is Python: a syntax error fails the test
    for node in ast.walk(tree):
        names = _module_names(node)
        if isinstance(node, ast.ImportFrom) and node.module == "nl2sql":
            names = names[1:]  # ``from nl2sql import udf``: the parent package is no module use
        if isinstance(node, ast.Attribute):
            names = [ast.unparse(node)] if ast.unparse(node).startswith("nl2sql.") else []
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module"):
            names = ["importlib"]
        if isinstance(node, ast.Name) and node.id == "__import__":
            names = ["__import__"]
        bad = [m for m in names if m != DOOR and not m.startswith(DOOR + ".")]
        problems += [f"{name}: names {m}" for m in bad]
    return problems


def test_every_plpython_body_is_a_door_into_udf():
    script = build.install_script()
    bodies = plpython_bodies(script)
    # every PL/Python function is quoted with the tag: none escapes the check
    assert len(bodies) == " ".join(script.lower().split()).count(LANGUAGE)
    assert len(bodies) > 25
    names = [n for n, _ in bodies]
    assert BOOT in names
    problems = [p for n, b in bodies if n != BOOT for p in door_problems(n, b)]
    assert not problems, "PL/Python bodies must call nl2sql.udf only:\n" + "\n".join(problems)


def test_boot_imports_the_version_module():
    """Every released ``_boot`` imports ``nl2sql.version``: the module stays where it is."""
    boot = [b for n, b in plpython_bodies(build.install_script()) if n == BOOT]
    assert len(boot) == 1
    assert "from nl2sql import version" in boot[0]
    assert (ROOT / "py_udf/nl2sql/version.py").exists()


GOOD = (
    'if "nl2sql_boot" not in GD: plpy.execute("SELECT nl2sql._boot()")\n'
    "from nl2sql import udf\nreturn udf.reindex(plpy, schemas, force)\n"
)


@pytest.mark.parametrize(
    "body, problem",
    [
        (GOOD, None),
        (GOOD.replace("from nl2sql import udf", "import nl2sql.udf"), None),
        (GOOD + "x = 1\n", "4 lines"),
        (GOOD.replace("from nl2sql import udf", "from nl2sql.ops import indexer"), "nl2sql.ops"),
        (GOOD.replace("from nl2sql import udf", "from nl2sql import udf, pipeline"), "pipeline"),
        (GOOD.replace("from nl2sql import udf", "import nl2sql.generation.safety"), "safety"),
        (GOOD.replace("from nl2sql import udf", "import json"), "names json"),
        (GOOD.replace("udf.reindex(", "nl2sql.ops.indexer.reindex("), "nl2sql.ops.indexer"),
        (GOOD.replace("udf.reindex(", "__import__('nl2sql.ops').x("), "__import__"),
    ],
)
def test_door_check_catches_other_modules_and_long_bodies(body, problem):
    found = door_problems("f", body)
    if problem is None:
        assert found == []
    else:
        assert any(problem in p for p in found), found


def test_bodies_are_found_by_their_tag():
    script = (
        "CREATE FUNCTION a() RETURNS int LANGUAGE plpython3u AS $py$\nreturn 1\n$py$;\n"
        "CREATE OR REPLACE FUNCTION nl2sql.b(x int)\nRETURNS int LANGUAGE  plpython3u\n"
        "SET search_path FROM CURRENT AS $py$\nreturn x\n$py$;\n"
        "CREATE FUNCTION c() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n"
    )
    assert plpython_bodies(script) == [("a", "\nreturn 1\n"), ("nl2sql.b", "\nreturn x\n")]
    with pytest.raises(AssertionError, match="not in PL/Python"):
        plpython_bodies("CREATE FUNCTION d() LANGUAGE sql AS $py$ SELECT 1 $py$;")
