"""Docstrings of the server package: every public function says what it takes and returns
(Google style: ``Args:``, ``Returns:``), and no docstring points outside the repository or to
an issue number."""

from __future__ import annotations

import ast
import re

from conftest import ROOT

PKG_DIR = ROOT / "py_udf" / "nl2sql"
OUTSIDE = re.compile(r"\bissue \d+|DESIGN\.md", re.I)


def _public_functions():
    """(module, qualified name, node) of every public function and public method."""
    for f in sorted(PKG_DIR.rglob("*.py")):
        tree = ast.parse(f.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                yield f.stem, node.name, node
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                for m in node.body:
                    if isinstance(m, ast.FunctionDef) and not m.name.startswith("_"):
                        yield f.stem, f"{node.name}.{m.name}", m


def _returns_something(fn: ast.FunctionDef) -> bool:
    ann = fn.returns
    if ann is None:
        return any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(fn))
    return not (isinstance(ann, ast.Constant) and ann.value is None) and ast.unparse(ann) not in (
        "None",
        "NoReturn",
    )


def _is_property(fn: ast.FunctionDef) -> bool:
    return any(ast.unparse(d) in ("property", "cached_property") for d in fn.decorator_list)


def test_public_functions_document_args_and_returns():
    missing = []
    for mod, name, fn in _public_functions():
        doc = ast.get_docstring(fn) or ""
        params = [a.arg for a in fn.args.args + fn.args.kwonlyargs if a.arg not in ("self", "cls")]
        if not doc:
            missing.append(f"{mod}.{name}: no docstring")
            continue
        if params and "Args:" not in doc:
            missing.append(f"{mod}.{name}: no Args")
        if (
            _returns_something(fn)
            and not _is_property(fn)
            and "Returns:" not in doc
            and "Yields:" not in doc
        ):
            missing.append(f"{mod}.{name}: no Returns")
    assert len(list(_public_functions())) > 150
    assert not missing, "docstrings to complete:\n" + "\n".join(missing)


def test_no_docstring_or_comment_points_outside_the_repository():
    bad = [
        f"{f.name}:{i}"
        for f in sorted(PKG_DIR.rglob("*.py"))
        for i, line in enumerate(f.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not bad, "issue numbers or files outside the repository mentioned at " + ", ".join(bad)
