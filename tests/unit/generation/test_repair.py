"""Repair rounds' feedback and prompts."""

from __future__ import annotations

from conftest import candidate as _c
from nl2sql.generation.repair import feedback, repair_prompt
from nl2sql.model.gate import open_gate


def test_repair_feedback_and_prompt_keep_the_question_last():
    assert feedback(_c("a", "h", 1, rows=0)).endswith("(empty result)")
    assert feedback(_c("a", "h", 1, rows=4)) is None
    err = _c("a", None, 1, "error")
    err.reason = 'column "nme" does not exist'
    assert "nme" in feedback(err)
    noans = _c("a", None, 1, "refused")
    noans.reason = "no answer: timeout"
    assert feedback(noans) is None
    p = repair_prompt(
        "schema...\n\n/* Answer the following: How many? */",
        open_gate().sql("repair", "SELECT nme FROM t"),
        feedback(err),
        ["singer.country: 'France'"],
        2,
        3,
    )
    assert "Repair round 2 of 3" in p and "SELECT nme FROM t;" in p
    assert "singer.country: 'France'" in p
    assert p.rstrip().endswith("How many? */")
