"""Repair: a candidate that fails or returns no rows gets further model rounds with the error.

Each round, every candidate that is refused by the check (other than for having no answer),
fails in execution, times out, or returns an empty result is sent back to the model that wrote
it, concurrently: its prompt, its SQL, what went wrong (the server's error message, the time
limit, or "empty result"), and the relevant cell values (the indexed values nearest to each
string literal it compares with a column, and the values found in the question). The answer is
cleaned, checked, aligned and executed like any candidate. A candidate stops at the first
non-empty successful execution, when the model answers with the same SQL again, or after
``max_rounds`` (at most 3) rounds; every round is recorded in ``candidate.repairs``. The
candidate keeps its best attempt (non-empty result > empty result > failure).

Sources: ReBoost (Sui et al. 2023) §3.3, SQL boosting on execution errors and empty results,
at most 3 tries; OpenSearch-SQL (Xie et al. 2024) §3.5, correction by error type with the
relevant values.
"""
from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

from . import prompts
from .alignment import literal_comparisons
from .cleaning import clean
from .llm import call_models
from .spi import quote_literal
from .sqlcheck import CandidateRefused, parse_one
from .types import Candidate, ModelConfig, Status

MAX_ROUNDS = 3


class RepairOutcome(StrEnum):
    """A repair round's status when no new SQL was executed (otherwise the round's status is
    the trial's ``types.Status``); string-valued, so the trace's JSON is unchanged."""

    NO_ANSWER = "no answer"   # the model gave no answer this round
    UNCHANGED = "unchanged"   # the model repeated its SQL: repair stopped


def feedback(c: Candidate) -> str | None:
    """What went wrong with a candidate, for the repair prompt; None when it needs no repair
    (a non-empty result) or cannot be repaired (the model gave no answer)."""
    if c.status == Status.OK:
        return "the query ran but returned no rows (empty result)" if c.row_count == 0 else None
    if c.status == Status.REFUSED:
        if (c.reason or "").startswith("no answer"):
            return None
        return f"the query was refused: {c.reason}"
    if c.status == Status.TIMEOUT:
        return f"the query did not finish within the time limit ({c.reason})"
    if c.status == Status.ERROR:
        return f"the query failed with the error: {c.reason}"
    return None


def _rank(c: Candidate) -> int:
    if c.status == Status.OK:
        return 2 if (c.row_count or 0) > 0 else 1
    return 0


def repair_prompt(base_prompt: str, sql: str | None, problem: str, values: list[str],
                  round_no: int, max_rounds: int) -> str:
    """The repair request: the FinSQL prompt with the previous SQL, the problem and the
    relevant cell values inserted before the question (which stays last)."""
    from .loopback_marker import QUESTION_MARKER

    i = base_prompt.rfind(QUESTION_MARKER)
    head, tail = (base_prompt[:i], base_prompt[i:]) if i >= 0 else (base_prompt, "")
    parts = [head.rstrip(),
             f"/* Repair round {round_no} of {max_rounds}: your previous query for this "
             f"question was: */\n{(sql or '').strip()};",
             f"/* Problem: {problem} */"]
    if values:
        parts.append("/* Relevant cell values: " + "; ".join(values) + " */")
    parts.append("/* Write a corrected PostgreSQL query that answers the question. */")
    if tail:
        parts.append(tail)
    return "\n\n".join(parts)


def relevant_values(c: Candidate, ev, question_values: list[dict]) -> list[str]:
    """Cell values worth showing for a failing candidate: for each string literal it compares
    with a column, that column's nearest indexed values; then the values found in the
    question. As ``table.column: 'v1', 'v2'`` strings."""
    out: list[str] = []
    if c.sql and ev.values is not None:
        try:
            tree = parse_one(c.sql)
            for lit, col in literal_comparisons(tree, ev.schema)[:5]:
                near = ev.values.nearest_values(col, lit.this, 3)
                if near:
                    vals = ", ".join(quote_literal(v) for v in near)
                    out.append(f"{col[1]}.{col[2]}: {vals}")
        except CandidateRefused:
            pass
    for v in question_values[:5]:
        s = f"{v['table']}.{v['column']}: {quote_literal(v['value'])}"
        if s not in out:
            out.append(s)
    return out


def repair_loop(cands: list[Candidate], models: dict[str, ModelConfig], prompt_of: Callable[[Candidate], str],
                ev, question_values: list[dict], max_rounds: int,
                on_wait: Callable[[], None] | None = None,
                budget_s: Callable[[], float | None] | None = None) -> dict[str, Any]:
    """Run up to ``max_rounds`` (≤ 3) repair rounds over ``cands`` in place.

    ``models``: model name → config (a candidate whose model is missing is not repaired);
    ``prompt_of``: the prompt a candidate answered; ``ev``: a generation.Evaluator;
    ``budget_s``: seconds left before the caller's statement_timeout (None: no limit). Returns a
    summary for the trace: ``{"rounds": [{"round", "candidates", "repaired"}], "llm_wait_ms",
    "replies"}`` (replies: model, latency, tokens, error per call)."""
    import time

    max_rounds = max(0, min(MAX_ROUNDS, int(max_rounds)))
    summary: dict[str, Any] = {"rounds": [], "llm_wait_ms": 0.0, "prompt_tokens": 0,
                               "completion_tokens": 0}
    active = [c for c in cands if feedback(c) and c.model in models]
    # per candidate: the last attempt's problem, SQL shown to the model, and cleaned answer
    problem_of = {id(c): feedback(c) for c in active}
    shown_sql = {id(c): c.sql or c.raw_text for c in active}
    last_answer = {id(c): clean(c.raw_text, ev.dialects.get(c.model, "postgres")).sql
                   for c in active}
    for r in range(1, max_rounds + 1):
        if not active:
            break
        jobs = []
        for c in active:
            p = repair_prompt(prompt_of(c), shown_sql[id(c)], problem_of[id(c)],
                              relevant_values(c, ev, question_values), r, max_rounds)
            jobs.append((c, p))
        t0 = time.perf_counter()
        replies = call_models([(models[c.model], prompts.messages(p)) for c, p in jobs], on_wait,
                              budget_s() if budget_s else None)
        summary["llm_wait_ms"] += (time.perf_counter() - t0) * 1000
        still: list[Candidate] = []
        fixed = 0
        for (c, _), rep in zip(jobs, replies):
            summary["prompt_tokens"] += rep.prompt_tokens
            summary["completion_tokens"] += rep.completion_tokens
            entry: dict[str, Any] = {"round": r, "problem": problem_of[id(c)], "model": rep.model,
                                     "latency_ms": round(rep.latency_ms, 1)}
            if rep.error or not rep.text:
                entry.update(status=RepairOutcome.NO_ANSWER, reason=rep.error or "empty")
                c.repairs.append(entry)
                still.append(c)
                continue
            answer = clean(rep.text, ev.dialects.get(c.model, "postgres")).sql
            if answer == last_answer[id(c)]:
                entry.update(status=RepairOutcome.UNCHANGED, sql=answer,
                             reason="the model answered with the same SQL; repair stopped")
                c.repairs.append(entry)
                continue
            last_answer[id(c)] = answer
            trial = Candidate(source=c.source, model=c.model, raw_text=rep.text)
            ev.run(trial, rep.text)
            entry.update(sql=trial.sql or answer, status=trial.status, reason=trial.reason,
                         row_count=trial.row_count, exec_ms=trial.exec_ms,
                         cleaning=trial.cleaning, alignments=trial.alignments)
            c.repairs.append(entry)
            if _rank(trial) > _rank(c):
                for f in ("sql", "status", "reason", "result_hash", "row_count", "truncated",
                          "exec_ms", "tables", "cleaning", "alignments", "sample_rows"):
                    setattr(c, f, getattr(trial, f))
                c.raw_text = rep.text
            if _rank(trial) == 2:
                fixed += 1
                continue
            problem_of[id(c)] = feedback(trial) or problem_of[id(c)]
            shown_sql[id(c)] = trial.sql or answer
            still.append(c)
        summary["rounds"].append({"round": r, "candidates": [c.source for c, _ in jobs],
                                  "repaired": fixed})
        active = still
    summary["llm_wait_ms"] = round(summary["llm_wait_ms"], 3)
    return summary
