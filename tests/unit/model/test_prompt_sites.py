"""Every SQL text that reaches a model passes the gate's SQL path (issue 24): ``ShownSQL`` is made
only in ``model/gate.py``; every prompt part that holds SQL checks it with ``prompts.shown_sql``;
every place that seals a prompt for a model is listed here and walked with a marker literal of a
withheld column, raw and gated."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from adversarial_corpus import LITERAL_FORMS
from nl2sql.core.errors import GateError
from nl2sql.core.types import Column, Example, ModelConfig, Schema, Table, Turn
from nl2sql.curated._log_statements import LoggedStatement, MinedCandidate
from nl2sql.curated._mined_questions import question_prompt
from nl2sql.curated.business import BusinessContext, TermUse
from nl2sql.curated.narrate import NarrateRows, narrate_prompt
from nl2sql.generation.candidates import finsql_calls
from nl2sql.generation.explain_sql import Checked, explain_prompt
from nl2sql.generation.repair import repair_prompt
from nl2sql.model import prompts
from nl2sql.model.gate import Gate
from nl2sql.selection.judge import judge_prompt
from nl2sql.selection.multiple_choice import multiple_choice_prompt

PKG = Path(prompts.__file__).resolve().parents[1]
MARK = "SITE-MARK-31"
RAW = f"SELECT venue_name FROM venue WHERE secret_code = '{MARK}'"

# module (relative to py_udf/nl2sql) -> the functions in it that call ``.seal(``; a new sealing
# place fails ``test_every_place_that_seals_a_prompt_is_listed`` until it is added here and its
# prompt's SQL parts pass ``prompts.shown_sql`` (walked below)
SEAL_SITES = {
    "generation/candidates.py": {"as_call"},
    "generation/repair.py": {"repair_loop"},
    "stages/choose.py": {"vote"},
    "stages/judge.py": {"judge"},
    "stages/presql.py": {"write_presql"},
    "curated/mining.py": {"mine"},
    "curated/narrate.py": {"write_answer"},
    "generation/explain_sql.py": {"explain"},
}
# the builders that put SQL into prompt text: each calls ``shown_sql`` on it
SQL_BUILDERS = {
    "model/prompts.py": {"_pairs", "render_business", "render_semantic"},
    "generation/repair.py": {"repair_prompt"},
    "selection/multiple_choice.py": {"multiple_choice_prompt"},
    "selection/judge.py": {"judge_prompt"},
    "curated/narrate.py": {"narrate_prompt"},
    "curated/_mined_questions.py": {"question_prompt"},
    "generation/explain_sql.py": {"explain_prompt"},
}


def _schema() -> Schema:
    venue = Table(
        "venue",
        "public",
        "venue",
        [
            Column("venue_id", "integer", True),
            Column("venue_name", "text"),
            Column("secret_code", "text", values_allowed=False),
        ],
    )
    return Schema([venue])


def _trees():
    for path in sorted(PKG.rglob("*.py")):
        yield path.relative_to(PKG).as_posix(), ast.parse(path.read_text())


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _calls(node, name: str) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            if (isinstance(f, ast.Attribute) and f.attr == name) or (
                isinstance(f, ast.Name) and f.id == name
            ):
                return True
    return False


def test_shown_sql_is_made_only_by_the_gate():
    makers = {
        rel
        for rel, tree in _trees()
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and getattr(n.func, "id", getattr(n.func, "attr", "")) == "ShownSQL"
    }
    assert makers == {"model/gate.py"}


def test_every_place_that_seals_a_prompt_is_listed():
    found: dict[str, set[str]] = {}
    for rel, tree in _trees():
        if rel == "model/gate.py":
            continue
        for fn in _functions(tree):
            direct = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
            if any(isinstance(c.func, ast.Attribute) and c.func.attr == "seal" for c in direct):
                found.setdefault(rel, set()).add(fn.name)
    assert found == SEAL_SITES, (
        "a new place seals a prompt: list it in SEAL_SITES and pass its SQL through the gate"
    )


def test_every_sql_builder_checks_its_sql_and_formats_no_raw_sql():
    trees = dict(_trees())
    for rel, names in SQL_BUILDERS.items():
        fns = {f.name: f for f in _functions(trees[rel])}
        for name in names:
            assert _calls(fns[name], "shown_sql"), f"{rel}:{name} does not call shown_sql"
    for rel, names in {**SEAL_SITES, **SQL_BUILDERS}.items():
        for fn in _functions(trees[rel]):
            if fn.name not in names:
                continue
            for n in ast.walk(fn):  # an f-string part named like SQL must be shown_sql's result
                if isinstance(n, ast.FormattedValue):
                    v = n.value
                    ident = getattr(v, "id", None) or getattr(v, "attr", None) or ""
                    assert "sql" not in ident.lower() or rel == "model/prompts.py", (
                        f"{rel}:{fn.name} formats {ident} into a prompt without shown_sql"
                    )


def test_every_sql_builder_refuses_raw_sql():
    gate = Gate(_schema(), True)
    ex = [Example(1, "local", "Which venue has that code?", RAW)]
    with pytest.raises(GateError):
        prompts.build_prompt("Q?", _schema(), ex)
    with pytest.raises(GateError):
        prompts.render_turns((Turn(1, "Q?", RAW),))
    with pytest.raises(GateError):
        prompts.render_business([("code", "a code", RAW)], [])
    with pytest.raises(GateError):
        repair_prompt("p", RAW, "it failed", [], 1, 2)
    group = {"sql": RAW, "confidence": 1.0, "row_count": 1, "result_hash": "h"}
    with pytest.raises(GateError):
        multiple_choice_prompt("Q?", [group], "schema")
    with pytest.raises(GateError):
        judge_prompt("Q?", "schema", None, [group, group])
    with pytest.raises(GateError):
        prompts.render_examples([Example(1, "local", "Q?", RAW)])
    with pytest.raises(GateError):
        prompts.render_semantic([("filter", "venue", "coded", "secret_code = 'x'", None, [])])
    with pytest.raises(GateError):
        explain_prompt(Checked(RAW, _schema(), _RawGate(_schema(), True)))
    assert gate.held == {}


class _RawGate(Gate):
    """A gate whose SQL path hands back the raw text (a bypass the prompt builder must refuse)."""

    def sql(self, stage, sql, render=None):
        return sql


def _walk_prompts(gate: Gate, where: str = f"secret_code = '{MARK}'") -> dict[str, str]:
    """Every prompt the sealing places build, from SQL sources holding the marker (in the WHERE
    condition ``where`` of a query of venue)."""
    schema = _schema()
    raw = f"SELECT venue_name FROM venue WHERE {where}"
    ex = [Example(1, "local", f"Which venue has code {MARK}?", raw, masked_question="[V]?")]
    turns = (Turn(1, "Which venue?", raw),)
    terms = BusinessContext(
        terms=[TermUse(1, "secret", "a venue's code", where, 1.0, "named", "secret")]
    )
    model = ModelConfig("m", "m", "http://127.0.0.1:9/v1")
    fin = finsql_calls(
        [model],
        "Q?",
        schema,
        ex,
        1,
        3,
        None,
        business=terms.prompt_text(gate, "finsql"),
        turns=turns,
        gate=gate,
    )
    out = {"finsql": fin[0].as_call(gate)[1].messages[-1]["content"]}
    out["repair"] = repair_prompt("p", gate.sql("repair", raw), "it failed", [], 1, 2)
    group = {
        "sql": gate.sql("multiple_choice", raw),
        "confidence": 1.0,
        "row_count": 1,
        "result_hash": "h",
    }
    out["multiple_choice"] = multiple_choice_prompt("Q?", [group], "schema")
    pair = [{**group, "sql": gate.sql("judge", raw), "rows": []}, group]
    out["judge"] = judge_prompt("Q?", "schema", None, pair)
    out["narrate"] = narrate_prompt("Q?", raw, NarrateRows(gate, [], None), False)
    mined = MinedCandidate(LoggedStatement(1, raw, 3), "query", raw, [], ["public.venue"])
    out["mining"] = question_prompt(gate, mined, schema)
    out["explain_sql"] = explain_prompt(Checked(raw, schema, gate))
    return out


@pytest.mark.parametrize("send_values", [True, False])
def test_each_sealed_prompt_holds_no_literal_of_a_withheld_column(send_values):
    prompts_of = _walk_prompts(Gate(_schema(), send_values))
    for stage, text in prompts_of.items():
        assert MARK not in text, stage
        assert "secret_code" in text or stage in ("multiple_choice", "judge"), stage


@pytest.mark.parametrize("send_values", [True, False])
@pytest.mark.parametrize("cid, where, mark, node", LITERAL_FORMS, ids=[f[0] for f in LITERAL_FORMS])
def test_no_sealed_prompt_holds_a_withheld_constant_of_any_form(
    cid, where, mark, node, send_values
):
    """Issue 31 §4: the walk with the constant of every PostgreSQL form (``E'…'``, ``U&'…'``,
    dollar quotes, ``B'…'``, ``X'…'``, ``N'…'``, …): no prompt of any path holds its marker."""
    for stage, text in _walk_prompts(Gate(_schema(), send_values), where).items():
        assert mark.lower() not in text.lower(), (stage, text)


def test_the_walk_shows_the_marker_when_nothing_is_withheld():
    """The positive control: with the column opted in the same walk carries the marker."""
    schema = _schema()
    schema.tables[0].columns[2].values_allowed = True
    gate = Gate(schema, True)
    for stage, text in _walk_prompts(gate).items():
        assert MARK in text, stage
