"""Settings declared once (py_udf/nl2sql/core/settings.py): every default parses, bounds and
choices are enforced, the markdown table is printed from the declaration (tests/test_docs.py
checks docs/settings.md holds it), the SQL VALUES list is well quoted, and no module of the
package casts a setting by hand. Pure Python: no database."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys

import pytest

from conftest import ROOT
from nl2sql.core import settings as S
from nl2sql.core import settings_export as E
from nl2sql.core.errors import ConfigError
from nl2sql.core.settings import validate_setting

PACKAGE = ROOT / "py_udf" / "nl2sql"
NAMES = {s.name for s in S.SETTINGS}

# Today's names and default texts (sql/000_tables.sql before settings were declared in Python).
PREVIOUS_DEFAULTS = {
    "k_examples": "9",
    "candidate_timeout_ms": "5000",
    "max_rows": "10000",
    "schemas": "public",
    "sample_values": "3",
    "presql_votes": "off",
    "question_max_chars": "4000",
    "request_expire_s": "600",
    "request_time_limit_s": "120",
    "request_rows": "1000",
    "values_per_column": "100000",
    "value_max_chars": "200",
    "reindex_part_rows": "100000",
    "llm_timeout_s": "60",
    "llm_max_retries": "2",
    "llm_reasoning_max_tokens": "8192",
    "llm_max_output_tokens": "32768",
    "send_values": "on",
    "agent_values": "gated",
    "embedder": "shared",
    "embedding_model": "local",
    "embedding_precision": "fp32",
    "value_embedding": "model",
    "prompt_variants": "1",
    "samples_per_model": "1",
    "sample_temperature": "1.0",
    "repair_rounds": "3",
    "rules_off": "",
    "value_alignment": "on",
    "align_min_trigram": "0.4",
    "align_min_cosine": "0.8",
    "confidence_threshold": "0.2",
    "tie_break": "fastest",
    "selection": "majority",
    "selection_model": "",
    "hardness_voters": "",
    "rewrite_time": "on",
    "value_top_k": "10",
    "value_trgm_min": "0.5",
    "value_vector_min": "0.8",
    "value_vector_phrases": "8",
    "link_value_min": "0.9",
    "link_column_min": "0.7",
    "dail_tau": "0.6",
    "dail_candidates": "50",
    "prompt_token_budget": "3000",
    "max_result_bytes": "50000000",
    "max_plan_cost": "100000000.0",
    "max_plan_rows": "1000000000.0",
    "value_sample_rows": "1000000",
    "reliability_vote": "on",
    "verified_min_similarity": "0.93",
    "verified_examples": "3",
    "term_top_k": "5",
    "term_min_similarity": "0.55",
    "instruction_top_k": "5",
    "semantic_model_max_bytes": "1048576",
    "query_log_retention_days": "30",
    "abstain_below": "0",
    "abstain_readings": "3",
    "conversation_turns": "5",
    "narrate_model": "",
    "narrate_rows": "20",
    "explain_sql_in_trace": "off",
    "model_rounds": "auto",
    # "always" until 2026-11-29; "auto" gives a model on a local server its examples on failure
    "examples_when": "auto",
}


# --- the declaration ---------------------------------------------------------------------------


def test_names_and_default_texts_are_unchanged():
    assert {s.name: s.default_text for s in S.SETTINGS} == PREVIOUS_DEFAULTS


@pytest.mark.parametrize("s", S.SETTINGS, ids=lambda s: s.name)
def test_every_default_parses_to_its_declared_type(s):
    value = s.parse(s.default_text)
    assert value == s.default
    assert isinstance(value, s.python_type)
    assert s.normalize(s.default_text) == s.format(value)
    assert s.meaning.strip()
    if s.type == "enum":
        assert s.default in s.choices


def test_settings_object_is_typed_and_frozen():
    st = S.default_settings()
    assert [f.name for f in dataclasses.fields(st)] == [s.name for s in S.SETTINGS]
    assert st.k_examples == 9 and isinstance(st.k_examples, int)
    assert st.dail_tau == 0.6 and st.llm_timeout_s == 60.0 and isinstance(st.llm_timeout_s, float)
    assert st.presql_votes is False and st.value_alignment is True
    assert st.schemas == ("public",) and st.hardness_voters == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        st.k_examples = 3


def test_stored_values_override_defaults_and_missing_rows_mean_default():
    st = S.settings_from_texts(
        {
            "k_examples": "4",
            "presql_votes": "on",
            "schemas": "a, b",
            "hardness_voters": '{"easy": ["m"]}',
            "retired_key": "x",
        }
    )
    assert st.k_examples == 4 and st.presql_votes is True and st.schemas == ("a", "b")
    assert st.hardness_voters == {"easy": ["m"]}
    assert st.max_rows == 10000  # no row: the default
    with pytest.raises(ConfigError, match="k_examples.*nl2sql.set_setting"):
        S.settings_from_texts({"k_examples": "many"})


def test_get_settings_reads_the_table_through_spi():
    class FakePlpy:
        def execute(self, *a, **kw):
            return [{"key": "value_top_k", "value": "12"}]

        def prepare(self, *a, **kw):
            return object()

    st = S.get_settings(FakePlpy())
    assert st.value_top_k == 12 and st.k_examples == 9


# --- validation ----------------------------------------------------------------------------------


def _out_of_range(s):
    """Values just outside ``s``'s bounds (and an unparsable one)."""
    bad = {"str": [], "list": [" , "]}.get(s.type, ["not a value"])
    if s.minimum is not None:
        bad.append(str(s.minimum if s.minimum_exclusive else s.minimum - 1))
    if s.maximum is not None:
        bad.append(str(s.maximum + 1))
    return bad


@pytest.mark.parametrize("s", [s for s in S.SETTINGS if _out_of_range(s)], ids=lambda s: s.name)
def test_bounds_are_enforced_with_the_name_the_value_and_the_range(s):
    for bad in _out_of_range(s):
        with pytest.raises(ConfigError) as e:
            s.parse(bad)
        msg = str(e.value)
        assert s.name in msg and repr(bad) in msg, msg
        if s.type in ("int", "float", "enum", "bool"):
            assert s.allowed() in msg, msg


def test_bounds_are_inclusive_unless_declared_exclusive():
    assert S.lookup("repair_rounds").parse("3") == 3
    assert S.lookup("prompt_token_budget").parse("500") == 500
    assert S.lookup("dail_tau").parse("1") == 1.0 and S.lookup("dail_tau").parse("0") == 0.0
    with pytest.raises(ConfigError, match="llm_timeout_s.*> 0"):
        S.lookup("llm_timeout_s").parse("0")
    with pytest.raises(ConfigError, match="dail_tau"):
        S.lookup("dail_tau").parse("nan")


def test_validate_setting_normalizes_like_before():
    assert S.validate_setting("repair_rounds", " 2 ") == "2"
    assert S.validate_setting("dail_tau", " 0.7 ") == "0.7"
    assert S.validate_setting("llm_timeout_s", "30") == "30.0"
    assert S.validate_setting("presql_votes", "TRUE") == "on"
    assert S.validate_setting("selection", "Multiple_Choice") == "multiple_choice"
    assert S.validate_setting("hardness_voters", "off") == ""
    assert S.validate_setting("selection_model", " judge ") == "judge"
    assert S.validate_setting("schemas", " a , b,") == "a,b"
    with pytest.raises(ConfigError, match="schemas"):
        S.validate_setting("schemas", " , ")


def test_unknown_setting_lists_close_names():
    with pytest.raises(ConfigError) as e:
        S.validate_setting("k_example", "3")
    msg = str(e.value)
    assert "unknown setting 'k_example'" in msg and "did you mean k_examples" in msg
    with pytest.raises(
        ConfigError,
        match="known settings: abstain_below, abstain_readings, agent_values, align_min_cosine",
    ):
        S.validate_setting("zzz", "3")


# --- generated markdown table and SQL -------------------------------------------------------------


def test_markdown_cli_prints_the_table():
    out = subprocess.run(
        [sys.executable, "-m", "nl2sql.core.settings_export", "--markdown"],
        cwd=ROOT / "py_udf",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == E.markdown_table()


def _split_sql_literals(row: str) -> list[str]:
    """The string literals of one VALUES row ``('a', 'b''c')``, unquoted; asserts that nothing
    but literals, commas and blanks sits between them (a small scanner, no regex)."""
    assert row.startswith("(") and row.endswith(")"), row
    body, out, i = row[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch in ", ":
            i += 1
            continue
        assert ch == "'", f"not a literal at {body[i : i + 20]!r}"
        i, buf = i + 1, []
        while True:
            if body[i] == "'":
                if i + 1 < len(body) and body[i + 1] == "'":
                    buf.append("'")
                    i += 2
                    continue
                i += 1
                break
            buf.append(body[i])
            i += 1
        out.append("".join(buf))
    return out


def test_sql_values_quotes_every_literal():
    text = E.sql_values()
    assert text.startswith("VALUES\n")
    rows = [r.strip().rstrip(",") for r in text[len("VALUES\n") :].split("\n")]
    parsed = [_split_sql_literals(r) for r in rows]
    assert parsed == [[s.name, s.type, s.default_text, s.meaning] for s in S.SETTINGS]
    assert any("'" in s.meaning for s in S.SETTINGS)  # the quoting is exercised ("database's")


# what each settings module may import from the package (the build script imports them)
LIGHT_IMPORTS = {
    "settings.py": {"spi", "errors", "types", "_setting_declaration"},
    "_setting_declaration.py": {"errors"},
    "settings_export.py": {"errors", "settings"},
}


@pytest.mark.parametrize("module", sorted(LIGHT_IMPORTS))
def test_settings_module_imports_only_light_modules(module):
    tree = ast.parse((PACKAGE / "core" / module).read_text())
    local = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            local.update(a.name for a in node.names) if node.module is None else local.add(
                node.module
            )
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for m in mods:
                assert m.split(".")[0] in sys.stdlib_module_names, m
    assert local <= LIGHT_IMPORTS[module], local


# --- no hand casts left --------------------------------------------------------------------------

CASTS = {"int", "float", "bool", "str"}


def _setting_key(node: ast.AST) -> str | None:
    """The setting name ``node`` reads by key — ``x["k_examples"]`` or ``x.get("k_examples")``
    — or None."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.slice, ast.Constant)
        and node.slice.value in NAMES
    ):
        return node.slice.value
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value in NAMES
    ):
        return node.args[0].value
    return None


def hand_casts(source: str) -> list[str]:
    """Places in ``source`` that read a setting by key and convert it by hand:
    ``int(st["k"])``, ``float(st.get("k"))``, ``st["k"] == "on"``, ``st["k"].split(",")``, and
    any key read of ``get_settings(...)``'s result."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in CASTS
            and node.args
        ):
            key = _setting_key(node.args[0])
            if key:
                found.append(f"line {node.lineno}: {node.func.id}(…[{key!r}])")
        elif isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                key = _setting_key(side)
                others = [n for n in [node.left, *node.comparators] if n is not side]
                if key and any(
                    isinstance(o, ast.Constant) and o.value in ("on", "off") for o in others
                ):
                    found.append(f"line {node.lineno}: …[{key!r}] compared with on/off")
        elif isinstance(node, ast.Attribute) and node.attr == "split" and _setting_key(node.value):
            found.append(f"line {node.lineno}: …[{_setting_key(node.value)!r}].split")
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, (ast.Name, ast.Attribute))
            and getattr(node.value.func, "id", getattr(node.value.func, "attr", ""))
            == "get_settings"
        ):
            found.append(f"line {node.lineno}: get_settings(…)[…]")
    return found


@pytest.mark.parametrize(
    "snippet",
    [
        'n = int(st["k_examples"])',
        'f = float(settings.get("dail_tau"))',
        'if st["presql_votes"] == "on": pass',
        'if "off" != cfg["rewrite_time"]: pass',
        's = get_settings(plpy)["schemas"].split(",")',
        'x = get_settings(plpy)["max_rows"]',
    ],
)
def test_the_hand_cast_check_catches_casts(snippet):
    assert hand_casts(snippet), snippet


def test_the_hand_cast_check_leaves_typed_access_and_other_keys_alone():
    assert (
        hand_casts(
            'n = st.k_examples\nm = int(r["max_tokens"])\nraw.get("x", {})\n'
            'if st.selection == "multiple_choice": pass'
        )
        == []
    )


def test_no_module_casts_a_setting_by_hand():
    problems = {p.name: hand_casts(p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))}
    assert len(problems) > 10  # the walk saw the package
    assert {k: v for k, v in problems.items() if v} == {}


@pytest.mark.parametrize(
    "key,bad",
    [
        ("repair_rounds", "4"),
        ("repair_rounds", "x"),
        ("confidence_threshold", "1.2"),
        ("prompt_variants", "0"),
        ("samples_per_model", "17"),
        ("tie_break", "random"),
        ("selection", "vote"),
        ("value_alignment", "maybe"),
        ("sample_temperature", "3"),
    ],
)
def test_generation_settings_are_validated(key, bad):
    with pytest.raises(ConfigError, match=key):
        validate_setting(key, bad)


def test_generation_settings_normalize():
    assert validate_setting("repair_rounds", " 2 ") == "2"
    assert validate_setting("selection", "Multiple_Choice") == "multiple_choice"
    assert validate_setting("value_alignment", "false") == "off"
    assert validate_setting("hardness_voters", '{"easy": ["a", "a"]}') == '{"easy": ["a"]}'


# set_setting's values, hostile: refused with a message that names the setting and quotes at
# most 200 characters of the value, never an internal error
@pytest.mark.parametrize(
    "key, value, says",
    [
        # Python 3.11's json parser stops at its recursion limit; 3.13's reads this depth and the
        # shape check refuses it
        ("hardness_voters", "[" * 5000 + "]" * 5000, "nested too deeply|expected a JSON object"),
        (
            "hardness_voters",
            '{"easy": ' + "[" * 900 + "]" * 900 + "}",
            "nested too deeply|must map",
        ),
        ("hardness_voters", '{"easy": [["a"]]}', "must map to a non-empty list of model names"),
        ("hardness_voters", '{"easy": ["a"]' + ", " * 6000 + "}", "more than 10,000"),
        ("schemas", "a," * 6000, "the value has 12,000 characters, more than 10,000"),
        ("repair_rounds", "9" * 9000, "got '9999"),
        ("k_examples", "1e999", "got '1e999'"),
        ("tie_break", "x" * 5000, r"got 'xxxx.*… \(5,002 characters\)$"),
    ],
)
def test_hostile_setting_values_are_refused_naming_the_setting(key, value, says):
    with pytest.raises(ConfigError, match=says) as e:
        validate_setting(key, value)
    assert key in str(e.value) and len(str(e.value)) < 800


def test_an_unknown_setting_of_a_megabyte_is_named_in_200_characters():
    with pytest.raises(ConfigError, match="unknown setting 'kkkk") as e:
        validate_setting("k" * 2**20, "1")
    assert len(str(e.value)) < 3000
