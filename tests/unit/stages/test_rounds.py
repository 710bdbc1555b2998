"""One or two model rounds (setting ``model_rounds``) without a database: the rule, the one
round's calls, the stages the walk takes, and the voters the first model's answer routes.
tests/db/test_rounds.py asks through the loopback server and counts its requests."""

from __future__ import annotations

import pytest

from nl2sql.core.errors import ConfigError
from nl2sql.core.settings import settings_from_texts
from nl2sql.core.timing import StageTimer
from nl2sql.core.types import Column, Example, LLMReply, ModelConfig, Schema, Table
from nl2sql.generation.candidates import finsql_calls, rounds_for
from nl2sql.model.gate import open_gate
from nl2sql.pipeline import STAGES
from nl2sql.stages.gather import Context
from nl2sql.stages.presql import route_one_round
from nl2sql.stages.run import FinsqlPlan, PreSQL, Rounds, Run

FITS = {"pruned": False, "tokens_full": 900, "tokens": 900, "budget": 3000}
PRUNED = {"pruned": True, "tokens_full": 5200, "tokens": 2900, "budget": 3000}


@pytest.mark.parametrize(
    ("setting", "pruning", "n", "words"),
    [
        ("two", FITS, 2, "model_rounds is two"),
        ("two", PRUNED, 2, "model_rounds is two"),
        ("one", FITS, 1, "(the whole schema)"),
        ("one", PRUNED, 1, "(a pruned schema)"),
        ("auto", FITS, 1, "900 estimated tokens, fits prompt_token_budget 3000"),
        ("auto", PRUNED, 2, "5200 estimated tokens, exceeds prompt_token_budget 3000"),
    ],
)
def test_rounds_follow_the_setting_and_auto_the_pruning(setting, pruning, n, words):
    got, why = rounds_for(setting, pruning)
    assert got == n
    assert words in why


def test_an_unknown_rounds_setting_is_refused():
    with pytest.raises(ConfigError, match="model_rounds must be one of two, one, auto"):
        rounds_for("three", FITS)


def _schema():
    cols = [Column("name", "text"), Column("age", "integer")]
    return Schema([Table(n, "public", n, cols) for n in ("singer", "stadium", "concert")])


def _examples(n):
    return [Example(id=i, db_id="x", question=f"q{i}?", sql=f"SELECT {i}") for i in range(n)]


def test_one_round_calls_send_the_presql_prompt_itself_as_variant_0():
    models = [ModelConfig("m1", "m1"), ModelConfig("m2", "m2")]
    calls = finsql_calls(
        models, "How many?", _schema(), _examples(6), 3, 3, None, variants=2,
        gate=open_gate(), first_prompt="THE PRESQL PROMPT",
    )  # fmt: skip
    assert [(c.model.name, c.variant) for c in calls] == [
        ("m1", 0),
        ("m2", 0),
        ("m1", 1),
        ("m2", 1),
    ]
    assert [c.prompt for c in calls[:2]] == ["THE PRESQL PROMPT"] * 2
    assert calls[2].prompt != "THE PRESQL PROMPT" and "How many?" in calls[2].prompt
    assert {c.stage for c in calls} == {"one_round"}  # sealed under its own stage name
    assert calls[0].as_call(open_gate())[1].stage == "one_round"
    two = finsql_calls(models, "How many?", _schema(), _examples(6), 3, 3, None, gate=open_gate())
    assert {c.stage for c in two} == {"finsql"}


def _run(texts=None, n_rounds=1, models=("m1", "m2", "m3")):
    st = settings_from_texts({"reliability_vote": "off", **(texts or {})})
    run = Run(None, st, [ModelConfig(m, m) for m in models], "q", "public", None, StageTimer())
    run.rounds = Rounds(n_rounds, "one" if n_rounds == 1 else "two", "why")
    return run


def test_the_walk_skips_the_presql_round_and_linking_in_one_round():
    def walked(run):
        return [s.name for s in STAGES if s.when is None or s.when(run)]

    one, two = walked(_run(n_rounds=1)), walked(_run(n_rounds=2))
    assert "presql" not in one and "linking" not in one and "finsql_plan" not in one
    assert one.index("one_round_plan") < one.index("finsql") < one.index("one_round_route")
    assert one.index("one_round_route") < one.index("execute")
    assert "one_round_plan" not in two and "one_round_route" not in two
    assert two.index("presql") < two.index("linking") < two.index("finsql_plan")
    # the quota on tokens is checked before either round's first request
    for names in (one, two):
        first_call = min(names.index(n) for n in ("presql", "finsql") if n in names)
        assert names.index("rounds") < names.index("quota_tokens") < first_call


def _after_round(run, texts):
    """The run as the one round leaves it: one call per model, these answers."""
    schema = _schema()
    run.schema = schema
    run.context = Context("q", None, [], "q", [], {})
    run.context.presql_schema = schema
    run.presql = PreSQL("PROMPT", FITS)
    calls = finsql_calls(
        run.models, "q", schema, [], 0, 0, None, gate=open_gate(), first_prompt="PROMPT"
    )
    run.plan = FinsqlPlan(calls, None, None)
    run.finsql_replies = [
        LLMReply(m.name, t, None if t else "HTTP 500", 1.0) for m, t in zip(run.models, texts)
    ]
    return run


def test_one_round_routes_the_voters_by_the_first_models_answer():
    voters = '{"easy": ["m1", "m3"], "hard": ["m2"]}'
    run = _after_round(
        _run({"hardness_voters": voters}),
        ["SELECT count(*) FROM singer", "SELECT 1", "SELECT 2"],
    )
    route_one_round(run)
    link = run.linking
    assert link.level == "easy"
    assert [m.name for m in link.models] == ["m1", "m3"]
    assert link.linked is None and link.selection is None
    assert link.schema is run.context.presql_schema
    assert link.why.startswith("one round: the first model's answer stands for the PreSQL")
    assert link.why.endswith("the answers of m2 do not vote")


def test_one_round_without_routing_or_a_first_answer_lets_every_model_vote():
    run = _after_round(_run(), ["SELECT name FROM singer", "SELECT 1", "SELECT 2"])
    route_one_round(run)
    assert [m.name for m in run.linking.models] == ["m1", "m2", "m3"]
    assert run.linking.why.endswith("hardness voting off")
    run = _after_round(_run({"hardness_voters": '{"easy": ["m2"]}'}), [None, "SELECT 1", "x"])
    route_one_round(run)
    assert run.linking.level is None  # no answer: hardness unknown, every model votes
    assert [m.name for m in run.linking.models] == ["m1", "m2", "m3"]
