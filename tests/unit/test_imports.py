"""The server package's shape, checked from its source with ``ast`` (nothing is imported):

* no import cycle among the modules of ``py_udf/nl2sql`` — module-level and function-level
  (lazy) imports both count as edges;
* no module of the server package imports the indexer package, the tests or the benchmarks;
* every exception class the package defines lives in ``errors.py`` (private ``_`` names aside),
  and every ``raise`` of a named class raises one of those (or a listed exception).
"""

from __future__ import annotations

import ast

from conftest import ROOT

PKG_DIR = ROOT / "py_udf" / "nl2sql"
PKG = "nl2sql"
FORBIDDEN_TOP_LEVEL = {"nl2sql_indexer", "tests", "bench", "conftest"}

# ``raise`` of a class that is not from errors.py, allowed with the reason: (module, class).
RAISES_OUTSIDE_ERRORS = {
    (
        "embedding.encode",
        "SystemExit",
    ): "the command line's exit status (python -m nl2sql.embedding.encode)",
    ("embedding.server", "SystemExit"): "the command line's exit status "
    "(python -m nl2sql.embedding.server)",
    (
        "retrieval.prompt_parts",
        "ValueError",
    ): "a caller's programming error (stages called out of order), not a user-facing condition",
    ("model.llm", "APITimeoutError"): "raised inside the HTTP client's request hook past a call's "
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
