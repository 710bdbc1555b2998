"""FinSQL generation without a database: prompt variants (examples and table order) and the
calls and candidates for every model, variant and sample. tests/db/test_generation.py runs
generation and selection inside PostgreSQL."""

from __future__ import annotations

from nl2sql.core.types import Column, Example, LLMReply, ModelConfig, Schema, Table
from nl2sql.generation.candidates import candidates_from, finsql_calls, variant_inputs
from nl2sql.model.gate import open_gate


def _schema():
    cols = [Column("name", "text"), Column("age", "integer")]
    return Schema(
        tables=[
            Table(name=n, schema="public", table=n, columns=cols)
            for n in ("singer", "stadium", "concert")
        ]
    )


def _examples(n):
    return [
        Example(id=i, db_id="x", question=f"question {i}?", sql=f"SELECT {i}") for i in range(n)
    ]


def test_prompt_variants_differ_in_examples_and_table_order_and_are_stable():
    s, ex = _schema(), _examples(8)
    s0, e0 = variant_inputs(s, ex, 4, 0, "q")
    assert [e.id for e in e0] == [0, 1, 2, 3] and s0 is s
    outs = [variant_inputs(s, ex, 4, v, "q") for v in (1, 2, 3)]
    assert all(len(e) == 4 for _, e in outs)
    assert len({tuple(e.id for e in es) for _, es in outs} | {(0, 1, 2, 3)}) > 1
    assert len({tuple(t.name for t in sc.tables) for sc, _ in outs}) > 1
    again = variant_inputs(s, ex, 4, 2, "q")
    assert [e.id for e in again[1]] == [e.id for e in outs[1][1]]


def test_finsql_calls_cover_models_variants_and_samples():
    models = [ModelConfig("m1", "m1"), ModelConfig("m2", "m2", temperature=0.3)]
    calls = finsql_calls(
        models,
        "How many?",
        _schema(),
        _examples(6),
        3,
        3,
        None,
        variants=2,
        samples=3,
        sample_temperature=0.9,
        gate=open_gate(),
    )
    assert [(c.model.name, c.variant, c.n) for c in calls] == [
        ("m1", 0, 3),
        ("m2", 0, 3),
        ("m1", 1, 3),
        ("m2", 1, 3),
    ]
    assert calls[0].temperature == 0.9  # configured at 0: sampled at sample_temperature
    assert calls[1].temperature is None  # its own temperature 0.3 is kept
    assert calls[0].prompt != calls[2].prompt
    replies = [
        LLMReply(
            model=c.model.name,
            text="SELECT 1",
            error=None,
            latency_ms=1,
            choices=["SELECT 1", "SELECT 2", "SELECT 3"],
        )
        for c in calls
    ]
    replies[1] = LLMReply(model="m2", text=None, error="boom", latency_ms=1)
    cands = candidates_from(calls, replies)
    srcs = [c.source for c in cands]
    assert srcs[:3] == ["finsql:m1", "finsql:m1#p0s1", "finsql:m1#p0s2"]
    assert "finsql:m2" in srcs and "finsql:m2#p1s2" in srcs
    failed = next(c for c in cands if c.source == "finsql:m2")
    assert failed.status == "refused" and "boom" in failed.reason
