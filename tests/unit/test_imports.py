"""The server package's shape, checked from its source with ``ast`` (nothing is imported):

* no import cycle among the modules of ``py_udf/nl2sql`` — module-level and function-level
  (lazy) imports both count as edges;
* no module of the server package imports the indexer package, the tests or the benchmarks;
* every exception class the package defines lives in ``errors.py`` (private ``_`` names aside),
  and every ``raise`` of a named class raises one of those (or a listed exception);
* the house rules a newcomer relies on: an import inside a function says why on its line (or
  on a comment line above its block of imports); no module reaches for another module's
  private (``_``) names; no module over ``MAX_MODULE_LINES`` lines; no folder with more than
  ``MAX_FOLDER_MODULES`` modules; docstrings at most ``MAX_DOCSTRING_SHARE`` of the package's
  lines; every subpackage's ``__init__`` says what it holds and declares ``__all__``.
"""

from __future__ import annotations

import ast
import functools
import io
import tokenize
from pathlib import Path

from conftest import ROOT

PKG_DIR = ROOT / "py_udf" / "nl2sql"
PKG = "nl2sql"
FORBIDDEN_TOP_LEVEL = {"nl2sql_indexer", "tests", "bench", "conftest"}

# ``raise`` of a class that is not from errors.py, allowed with the reason: (module, class).
RAISES_OUTSIDE_ERRORS = {
    ("", "AttributeError"): "a module __getattr__'s answer for a name it does not have",
    ("client._plpy", "AttributeError"): "``spiexceptions``' __getattr__ for a private name",
    (
        "embedding.export",
        "SystemExit",
    ): "the command line's exit status (python -m nl2sql.embedding.export)",
    ("embedding._server", "SystemExit"): "the command line's exit status "
    "(python -m nl2sql.embedding._server)",
    (
        "stages.prompt_parts",
        "ValueError",
    ): "a caller's programming error (stages called out of order), not a user-facing condition",
    (
        "model.openai_call",
        "APITimeoutError",
    ): "raised inside the HTTP client's request hook past a call's "
    "hard deadline: the openai client propagates its own errors "
    "without retrying; call_model turns it into an error reply",
}


def _modules() -> dict[str, ast.Module]:
    """Every module of the server package, parsed, by dotted name under ``nl2sql``
    (``core.spi``; a package's ``__init__`` by the package's name, the top one as ``""``)."""
    out = {}
    for p in sorted(PKG_DIR.rglob("*.py")):
        parts = list(p.relative_to(PKG_DIR).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
    return out


def _is_package(name: str) -> bool:
    return name == "" or (PKG_DIR / name.replace(".", "/") / "__init__.py").exists()


def _imported(tree: ast.Module, name: str = "") -> tuple[set[str], set[str]]:
    """The package modules ``tree`` (module ``name``) imports, anywhere in it, at any depth,
    as dotted names under ``nl2sql`` (``from .x import y`` counts as module ``x``, or as
    ``x.y`` when that is a module), and the top-level names of everything else it imports.

    Args:
        tree: a parsed module of the package.
        name: its dotted name under ``nl2sql`` (relative imports resolve against it).

    Returns:
        ``(package modules, other top-level packages)``; ``".."`` among the others marks a
        relative import that leaves the package.
    """
    local: set[str] = set()
    external: set[str] = set()
    here = name.split(".") if name else []
    if not _is_package(name):
        here = here[:-1]

    def add(base: list[str], names: list[str]) -> None:
        mod = ".".join(base)
        for n in names:
            sub = ".".join([*base, n])
            is_module = (PKG_DIR / (sub.replace(".", "/") + ".py")).exists() or _is_package(sub)
            local.add(sub if is_module or not base else mod)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PKG:
                    if len(parts) > 1:
                        local.add(".".join(parts[1:]))
                else:
                    external.add(parts[0])
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                if node.level - 1 > len(here):
                    external.add("..")
                    continue
                base = here[: len(here) - (node.level - 1)] + (mod.split(".") if mod else [])
                add(base, [a.name for a in node.names])
            else:
                parts = mod.split(".")
                if parts[0] == PKG:
                    add(parts[1:], [a.name for a in node.names])
                else:
                    external.add(parts[0])
    local.discard("")
    return local, external


def _graph() -> dict[str, set[str]]:
    """Module → package modules it imports (self-edges and non-modules dropped)."""
    mods = _modules()
    graph = {}
    for name, tree in mods.items():
        local, _ = _imported(tree, name)
        graph[name] = {m for m in local if m in mods and m != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted.

    Args:
        graph: module → imported modules.

    Returns:
        Every import cycle's set of modules, sorted; empty when the graph is acyclic.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _path(graph: dict[str, set[str]], comp: list[str]) -> str:
    """One concrete cycle through ``comp``'s first module, for the failure message."""
    start, members = comp[0], set(comp)
    prev: dict[str, str] = {}
    queue = [start]
    seen = {start}
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                chain = [v]
                while chain[-1] != start:
                    chain.append(prev[chain[-1]])
                return " -> ".join([start, *reversed(chain[:-1]), start]) if v != start else start
            if w not in seen:
                seen.add(w)
                prev[w] = v
                queue.append(w)
    return " -> ".join(comp)


def test_tarjan_finds_cycles():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}, "g": set()}
    assert _cycles(g) == [["a", "b", "c"], ["e", "f"]]
    assert _path(g, ["a", "b", "c"]) == "a -> b -> c -> a"
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_import_walker_sees_every_form():
    tree = ast.parse(
        "from . import spi\nfrom .types import x\nimport nl2sql.model.gamma\n"
        "from nl2sql import delta\nfrom nl2sql.eps import y\nimport os.path\n"
        "from ..model import llm\nfrom ...outside import q\n"
        "def f():\n    from .zeta import z\n    import nl2sql_indexer.loopback\n"
    )
    local, external = _imported(tree, "core.names")
    assert local == {
        "core.spi",
        "core.types",
        "model.gamma",
        "delta",
        "eps",
        "core.zeta",
        "model.llm",
    }
    assert external == {"os", "nl2sql_indexer", ".."}


def test_no_import_cycles():
    graph = _graph()
    assert len(graph) > 20, f"too few modules found under {PKG_DIR}"
    cycles = _cycles(graph)
    assert not cycles, "import cycles in py_udf/nl2sql (lazy imports count): " + "; ".join(
        _path(graph, c) for c in cycles
    )


def test_server_package_imports_no_tooling():
    bad = []
    for name, tree in _modules().items():
        _, external = _imported(tree, name)
        hit = external & (FORBIDDEN_TOP_LEVEL | {".."})
        if hit:
            bad.append(f"{name}.py imports {', '.join(sorted(hit))}")
    assert not bad, (
        "the server package must not import the indexer, tests or benches: " + "; ".join(bad)
    )


def _is_exception_class(node: ast.ClassDef, known: set[str]) -> bool:
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if (
            name in known
            or name.endswith(("Error", "Exception", "Warning"))
            or name in {"Exception", "BaseException", "VersionMismatch", "CandidateRefused"}
        ):
            return True
    return False


def test_exception_classes_live_in_errors():
    mods = _modules()
    known = {n.name for n in ast.walk(mods["core.errors"]) if isinstance(n, ast.ClassDef)}
    assert "Nl2sqlError" in known
    stray = []
    for name, tree in mods.items():
        if name == "core.errors":
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ClassDef)
                and not node.name.startswith("_")
                and _is_exception_class(node, known)
            ):
                stray.append(f"{name}.py: class {node.name}")
    assert not stray, "exception classes must be defined in errors.py: " + "; ".join(stray)


def test_errors_module_imports_nothing_from_the_package():
    local, _ = _imported(_modules()["core.errors"], "core.errors")
    assert not local, f"errors.py must import nothing from the package, imports {sorted(local)}"


def _raised_classes(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, class name) of every ``raise Name(...)`` / ``raise Name`` in ``tree`` whose name
    starts with a capital letter (a class; ``raise e`` of a variable is not judged)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name[:1].isupper():
                out.append((node.lineno, name))
    return out


def test_raised_exceptions_are_nl2sql_errors():
    mods = _modules()
    allowed = {n.name for n in ast.walk(mods["core.errors"]) if isinstance(n, ast.ClassDef)}
    allowed.add("ConfigurationError")  # errors.py's alias of ConfigError
    bad = [
        f"{name}.py:{line}: raise {cls}"
        for name, tree in mods.items()
        for line, cls in _raised_classes(tree)
        if cls not in allowed
        and not cls.startswith("_")
        and (name, cls) not in RAISES_OUTSIDE_ERRORS
    ]
    assert not bad, (
        "raise an Nl2sqlError subclass from errors.py (or list the exception in "
        "RAISES_OUTSIDE_ERRORS with why): " + "; ".join(bad)
    )


# --- house rules -----------------------------------------------------------------------------

MAX_MODULE_LINES = 520
MAX_FOLDER_MODULES = 12
MAX_DOCSTRING_SHARE = 0.30


@functools.cache
def _sources() -> dict[str, tuple[Path, str, ast.Module]]:
    """Every module of the package by dotted name (as ``_modules``): its path, text and tree."""
    out = {}
    for p in sorted(PKG_DIR.rglob("*.py")):
        parts = list(p.relative_to(PKG_DIR).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        text = p.read_text(encoding="utf-8")
        out[".".join(parts)] = (p, text, ast.parse(text, filename=str(p)))
    return out


def _where(path: Path, line: int) -> str:
    """``py_udf/nl2sql/core/spi.py:12``: an offender's place, relative to the repository."""
    return f"{path.relative_to(ROOT)}:{line}"


def _comment_lines(text: str) -> tuple[set[int], set[int]]:
    """The lines of ``text`` holding a comment, and those holding nothing but one.

    Returns:
        ``(lines with a comment, comment-only lines)``, 1-based.
    """
    anywhere, alone = set(), set()
    lines = text.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            anywhere.add(tok.start[0])
            if lines[tok.start[0] - 1].lstrip().startswith("#"):
                alone.add(tok.start[0])
    return anywhere, alone


def _function_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement inside a function or method of ``tree`` (nested ones once)."""
    seen: dict[int, ast.Import | ast.ImportFrom] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    seen[id(node)] = node
    return sorted(seen.values(), key=lambda n: n.lineno)


def _unexplained_function_imports(text: str, tree: ast.Module) -> list[int]:
    """The lines of ``tree``'s function-level imports that do not say why they are there.

    An import is explained by a comment on one of its own lines, or by a comment-only line
    right above the block of consecutive import statements it belongs to.

    Args:
        text: the module's source.
        tree: its parse.

    Returns:
        The first line of every unexplained import, in order.
    """
    anywhere, alone = _comment_lines(text)
    import_lines = {
        line
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for line in range(node.lineno, node.end_lineno + 1)
    }
    bad = []
    for node in _function_imports(tree):
        if anywhere & set(range(node.lineno, node.end_lineno + 1)):
            continue
        above = node.lineno - 1
        while above in import_lines:
            above -= 1
        if above not in alone:
            bad.append(node.lineno)
    return bad


def test_function_imports_say_why():
    bad = [
        _where(path, line)
        for path, text, tree in _sources().values()
        for line in _unexplained_function_imports(text, tree)
    ]
    assert not bad, (
        "import at the module's top, or say on the import's line (or a comment line above its "
        "block) why it is inside a function — a heavy import kept off the question path, an "
        "import cycle avoided by design:\n" + "\n".join(bad)
    )


def test_function_import_check_reads_comments():
    text = (
        "import os\n"
        "def f():\n"
        "    import json  # cheap, but only the CLI needs it\n"
        "    # heavy: kept off the question path\n"
        "    import numpy\n"
        "    from torch import nn\n"
        "    x = 1\n"
        "    import re\n"
        "    s = '# not a comment'; import csv\n"
        "    import array  # why\n"
        "    import zlib\n"
    )
    assert _unexplained_function_imports(text, ast.parse(text)) == [8, 9, 11]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _package_of(name: str) -> str:
    """The package a module belongs to (a package's ``__init__`` belongs to itself)."""
    return name if _is_package(name) else name.rpartition(".")[0]


def _is_module(name: str) -> bool:
    return _is_package(name) or (PKG_DIR / (name.replace(".", "/") + ".py")).exists()


def _import_base(node: ast.ImportFrom, name: str) -> str | None:
    """The dotted name under ``nl2sql`` that ``node`` (in module ``name``) imports from, or
    ``None`` when it imports from outside the package."""
    mod = node.module or ""
    if node.level:
        here = name.split(".") if name else []
        if not _is_package(name):
            here = here[:-1]
        if node.level - 1 > len(here):
            return None
        base = here[: len(here) - (node.level - 1)] + (mod.split(".") if mod else [])
        return ".".join(base)
    parts = mod.split(".")
    return ".".join(parts[1:]) if parts[0] == PKG else None


def _private_reaches(name: str, tree: ast.Module) -> list[tuple[int, str]]:
    """Where module ``name`` uses another module's private name.

    Counted: ``from m import _x`` and ``m._x`` of a package module ``m`` other than ``name``
    (or ``C._x`` of a class ``C`` imported from one), and an import of a private module
    ``_m.py`` from outside its own package (its siblings, its package's ``__init__`` and the
    modules of its package's subpackages may: ``rules/joins/bridged.py`` reads ``rules/_sql.py``).

    Args:
        name: the module's dotted name under ``nl2sql``.
        tree: its parse.

    Returns:
        ``(line, what)`` for every reach, in order.
    """
    out: list[tuple[int, str]] = []
    bound: dict[str, str] = {}  # local name -> the package module it is, or comes from

    def check_module(line: int, target: str) -> None:
        last, owner = target.rpartition(".")[2], target.rpartition(".")[0]
        inside = _package_of(name) == owner or (owner and _package_of(name).startswith(owner + "."))
        if _private(last) and not inside:
            out.append((line, f"imports private module {target}"))

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _import_base(node, name)
            if base is None:
                continue
            if base:
                check_module(node.lineno, base)
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                if _is_module(sub):
                    check_module(node.lineno, sub)
                    bound[alias.asname or alias.name] = sub
                    continue
                if _private(alias.name) and base != name:
                    out.append((node.lineno, f"imports {alias.name} from {base}"))
                bound[alias.asname or alias.name] = base
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PKG and len(parts) > 1:
                    target = ".".join(parts[1:])
                    check_module(node.lineno, target)
                    if alias.asname:
                        bound[alias.asname] = target
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and bound[node.value.id] != name
            and _private(node.attr)
        ):
            out.append((node.lineno, f"uses {node.value.id}.{node.attr} of {bound[node.value.id]}"))
    return sorted(out)


def test_no_module_reaches_for_another_modules_private_names():
    bad = [
        f"{_where(path, line)}: {what}"
        for name, (path, _, tree) in _sources().items()
        for line, what in _private_reaches(name, tree)
    ]
    assert not bad, (
        "make the name public where it is defined (or keep its use inside its module); a "
        "private module is for its own package:\n" + "\n".join(bad)
    )


def test_private_reach_check_sees_every_form(monkeypatch):
    modules = {"core", "core.spi", "core._cache", "model", "model.llm"}
    monkeypatch.setitem(globals(), "_is_package", lambda n: n in {"", "core", "model"})
    monkeypatch.setitem(globals(), "_is_module", lambda n: n in modules)
    tree = ast.parse(
        "from __future__ import annotations\n"
        "from ..core.spi import _plan, query\n"
        "from ..core import spi, _cache\n"
        "from ..core._cache import get\n"
        "from . import llm\n"
        "from .llm import Client\n"
        "import nl2sql.core.spi as s\n"
        "def f():\n"
        "    return spi._plans, spi.query, llm._STATE, Client._pool, s._x, spi.__name__\n"
    )
    assert [line for line, _ in _private_reaches("model.gate", tree)] == [2, 3, 4, 9, 9, 9, 9]
    ok = ast.parse("from . import _cache\nfrom ._cache import get\nfrom .spi import query\n")
    assert _private_reaches("core.spi", ok) == []
    assert _private_reaches("core", ok) == []


def test_no_module_is_too_long():
    bad = [
        f"{_where(path, 1)}: {len(text.splitlines())} lines"
        for path, text, _ in _sources().values()
        if len(text.splitlines()) > MAX_MODULE_LINES
    ]
    assert not bad, (
        f"split modules over {MAX_MODULE_LINES} lines by what the parts do:\n" + "\n".join(bad)
    )


def test_no_folder_holds_too_many_modules():
    folders: dict[Path, list[Path]] = {}
    for path, _, _ in _sources().values():
        if path.name != "__init__.py":
            folders.setdefault(path.parent, []).append(path)
    bad = [
        f"{_where(folder / '__init__.py', 1)}: {len(mods)} modules"
        for folder, mods in sorted(folders.items())
        if len(mods) > MAX_FOLDER_MODULES
    ]
    assert not bad, (
        f"at most {MAX_FOLDER_MODULES} modules (besides __init__) per folder:\n" + "\n".join(bad)
    )


def _docstring_lines(tree: ast.Module) -> set[int]:
    """The lines spanned by the docstrings of ``tree``'s module, classes and functions."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def test_docstrings_are_at_most_their_share_of_the_package():
    per = [
        (len(_docstring_lines(tree)), len(text.splitlines()), path)
        for path, text, tree in _sources().values()
    ]
    doc, total = sum(d for d, _, _ in per), sum(n for _, n, _ in per)
    share = doc / total
    heaviest = sorted(per, key=lambda t: (-t[0] / max(t[1], 1), str(t[2])))
    worst = [
        f"{_where(path, 1)}: {d}/{n} docstring lines ({d / n:.0%})"
        for d, n, path in heaviest
        if n and d / n > MAX_DOCSTRING_SHARE
    ]
    assert share <= MAX_DOCSTRING_SHARE, (
        f"docstrings are {doc}/{total} = {share:.1%} of py_udf/nl2sql's lines (at most "
        f"{MAX_DOCSTRING_SHARE:.0%}): keep the summary, Args/Returns/Raises, shapes, units and "
        "the paper; move design prose to docs/. Modules over the share:\n" + "\n".join(worst)
    )


def test_subpackages_say_what_they_hold():
    bad = []
    for name, (path, _, tree) in _sources().items():
        if not name or path.name != "__init__.py":
            continue
        if not ast.get_docstring(tree):
            bad.append(f"{_where(path, 1)}: no docstring")
        if not any(
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and any(
                isinstance(t, ast.Name) and t.id == "__all__"
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
            )
            for node in tree.body
        ):
            bad.append(f"{_where(path, 1)}: no __all__")
    assert not bad, (
        "every subpackage's __init__ says in a docstring what it holds and lists __all__:\n"
        + "\n".join(bad)
    )
