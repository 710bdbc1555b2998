"""The last resort (``stages.finsql.last_resort``) without a database: asked only when no
candidate executed and some model answered; its prompt shows the schema without cell values, nothing retrieved and the basic instruction;
its answer becomes a candidate that is evaluated like any other."""

from __future__ import annotations

import pytest

from nl2sql.core.settings import settings_from_texts
from nl2sql.core.timing import StageTimer
from nl2sql.core.types import (
    Candidate,
    Column,
    Example,
    LLMReply,
    ModelConfig,
    Schema,
    Status,
    Table,
)
from nl2sql.model import prompts
from nl2sql.model.gate import open_gate
from nl2sql.stages import finsql
from nl2sql.stages.gather import Context
from nl2sql.stages.run import FinsqlPlan, Run

EXAMPLE = Example(id=1, db_id="other", question="How many books?", sql="SELECT count(*) FROM book")


class Evaluator:
    """Marks every answer executed (status ok); remembers what it ran."""

    def __init__(self):
        self.ran = []
        self.schema, self.question = Schema(tables=[]), "How many?"  # as the real one has

    def run(self, c: Candidate, text: str) -> None:
        self.ran.append(text)
        c.sql, c.status, c.row_count = text, Status.OK, 1


def _run(statuses, replies_ok=True):
    st = settings_from_texts({})
    run = Run(
        None,
        st,
        [ModelConfig("m1", "m1"), ModelConfig("m2", "m2")],
        "q",
        "public",
        None,
        StageTimer(),
    )
    col = Column("semester_id", "integer", sample_values=["101", "102"])
    schema = Schema([Table("semesters", "public", "semesters", [col])])
    run.schema, run.gate = schema, open_gate()
    run.budget_s = lambda: None  # no statement_timeout to read: there is no database here
    run.context = Context("How many semesters?", None, [EXAMPLE], "How many semesters?", [], {})
    run.context.presql_schema = schema
    run.plan = FinsqlPlan([], None, Evaluator())
    run.finsql_replies = [
        LLMReply(m, "SELECT 1" if replies_ok else None, None if replies_ok else "HTTP 500", 1.0)
        for m in ("m1", "m2")
    ]
    run.candidates = [
        Candidate(source=f"finsql:m{i}", model=f"m{i}", raw_text="x", status=s)
        for i, s in enumerate(statuses, 1)
    ]
    return run


@pytest.fixture
def asked(monkeypatch):
    """The calls ``last_resort`` makes: (model name, gated messages); each answers one query."""
    calls = []

    def fake_call_models(batch, on_wait=None, budget_s=None):
        calls.extend((c[0].name, c[1]) for c in batch)
        return [LLMReply(c[0].name, "SELECT count(*) FROM semesters", None, 5.0) for c in batch]

    monkeypatch.setattr(finsql, "call_models", fake_call_models)
    return calls


def test_when_nothing_executed_the_first_model_is_asked_with_the_schema_alone(asked):
    run = _run([Status.ERROR, Status.REFUSED])
    finsql.last_resort(run)
    assert [name for name, _ in asked] == ["m1"]
    messages = asked[0][1]
    assert messages.stage == "last_resort"
    prompt = messages.messages[-1]["content"]
    assert "CREATE TABLE semesters" in prompt and "How many semesters?" in prompt
    assert "How many books?" not in prompt  # no few-shot example from another schema
    assert "101" not in prompt and "minimize SQL execution time" not in prompt  # asked plainly
    assert prompts.BASIC_INSTRUCTION in prompt
    added = run.candidates[-1]
    assert added.source == "last_resort:m1" and added.status == Status.OK
    assert run.plan.evaluator.ran == ["SELECT count(*) FROM semesters"]
    assert run.last_resort[1].model == "m1"


@pytest.mark.parametrize(
    "statuses, replies_ok",
    [
        ([Status.OK, Status.ERROR], True),  # something executed (an empty result counts)
        ([Status.REFUSED, Status.REFUSED], False),  # every model failed: the endpoint is down
    ],
)
def test_no_last_resort_when_something_executed_or_every_model_failed(asked, statuses, replies_ok):
    run = _run(statuses, replies_ok)
    finsql.last_resort(run)
    assert asked == [] and run.last_resort is None and len(run.candidates) == 2
