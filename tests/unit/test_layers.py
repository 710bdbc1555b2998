"""The server package's floors, checked from its source with ``ast`` (nothing is imported):

* the subpackages of ``py_udf/nl2sql`` are layers: no subpackage reaches itself through its
  imports (module-level and function-level imports, relative and absolute ``nl2sql.*``, all
  count; a top-level module such as ``pipeline.py`` is a floor of its own);
* no function or method holds more than ``MAX_FUNCTION_LINES`` lines of code: the lines of its
  body (nested functions included) that are neither blank, nor comment-only, nor part of its
  docstring (nor of a nested function's or class's docstring).
"""

from __future__ import annotations

import ast

from .test_imports import _cycles, _graph, _path, _sources, _where

MAX_FUNCTION_LINES = 40

# Edges between subpackages still allowed, each with why; shrinks to nothing.
# (importing module, imported module): why
ALLOWED_EDGES: dict[tuple[str, str], str] = {}

# Functions still over MAX_FUNCTION_LINES, each with why; shrinks to nothing.
# "module:qualified name": why
ALLOWED_LONG: dict[str, str] = {}


def _floor(module: str) -> str:
    """The floor of a module (``core.spi`` → ``core``; ``pipeline`` → ``pipeline``; the
    package's ``__init__`` → ``nl2sql``)."""
    return module.split(".")[0] if module else "nl2sql"


def _floors(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Subpackage → the subpackages its modules import (allowed edges left out)."""
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        here = _floor(mod)
        out.setdefault(here, set())
        for dep in deps:
            there = _floor(dep)
            if there != here and (mod, dep) not in ALLOWED_EDGES:
                out[here].add(there)
                out.setdefault(there, set())
    return out


def _edges_between(graph: dict[str, set[str]], a: str, b: str) -> list[str]:
    """The module imports that make subpackage ``a`` import subpackage ``b``."""
    return sorted(
        f"{m} -> {d}"
        for m, deps in graph.items()
        if _floor(m) == a
        for d in deps
        if _floor(d) == b and (m, d) not in ALLOWED_EDGES
    )


def test_floor_graph_sees_a_circle():
    graph = {"a.x": {"b.y"}, "b.y": {"c.z"}, "c.z": {"a.w"}, "a.w": set(), "d": {"a.x"}}
    floors = _floors(graph)
    assert _cycles(floors) == [["a", "b", "c"]]
    assert _edges_between(graph, "c", "a") == ["c.z -> a.w"]


def test_no_subpackage_reaches_itself():
    graph = _graph()
    floors = _floors(graph)
    assert {"core", "model", "stages", "pipeline"} <= set(floors)
    cycles = _cycles(floors)
    msgs = []
    for comp in cycles:
        path = _path(floors, comp)
        hops = path.split(" -> ")
        detail = [
            f"  {a} -> {b}: {', '.join(_edges_between(graph, a, b))}"
            for a, b in zip(hops, hops[1:], strict=False)
        ]
        msgs.append(f"one circle of {comp}: " + path + "\n" + "\n".join(detail))
    assert not cycles, "subpackages that reach themselves through their imports:\n" + "\n".join(
        msgs
    )
    stale = [e for e in ALLOWED_EDGES if e[1] not in graph.get(e[0], set())]
    assert not stale, f"allowed edges that no longer exist (remove them): {stale}"


def _docstring_lines(node: ast.AST) -> set[int]:
    """The lines of the docstrings of ``node`` and of the functions and classes inside it."""
    out: set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body:
            first = n.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                out.update(range(first.lineno, first.end_lineno + 1))
    return out


def code_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> int:
    """The lines of code of ``fn``'s body: not blank, not comment-only, not a docstring's.

    Args:
        fn: a parsed function or method.
        lines: its module's source lines.

    Returns:
        The count.
    """
    skip = _docstring_lines(fn)
    start, end = fn.body[0].lineno, fn.end_lineno
    return sum(
        1
        for i in range(start, end + 1)
        if i not in skip and lines[i - 1].strip() and not lines[i - 1].lstrip().startswith("#")
    )


def _functions(tree: ast.Module):
    """(qualified name, node) of every function and method of ``tree``, nested ones too."""

    def walk(node: ast.AST, prefix: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield f"{prefix}{child.name}", child
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def test_code_lines_rule():
    src = (
        "def f(x):\n"
        '    """Doc.\n\n    More.\n    """\n'
        "    # a comment\n\n"
        "    y = x  # counted\n"
        "    def g():\n"
        '        """Inner doc."""\n'
        "        return 1\n"
        "    return y\n"
    )
    tree = ast.parse(src)
    fns = dict(_functions(tree))
    assert set(fns) == {"f", "f.g"}
    assert code_lines(fns["f"], src.splitlines()) == 4
    assert code_lines(fns["f.g"], src.splitlines()) == 1


def test_no_function_is_too_long():
    bad, seen = [], set()
    for name, (path, text, tree) in _sources().items():
        lines = text.splitlines()
        for qual, fn in _functions(tree):
            key = f"{name}:{qual}"
            n = code_lines(fn, lines)
            if n > MAX_FUNCTION_LINES:
                seen.add(key)
                if key not in ALLOWED_LONG:
                    bad.append(f"{_where(path, fn.lineno)} {qual}: {n} lines of code")
    assert not bad, (
        f"split functions over {MAX_FUNCTION_LINES} lines of code into well-named helpers:\n"
        + "\n".join(bad)
    )
    stale = sorted(set(ALLOWED_LONG) - seen)
    assert not stale, f"allowed long functions that are short now (remove them): {stale}"
