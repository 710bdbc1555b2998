"""Structured inputs that explode, inside PostgreSQL (issue 31 §2): YAML alias bombs and deep
nesting given to ``nl2sql.import_semantic_model`` are refused at once with an error naming
the bound, the backend's memory unchanged; a large YAML being parsed answers cancel and
terminate within a second; ``load_examples``' JSON, ``calibrate``'s judged and
``set_setting``'s values refuse their hostile shapes with ``nl2sql.`` errors, never an
internal one. The parsers' cases without a server: tests/unit/semantic/test_bounded_yaml.py,
tests/unit/retrieval/test_example_pool.py, tests/unit/core/test_settings.py,
tests/unit/selection/test_reliability.py."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest

from conftest import DEMO_DB

HEAD = "name: m\ntables:\n  - name: t\n    base_table: {table: singer}\n"


def laughs(levels: int = 10, width: int = 10) -> str:
    """Billion laughs: 10 levels of 10 aliases of the level before (10^10 once expanded)."""
    lines = [f"    l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"    l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return HEAD + "\n".join(lines) + "\n"


def merge_bomb(levels: int = 10, width: int = 10) -> str:
    lines = ["    m0: &m0 {a: 1, b: 2}"]
    for i in range(1, levels):
        lines.append(f"    m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * width)}]}}")
    return HEAD + "\n".join(lines) + "\n"


BOMBS = [
    ("billion laughs", laughs(), "with its aliases .\\*name. expanded"),
    ("merge keys", merge_bomb(), "with its aliases .\\*name. expanded"),
    ("flow nesting", HEAD + "    x: " + "[" * 5000 + "]" * 5000, "nesting depth|nests deeper"),
    ("block nesting", HEAD + "".join(f"{'  ' * (i + 2)}k{i}:\n" for i in range(500)), "nests deeper than 64"),
    ("alias chain", HEAD + "    c0: &c0 [1]\n" + "".join(f"    c{i}: &c{i} [*c{i - 1}]\n" for i in range(1, 300)), "nests deeper than 64"),
    ("recursive alias", HEAD + "    r: &r [1, *r]\n", "inside its own anchor"),
]  # fmt: skip


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for backend {pid}")


@pytest.mark.parametrize("name, text, says", BOMBS, ids=[b[0] for b in BOMBS])
def test_a_yaml_bomb_is_refused_at_once_naming_the_bound(db, name, text, says):
    pid = db.info.backend_pid
    with pytest.raises(psycopg.Error, match="not a semantic model"):  # the modules loaded
        db.execute("SELECT nl2sql.import_semantic_model('x: 1')")
    before = rss_kb(pid)
    t0 = time.monotonic()
    with pytest.raises(psycopg.Error, match=f"nl2sql.import_semantic_model: .*({says})"):
        db.execute("SELECT nl2sql.import_semantic_model(%s)", (text,))
    assert time.monotonic() - t0 < 5
    assert rss_kb(pid) - before < 64 * 1024, f"the backend grew refusing {name}"
    assert db.execute("SELECT count(*) FROM nl2sql.semantic_table").fetchone()[0] == 0


def big_model(tables: int) -> str:
    """A plain model (no alias) of ``tables`` tables of 20 dimensions each, ~1.4 KB a table."""
    out = ["name: big", "tables:"]
    for i in range(tables):
        out += [f"  - name: t{i}", f"    base_table: {{schema: public, table: t{i}}}"]
        out.append("    dimensions:")
        out += [f"      - {{name: d{j}, expr: c{j}, synonyms: [a b, c d]}}" for j in range(20)]
    return "\n".join(out) + "\n"


@pytest.fixture
def large_yaml_allowed(db):
    db.execute("SELECT nl2sql.set_setting('semantic_model_max_bytes', '67108864')")
    yield big_model(4000)  # about 5.6 MB: several seconds of parsing here
    db.execute("SELECT nl2sql.reset_setting('semantic_model_max_bytes')")


@pytest.mark.parametrize("how", ["pg_cancel_backend", "pg_terminate_backend"])
def test_a_large_yaml_being_parsed_answers_cancel_and_terminate(
    cluster, db, large_yaml_allowed, how
):
    text = large_yaml_allowed
    with cluster.connect(DEMO_DB) as other:
        pid = other.info.backend_pid
        result: dict = {}

        def run():
            try:
                other.execute("SELECT nl2sql.import_semantic_model(%s)", (text,))
            except psycopg.Error as e:
                result["error"] = e
            result["done"] = time.monotonic()

        th = threading.Thread(target=run)
        th.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the call runs, then 1 s into the parse
            state = db.execute(
                "SELECT state FROM pg_stat_activity WHERE pid = %s", (pid,)
            ).fetchone()
            if state and state[0] == "active":
                break
            time.sleep(0.02)
        time.sleep(1.0)
        assert "done" not in result, "the import finished before it could be cancelled"
        t0 = time.monotonic()
        db.execute(f"SELECT {how}(%s)", (pid,))
        th.join(15)
        took = result.get("done", float("inf")) - t0
        assert took < 1.5, f"{how} took {took:.2f} s"
        if how == "pg_cancel_backend":
            assert "canceling statement due to user request" in str(result["error"])
            assert other.execute("SELECT 1").fetchone()[0] == 1
        else:
            assert "terminat" in str(result["error"]) or other.closed or other.broken


HOSTILE_EXAMPLES = [
    ("[" * 100_000 + "]" * 100_000, "nl2sql.load_examples: data nests deeper than 64 levels"),
    ('[{"question": "q", "x": ' + '{"a": ' * 80 + "1" + "}" * 80 + "}]", "data nests deeper"),
    ("[1, 2", "nl2sql.load_examples: data is not JSON"),
    ("x" * (32 * 2**20 + 1), "more than nl2sql.load_examples reads at once"),
]


@pytest.mark.parametrize("data, says", HOSTILE_EXAMPLES, ids=lambda x: str(x)[:20])
def test_hostile_example_json_gets_an_nl2sql_error(db, data, says):
    with pytest.raises(psycopg.Error, match=says):
        db.execute("SELECT nl2sql.load_examples(%s, 'sqlite')", (data,))


def test_example_items_and_tables_of_the_wrong_shape(db):
    data = '[[1], "SELECT 1", {"question": ["q"], "query": "SELECT 1"}]'
    out = db.execute("SELECT nl2sql.load_examples(%s, 'sqlite')", (data,)).fetchone()[0]
    assert out["loaded"] == 0 and [f["index"] for f in out["failed"]] == [0, 1, 2]
    assert "not a JSON object" in out["failed"][0]["error"]
    assert "question is not a text" in out["failed"][2]["error"]
    with pytest.raises(psycopg.Error, match=r"nl2sql.load_examples: tables\[0\] is not a Spider"):
        db.execute("SELECT nl2sql.load_examples('[]', 'sqlite', '[{\"x\": 1}]')")
    with pytest.raises(psycopg.Error, match="tables nests deeper than 64 levels"):
        db.execute("SELECT nl2sql.load_examples('[]', 'sqlite', %s)", ("[" * 5000 + "]" * 5000,))


@pytest.mark.parametrize(
    "judged, says",
    [
        # Python 3.11's json parser stops at its recursion limit; 3.13's C parser reads this
        # depth, and the shape check refuses it: a clear nl2sql error either way
        ("[" * 3000 + "]" * 3000, "nested too deeply|judged item 0 is not"),
        (
            '[{"level": "easy", "candidates": [{"model": "a", "right": true, "group": [1]}]}]',
            "judged item 0",
        ),
    ],
    ids=["deep", "group"],
)
def test_hostile_judged_json_gets_an_nl2sql_error(db, judged, says):
    with pytest.raises(psycopg.Error, match=f"nl2sql.calibrate: .*{says}|stack depth"):
        db.execute("SELECT nl2sql.calibrate(%s::jsonb)", (judged,))


@pytest.mark.parametrize(
    "key, value, says",
    [
        (
            "hardness_voters",
            "[" * 5000 + "]" * 5000,
            "nested too deeply|more than 10,000|expected a JSON object",  # (3.11 | 3.13's json)
        ),
        ("hardness_voters", '{"easy": [["m"]]}', "non-empty list of model names"),
        ("schemas", "s," * 600_000, "the value has 1,200,000 characters, more than 10,000"),
        ("tie_break", "x" * 5000, r"… \(5,002 characters\)"),
    ],
    ids=["deep", "nested names", "long list", "long enum"],
)
def test_hostile_setting_values_get_a_short_nl2sql_error(db, key, value, says):
    with pytest.raises(psycopg.Error, match=says) as err:
        db.execute("SELECT nl2sql.set_setting(%s, %s)", (key, value))
    assert len(str(err.value)) < 1000
