"""YAML that explodes, read by ``import_semantic_model``'s parser (``cortex.parse`` over
``semantic._bounded_yaml``): alias bombs of every shape, nesting past the depth bound (flow,
block, through aliases), aliases inside their own anchor, too many aliases — each refused
before its objects are built, quickly, in little memory, with a message naming the bound; the
cancel check runs while a large text is parsed. tests/db/test_semantic_model.py runs the
same inside PostgreSQL (cancel included)."""

from __future__ import annotations

import tracemalloc

import pytest
import yaml

from nl2sql.core.errors import ConfigError
from nl2sql.semantic import _bounded_yaml, cortex
from nl2sql.semantic._bounded_yaml import MAX_ALIASES, MAX_DEPTH, load

HEAD = "name: m\ntables:\n  - name: t\n    base_table: {table: t}\n"
EXPANDED = "with its aliases .\\*name. expanded .a YAML alias bomb.*semantic_model_max_bytes"


def laughs(open_: str, close: str, item: str, levels: int = 10, width: int = 10) -> str:
    """The billion-laughs shape: each level a collection of ``width`` aliases of the last."""
    lines = [f"    l0: &l0 {open_}{', '.join([item] * width)}{close}"]
    for i in range(1, levels):
        refs = ", ".join([f"*l{i - 1}"] * width)
        if open_ == "{":
            refs = ", ".join(f"k{j}: *l{i - 1}" for j in range(width))
        lines.append(f"    l{i}: &l{i} {open_}{refs}{close}")
    return HEAD + "\n".join(lines) + "\n"


def merge_bomb(levels: int = 10, width: int = 10) -> str:
    """Merge keys (``<<``) of the same mapping, ``width`` times a level."""
    lines = ["    m0: &m0 {a: 1, b: 2}"]
    for i in range(1, levels):
        lines.append(f"    m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * width)}]}}")
    return HEAD + "\n".join(lines) + "\n"


def chain(n: int) -> str:
    """Each anchor a sequence holding the one before: shallow text, deep once expanded."""
    lines = ["    c0: &c0 [1]"] + [f"    c{i}: &c{i} [*c{i - 1}]" for i in range(1, n)]
    return HEAD + "\n".join(lines) + "\n"


EXPLODING = [
    ("sequences of sequences", laughs("[", "]", '"lol"'), EXPANDED),
    ("mappings of mappings", laughs("{", "}", "k: lol"), EXPANDED),
    ("empty strings", laughs("[", "]", "''", levels=12), EXPANDED),
    ("merge keys", merge_bomb(), EXPANDED),
    ("a long scalar, aliased", HEAD + "    s: &s " + "x" * 60_000 + "\n    r: [" + ", ".join(["*s"] * 40) + "]\n", EXPANDED),
    ("in the dbt spec", "semantic_models:\n  - name: x\n" + laughs("[", "]", "1")[len(HEAD) :], EXPANDED),
    ("flow nesting", HEAD + "    extra: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5), "nests deeper than 64 levels"),
    ("flow nesting, 100,000 deep", HEAD + "    extra: " + "[" * 100_000 + "]" * 100_000, "maximum nesting depth|nests deeper than 64"),
    ("block nesting", HEAD + "".join(f"{'  ' * (i + 2)}k{i}:\n" for i in range(200)), "nests deeper than 64 levels"),
    ("mapping keys nesting", HEAD + "    extra: " + "{a: " * 100 + "1" + "}" * 100, "nests deeper than 64"),
    ("depth through aliases", chain(200), "nests deeper than 64 levels .* .aliases expanded."),
    ("an alias in its own sequence", HEAD + "    r: &r [1, *r]\n", "alias \\*r inside its own anchor &r"),
    ("an alias in its own mapping", HEAD + "    r: &r {a: {b: *r}}\n", "alias \\*r inside its own anchor"),
    ("too many aliases", HEAD + "    a: &a x\n    b: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n", f"more than {MAX_ALIASES} alias references"),
]  # fmt: skip


@pytest.fixture(params=["libyaml", "pure Python"])
def parser(request, monkeypatch):
    """Both parsers PyYAML may have: libyaml's (when built with it) and its own."""
    if request.param == "pure Python":
        monkeypatch.setattr(_bounded_yaml, "_Loader", _bounded_yaml._PyLoader)
    elif _bounded_yaml._Loader is _bounded_yaml._PyLoader:
        pytest.skip("PyYAML without libyaml")
    return request.param


@pytest.mark.parametrize("name, text, says", EXPLODING, ids=[e[0] for e in EXPLODING])
def test_yaml_that_explodes_is_refused_before_it_is_built(parser, name, text, says):
    assert len(text.encode()) < 400_000
    # the memory peak is the bound (an expansion allocates as it goes); no wall-clock bound,
    # which a loaded machine stretches (tracemalloc slows the pure-Python parser several-fold)
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match=says):
            cortex.parse(text, 1_048_576)
    finally:
        _size, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB while refusing {name}"


def test_the_expansion_bound_is_the_size_setting():
    text = laughs("[", "]", "1", levels=4, width=10)  # 1 + 10 + 100 + 1,000 nodes at l3
    assert cortex.parse(text, 100_000)[0]["tables"][0]["l3"][0][0][0] == [1] * 10
    with pytest.raises(ConfigError, match="more than 2,048 characters and nodes"):
        cortex.parse(text, 2048)


def test_aliases_within_the_bounds_read_as_safe_load_reads_them(parser):
    text = (
        HEAD
        + "    synonyms: &syn [sales, revenue]\n"
        + "    facts:\n"
        + "      - {name: a, expr: amount, synonyms: *syn}\n"
        + "      - {name: b, expr: amount, synonyms: *syn}\n"
        + "    base: &base {description: shared}\n"
        + "    merged: {<<: *base, name: x}\n"
        + "    when: 2026-01-05\n"
        + "    deep: "
        + "[" * (MAX_DEPTH - 4)
        + "]" * (MAX_DEPTH - 4)
        + "\n"
    )
    assert load(text, 1_048_576, "it") == yaml.safe_load(text)


@pytest.mark.parametrize(
    "text",
    ["a: *nowhere", "--- a\n--- b", "a: [1", "? [a]\n: 1", "a: !!python/object:os.system x"],
)
def test_what_safe_load_refuses_is_still_refused_as_not_yaml(parser, text):
    with pytest.raises(yaml.YAMLError):
        load(text, 1_048_576, "it")


def big_model(tables: int) -> str:
    """A plain model (no aliases) of ``tables`` tables of 20 dimensions each."""
    out = ["name: big", "tables:"]
    for i in range(tables):
        out += [f"  - name: t{i}", f"    base_table: {{schema: public, table: t{i}}}"]
        out.append("    dimensions:")
        out += [f"      - {{name: d{j}, expr: c{j}, synonyms: [a b, c d]}}" for j in range(20)]
    return "\n".join(out) + "\n"


def test_the_cancel_check_runs_while_parsing_and_stops_it(parser, monkeypatch):
    # counted on a clock that advances TICK_S at each look, not timed (a loaded machine would
    # stretch any wall-clock bound): the check runs at every look, all through the parse, and a
    # cancel raised by it stops the parse at once
    from nl2sql.semantic import _bounded_yaml as B

    now = [0.0]

    def clock() -> float:
        now[0] += B.TICK_S
        return now[0]

    monkeypatch.setattr(B.time, "monotonic", clock)
    text = big_model(400)  # about 0.5 MB: 400 tables of 20 dimensions
    calls: list[int] = []
    cortex.parse(text, 10**8, tick=lambda: calls.append(1))
    nodes = 400 * 20 * 8  # at least: a dimension is a mapping of 3 keys and a list of 2
    assert len(calls) >= nodes // B._EVERY

    class Cancelled(Exception):
        pass

    cancels: list[int] = []

    def cancel():
        cancels.append(1)
        raise Cancelled

    with pytest.raises(Cancelled):
        cortex.parse(text, 10**8, tick=cancel)
    assert cancels == [1]
