"""cleaning: model text to SQL, one test per rule, each step recorded."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import FIXTURES
from nl2sql.core import sqlcheck
from nl2sql.core.errors import CandidateRefused
from nl2sql.core.sqlcheck import check_candidate
from nl2sql.generation.cleaning import clean, clean_model_output


def test_clean_model_output_rules():
    assert clean_model_output("```sql\nSELECT 1;\n```") == "SELECT 1"
    assert clean_model_output("Sure! Here is the query:\nSELECT a FROM t") == "SELECT a FROM t"
    assert clean_model_output("SELECT a\\_b FROM t;") == "SELECT a_b FROM t"
    assert clean_model_output(None) == ""
    # a lone closing fence after the SQL, and prose after it that contains "with"
    assert clean_model_output("SELECT a FROM t;\n```") == "SELECT a FROM t"
    assert (
        clean_model_output("SELECT a FROM t;\n```\n\nThis query works with full_name 'x'.")
        == "SELECT a FROM t"
    )
    assert (
        clean_model_output("WITH x AS (SELECT 1) SELECT * FROM x")
        == "WITH x AS (SELECT 1) SELECT * FROM x"
    )


def _unescape(text: str) -> str:
    """A fixture field with its escapes resolved: ``\\n`` a line break, ``\\\\`` a backslash."""
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\"}[m.group(1)], text)


def read_cases(path: Path = FIXTURES / "cleaning.txt") -> list[tuple[str, str, str]]:
    """(model text, SQL, steps) of each line ``step(s) | model text | SQL`` (``#``: comments)."""
    cases = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            steps, text, sql = line.split(" | ", 2)
            cases.append((_unescape(text), _unescape(sql), steps))
    return cases


@pytest.mark.parametrize("text,sql,steps", read_cases())
def test_each_cleaning_rule_is_applied_and_recorded(text, sql, steps):
    out = clean(text)
    assert out.sql == sql
    for step in steps.split(","):
        assert step.strip() in out.steps


def test_semicolon_inside_a_string_is_not_the_statement_end():
    out = clean("SELECT name FROM singer WHERE country = 'a;b'; -- done\nbye")
    assert out.sql == "SELECT name FROM singer WHERE country = 'a;b'"


def test_a_second_statement_is_kept_for_the_check_to_refuse():
    out = clean("SELECT count(*) FROM singer; SELECT 1")
    assert ";" in out.sql and "trailing_prose" not in out.steps
    with pytest.raises(CandidateRefused, match="exactly one statement"):
        check_candidate(out.sql, {"singer"})
    # a further statement that writes is refused by cleaning itself, naming it
    out = clean("SELECT count(*) FROM singer;\n-- and now\nDROP TABLE singer;")
    assert out.sql == "" and out.steps == ["refused"]
    assert out.reason == "the reply writes or controls the transaction: DROP"


def test_hash_is_kept_when_postgres_reads_it_as_xor():
    out = clean("SELECT 5 # 3")
    assert out.sql == "SELECT 5 # 3" and "hash_comment" not in out.steps


def test_mysql_backticks_are_transpiled_when_postgres_cannot_parse_them():
    out = clean("SELECT `name` FROM `singer` WHERE `age` > 30")
    assert out.steps[-1].startswith("transpile:")
    assert "`" not in out.sql and '"name"' in out.sql


def test_sqlite_model_text_is_transpiled_double_quoted_strings_become_literals():
    out = clean('SELECT name FROM singer WHERE country = "France"', dialect="sqlite")
    assert out.sql == "SELECT name FROM singer WHERE country = 'France'"
    assert out.steps == ["transpile:sqlite"]


def test_postgres_text_needs_no_step_and_unknown_dialect_is_refused():
    out = clean("SELECT 1")
    assert out.sql == "SELECT 1" and out.steps == []
    with pytest.raises(ValueError, match="dialect"):
        clean("SELECT 1", dialect="oracle")


# --- bounded work on model output, and answers that are no answer ---------------------------

from adversarial_corpus import OVERSIZED  # noqa: E402
from nl2sql.generation import cleaning  # noqa: E402
from nl2sql.retrieval.example_pool import sql_skeleton  # noqa: E402


@pytest.mark.parametrize("cid,text,why", OVERSIZED, ids=[c[0] for c in OVERSIZED])
def test_oversized_nul_and_comment_only_answers_are_refused_with_a_reason(cid, text, why):
    c = clean(text)
    assert c.sql == ""
    assert c.reason and why in c.reason, c.reason
    assert c.steps[-1] == "refused"
    assert "\x00" not in c.reason


def test_the_caps_are_named_in_the_reason():
    n = cleaning.MAX_ANSWER_CHARS + 1
    assert clean("SELECT '" + "x" * n + "'").reason.endswith(f"> cap {cleaning.MAX_ANSWER_CHARS}")
    items = cleaning.MAX_ANSWER_TOKENS // 2 + 10
    r = clean("SELECT a FROM t WHERE a IN (" + ",".join(["1"] * items) + ")").reason
    assert r.startswith("answer too large: ") and f"tokens > cap {cleaning.MAX_ANSWER_TOKENS}" in r
    d = cleaning.MAX_NESTING + 1
    r = clean("SELECT " + "(" * d + "1" + ")" * d).reason
    assert r == (
        f"answer nested too deeply: {d} levels of parentheses > cap {cleaning.MAX_NESTING}"
    )


def test_nesting_is_bounded_when_prose_keeps_the_text_from_tokenizing():
    d = cleaning.MAX_NESTING + 1
    text = "Here's the query: SELECT " + "(" * d + "1" + ")" * d  # the apostrophe: no tokens
    assert "nested too deeply" in clean(text).reason


def test_answers_within_the_caps_are_cleaned_as_before():
    d = cleaning.MAX_NESTING
    assert clean("SELECT " + "(" * d + "1" + ")" * d).reason is None
    assert clean("-- the count\nSELECT count(*) FROM singer").sql.endswith(
        "SELECT count(*) FROM singer"
    )
    assert clean("SELECT 1 /* one */").reason is None


def test_a_candidate_nested_past_the_parsers_recursion_is_refused_not_raised():
    # on Python 3.13 sqlglot's compiled parser overflows the C stack at 5,000 levels of
    # parentheses or CASE (the process dies): refused before parsing
    with pytest.raises(CandidateRefused, match="nested too deeply"):
        check_candidate("SELECT " + "(" * 5000 + "1" + ")" * 5000, {"t"})
    with pytest.raises(CandidateRefused, match="nested too deeply .5000 levels"):
        check_candidate("SELECT " + "CASE WHEN true THEN " * 5000 + "1" + " END" * 5000, {"t"})
    # deep but under the cap: sqlglot parses it
    depth = sqlcheck.MAX_PARSE_NESTING
    assert sqlcheck.nesting_depth("SELECT " + "(" * depth + "1" + ")" * depth) == depth
    check_candidate("SELECT " + "(" * 200 + "1" + ")" * 200, {"t"})


@pytest.mark.parametrize("items", [2000, 8000])
def test_skeleton_of_a_long_in_list_is_linear(items, monkeypatch):
    # before: sqlglot's transform re-parented the whole IN list per item (quadratic: 8,000 items
    # took 1.2 s, 200,000 about 12 minutes): each ``set`` of one item re-parents the whole list.
    # Counted, not timed: the skeleton sets each changed list once, whatever its length.
    from sqlglot import exp

    moved = []
    real_set = exp.Expression.set

    def counting_set(self, arg_key, value, *args, **kwargs):
        moved.append(len(value) if isinstance(value, list) else 1)
        return real_set(self, arg_key, value, *args, **kwargs)

    sql = "SELECT a FROM t WHERE a IN (" + ", ".join(f"'v{i}'" for i in range(items)) + ")"
    monkeypatch.setattr(exp.Expression, "set", counting_set)
    sk = sql_skeleton(sql)
    monkeypatch.undo()
    assert len(moved) < 20 and sum(moved) <= items + 20
    assert sk.startswith("SELECT _ FROM _ WHERE _ IN (%s, %s") and sk.count("%s") == items
