"""Repair rounds for a candidate that fails or returns no rows (docs/internals/generation.md
"Repair"). Sources: ReBoost (Sui et al. 2023) §3.3; OpenSearch-SQL (Xie et al. 2024) §3.5."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..core.errors import CandidateRefused
from ..core.spi import quote_literal
from ..core.sqlcheck import parse_one
from ..core.types import Candidate, ModelConfig, Status
from ..linking.names import schema_hints
from ..model import prompts
from ..model.gate import Gate
from ..model.llm import call_models
from ..rules import Context, Outcome, finding, rewrite
from .alignment import literal_comparisons
from .cleaning import clean

MAX_ROUNDS = 3
# round 0's attempts, each on what the last gave: the names snapped, the error the snapped query
# gives, an empty result's contradictory WHERE split
ROUND_0_TRIES = 3
# a model that repeats its failing SQL (at temperature 0 it will) is asked once more at this
# temperature: Qwen2.5-Coder-0.5B/1.5B repeated most failing answers (bench/live.py)
RETRY_TEMPERATURE = 0.7


class RepairOutcome(StrEnum):
    """A repair round's status when no new SQL was executed (else the trial's ``types.Status``)."""

    NO_ANSWER = "no answer"  # the model gave no answer this round
    UNCHANGED = "unchanged"  # the model repeated its SQL: repair stopped


def feedback(c: Candidate, gate: Gate | None = None, ev=None) -> str | None:
    """Say what went wrong with a candidate, for the repair prompt. Source: OpenSearch-SQL (Xie et
    al. 2024) §3.5; ReBoost (Sui et al. 2023) §3.3.

    Args:
        c: a checked and executed (or refused) candidate.
        gate: the call's gate (the message passes ``Gate.error``), or None for the message as is.
        ev: the question's ``Evaluator`` (its schema's keys, the question and ``rules_off``,
            which the rules read), or None for the SQL's own text only.

    Returns:
        One sentence on the problem (a rule's finding, empty result, refusal, timeout,
        execution error), or None when the candidate needs no repair or cannot be repaired (no
        answer, refused unparsed).
    """
    return _problem(c, gate, ev)[0]


def _problem(c: Candidate, gate: Gate | None, ev) -> tuple[str | None, str | None]:
    """``feedback``'s sentence and the rule that found it (None for an error, a refusal, a
    timeout or the empty result said plainly)."""
    found = _finding(c, ev)  # tables related the wrong way say more than an empty result
    if found is not None:
        return found.sentence, found.rule
    if c.status == Status.OK:
        return (
            "the query ran but returned no rows (empty result)" if c.row_count == 0 else None
        ), None
    if c.status == Status.REFUSED and (
        (c.reason or "").startswith("no answer") or c.cleaning[-1:] == ["refused"]
    ):
        return None, None  # no answer; or past cleaning's caps, a NUL, only a comment
    reason = gate.error("repair", c.reason, c.sql or c.raw_text, c.sqlstate) if gate else c.reason
    if c.status == Status.REFUSED:
        return f"the query was refused: {reason}", None
    if c.status == Status.TIMEOUT:
        return f"the query did not finish within the time limit ({reason})", None
    if c.status == Status.ERROR:
        return f"the query failed with the error: {reason}", None
    return None, None


def _state(c: Candidate) -> str | None:
    """The candidate's state as the rules read it (``rules.STATES``), or None for none of them
    (a timeout, no SQL)."""
    if c.status == Status.OK:
        return "empty" if c.row_count == 0 else "rows"
    if c.status in (Status.ERROR, Status.REFUSED) and c.sql:
        return "failed"
    return None


def _context(c: Candidate, ev) -> Context | None:
    """The rules' ``Context`` of candidate ``c`` (the evaluator's schema and question), or None
    when the rules have nothing to read."""
    state = _state(c)
    if state is None:
        return None
    schema, question = (ev.schema, ev.question) if ev is not None else (None, None)
    return Context(c.sql, schema, question, c.sqlstate, state)


def _off(ev) -> frozenset[str]:
    """The rules repair skips: the evaluator's ``rules_off`` (none without one)."""
    return getattr(ev, "rules_off", None) or frozenset()


def _finding(c: Candidate, ev, meaning: bool = False) -> Outcome | None:
    """The first finding of ``rules.RULES`` for a candidate that ran (None for a failed one:
    its error is its problem)."""
    ctx = _context(c, ev)
    if ctx is None or ctx.state == "failed":
        return None
    return finding(ctx, _off(ev), meaning)


def _rank(c: Candidate, ev=None) -> int:
    """2: ran with rows and nothing its SQL shows wrong; 1: ran, empty or shown wrong; 0: failed."""
    if c.status == Status.OK:
        if not c.row_count:
            return 1
        return 1 if _finding(c, ev) else 2
    return 0


def repair_prompt(
    base_prompt: str,
    sql: str | None,
    problem: str,
    values: list[str],
    round_no: int,
    max_rounds: int,
    hints: list[str] = (),
) -> str:
    """Build the repair request for one candidate: its SQL, the problem, the names it got wrong
    with the real ones nearest, the relevant values and a request for a corrected query, before
    the question line (which stays last).

    Source: ReBoost (Sui et al. 2023) §3.3; OpenSearch-SQL (Xie et al. 2024) §3.5.

    Args:
        base_prompt: the prompt the candidate answered (PreSQL or FinSQL user message).
        sql: the candidate's previous SQL (or its raw answer); None for none.
        problem: what went wrong (``feedback``).
        values: relevant cell values as ``table.column: 'v1', 'v2'`` strings; empty for none.
        round_no: this round's number, from 1.
        max_rounds: number of rounds in all, shown to the model.
        hints: ``schema_hints`` lines (names only, never a cell value).

    Returns:
        The repair prompt text (a user message).
    """
    i = base_prompt.rfind(prompts.QUESTION_MARKER)
    head, tail = (base_prompt[:i], base_prompt[i:]) if i >= 0 else (base_prompt, "")
    parts = [
        head.rstrip(),
        f"/* Repair round {round_no} of {max_rounds}: your previous query for this "
        f"question was: */\n{prompts.shown_sql(sql).strip()};",
        f"/* Problem: {problem} */",
    ]
    if hints:
        parts.append("/* Names: " + "; ".join(hints) + " */")
    if values:
        parts.append("/* Relevant cell values: " + "; ".join(values) + " */")
    parts.append("/* Write a corrected PostgreSQL query that answers the question. */")
    if tail:
        parts.append(tail)
    return "\n\n".join(parts)


def relevant_values(
    c: Candidate, ev, question_values: list[dict], gate: Gate | None = None
) -> list[str]:
    """Collect the cell values worth showing for a failing candidate: the 3 nearest indexed
    values of the column each of its first 5 compared literals meets, then up to 5 of the
    question's values.

    Source: OpenSearch-SQL (Xie et al. 2024) §3.5.

    Args:
        c: the failing candidate.
        ev: the question's ``Evaluator`` (no literal lookup when ``ev.values`` is None).
        question_values: values retrieved for the question (``ValueMatch.to_json()`` dicts).
        gate: the call's gate (``Gate.values``); None keeps them all.

    Returns:
        Distinct ``table.column: 'v1', 'v2'`` strings (single quotes in values doubled).
    """
    found: list[tuple[str, str, str]] = []  # (table, column, value), one value each
    if c.sql and ev.values is not None:
        try:
            tree = parse_one(c.sql)
            for lit, col in literal_comparisons(tree, ev.schema)[:5]:
                found += [(col[1], col[2], v) for v in ev.values.nearest_values(col, lit.this, 3)]
        except CandidateRefused:
            pass
    found += [(v["table"], v["column"], v["value"]) for v in question_values[:5]]
    if gate is not None:
        found = gate.values("repair", found)
    lines: dict[tuple[str, str], list[str]] = {}
    for t, col, v in found:
        shown = lines.setdefault((t, col), [])
        if quote_literal(v) not in shown:
            shown.append(quote_literal(v))
    return [f"{t}.{col}: {', '.join(vals)}" for (t, col), vals in lines.items()]


def repair_loop(
    cands: list[Candidate],
    models: dict[str, ModelConfig],
    prompt_of: Callable[[Candidate], str],
    ev,
    question_values: list[dict],
    max_rounds: int,
    on_wait: Callable[[], None] | None = None,
    budget_s: Callable[[], float | None] | None = None,
    *,
    gate: Gate,
) -> dict[str, Any]:
    """Run the repair rounds over the candidates, in place. Source: ReBoost (Sui et al. 2023) §3.3;
    OpenSearch-SQL (Xie et al. 2024) §3.5.

    Args:
        cands: the question's candidates, executed; modified in place.
        models: model name → ``ModelConfig``; a candidate whose model is missing is not repaired.
        prompt_of: candidate → the prompt it answered.
        ev: the question's ``Evaluator`` (checks, aligns and executes answers).
        question_values: values retrieved for the question (``ValueMatch.to_json()`` dicts).
        max_rounds: number of rounds, clamped to 0..``MAX_ROUNDS`` (3).
        on_wait: called every ``llm.WAIT_SLICE_S`` seconds while waiting (may raise); or None.
        budget_s: called before each round: seconds left before statement_timeout, or None.
            None: no limit.
        gate: the call's gate (error texts, values, the sealed prompts).

    Returns:
        ``{"rounds": [{"round", "candidates", "repaired"}, ...], "llm_wait_ms": float (ms),
        "prompt_tokens": int, "completion_tokens": int, "calls": [{"model", "prompt_tokens",
        "completion_tokens", "tokens_source", "cost_usd"}]}``.
    """
    max_rounds = max(0, min(MAX_ROUNDS, int(max_rounds)))
    summary: dict[str, Any] = {
        "rounds": [],
        "llm_wait_ms": 0.0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "calls": [],
    }
    active = [a for a in _to_repair(cands, models, ev, gate) if not _snapped(a, ev, gate)]
    for r in range(1, max_rounds + 1):
        if not active:
            break
        prompts = [
            _round_prompt(a, prompt_of, ev, question_values, gate, r, max_rounds) for a in active
        ]
        t0 = time.perf_counter()
        replies = call_models(
            [
                (models[a.cand.model], gate.seal("repair", p), 1, a.temperature)
                for a, p in zip(active, prompts)
            ],
            on_wait,
            budget_s() if budget_s else None,
        )
        summary["llm_wait_ms"] += (time.perf_counter() - t0) * 1000
        outcomes = []
        for a, rep in zip(active, replies):
            _count_reply(summary, rep)
            outcomes.append(_take_reply(a, rep, r, ev, gate))
        summary["rounds"].append(
            {
                "round": r,
                "candidates": [a.cand.source for a in active],
                "repaired": outcomes.count("fixed"),
            }
        )
        active = [a for a, o in zip(active, outcomes) if o == "again"]
    summary["llm_wait_ms"] = round(summary["llm_wait_ms"], 3)
    return summary


def _to_repair(cands: list[Candidate], models: dict[str, ModelConfig], ev, gate: Gate) -> list:
    """The candidates ``repair_loop`` repairs (a problem to show, their model configured), each
    as a ``_Repairing`` with its first problem (and the rule that found it), the SQL shown and
    the model's answer cleaned."""
    return [
        _Repairing(
            c,
            *_problem(c, gate, ev),
            c.sql or c.raw_text,
            clean(c.raw_text, ev.dialects.get(c.model, "postgres"), ev.schema).sql,
        )
        for c in cands
        if feedback(c, None, ev) and c.model in models
    ]


def _round_prompt(
    a: _Repairing,
    prompt_of: Callable[[Candidate], str],
    ev,
    question_values: list[dict],
    gate: Gate,
    r: int,
    max_rounds: int,
) -> str:
    """The repair prompt of round ``r`` for candidate ``a`` (``repair_loop``'s arguments)."""
    return repair_prompt(
        prompt_of(a.cand),
        gate.sql("repair", a.shown_sql),
        a.problem,
        relevant_values(a.cand, ev, question_values, gate),
        r,
        max_rounds,
        schema_hints(a.shown_sql, ev.schema),
    )


def _snapped(a: _Repairing, ev, gate: Gate) -> bool:
    """Round 0, without a model: up to ``ROUND_0_TRIES`` rewrites (``rules.rewrite``, the first
    of ``rules.RULES`` for the candidate's state), each on what the last gave, checked and
    executed, each entry naming its rule (``rule``). The candidate takes an attempt over when it
    ranks better, or when the rewrite is final and runs (an empty INTERSECT of the question's
    "both" is its answer). An attempt that runs with rows but shows itself wrong (a name snapped
    to a column the select list already has) ends round 0: the model is shown its own SQL and
    error, not the fault the snap made — unless what the attempt means is wrong against the
    schema's keys or the question (``rules.finding(meaning=True)``: a GROUP BY added on the
    table's primary key, every count 1), which the model is shown with the attempt — or which
    round 0 rewrites once more (a name snapped onto a key's column joined to a table it does not
    refer to: the table between joined). Returns True when round 0 fixed the candidate."""
    c = current = a.cand
    for _ in range(ROUND_0_TRIES):
        fixed = _round_0_fix(current, ev)
        if fixed is None:
            return False
        entry = {
            "round": 0,
            "problem": a.problem,
            "problem_rule": a.problem_rule,
            "model": None,
            "rule": fixed.rule,
            "snapped": list(fixed.changes),
        }
        current = _tried(c, fixed.sql, fixed.sql, ev, entry)
        if _rank(current, ev) > _rank(c, ev) or (fixed.final and current.status == Status.OK):
            for f in _TAKEN_OVER:
                setattr(c, f, getattr(current, f))
        if fixed.final and current.status == Status.OK:
            return True  # the question's "both" read: an empty INTERSECT is its answer
        if _rank(current, ev) == 2 or (current.status == Status.OK and current.row_count):
            meant = _finding(current, ev, meaning=True)
            if meant:  # what the rewrite means is wrong: the model is shown it, not its error
                a.problem, a.problem_rule, a.shown_sql = meant.sentence, meant.rule, current.sql
                if _round_0_fix(current, ev) is not None:
                    continue  # unless round 0 mends that too (a snapped key joined off it)
            return _rank(current, ev) == 2
        a.set_problem(current, gate, ev)
        a.shown_sql = current.sql or fixed.sql
    return False


def _round_0_fix(c: Candidate, ev) -> Outcome | None:
    """Round 0's rewrite of ``c``: the first of ``rules.RULES`` for its state (failed: a join
    not needed dropped, unknown names snapped, the error's one reading; empty: a contradictory
    WHERE split; rows: the question's "both" split; empty or rows: tables related off their
    keys, an inner join held NULL, an IN subquery's outer column) not in ``ev.rules_off``.
    Returns the rule's ``Outcome`` (``sql``, ``changes``, ``final``); None when there is none."""
    ctx = _context(c, ev)
    return rewrite(ctx, _off(ev)) if ctx is not None else None


def snap_failed(c: Candidate, ev, gate: Gate) -> bool:
    """Round 0 alone for a candidate that no model round will repair (the last resort's): its
    unknown names snapped to the one real name each must have meant, checked and executed like
    ``repair_loop``'s round 0 (``linking.names.snap_names``).

    Args:
        c: an executed candidate; takes the snapped attempt over when that ranks better, with
            the attempt in ``c.repairs``.
        ev: the question's ``Evaluator``.
        gate: the call's gate (error texts).

    Returns:
        True when the snapped query ran with rows; False otherwise (nothing to snap, or it still
        fails).
    """
    problem, rule = _problem(c, gate, ev)
    if not problem:
        return False
    return _snapped(_Repairing(c, problem, rule, c.sql or c.raw_text, None), ev, gate)


def _count_reply(summary: dict[str, Any], rep) -> None:
    """Add one repair reply's tokens and call record to ``repair_loop``'s summary."""
    summary["prompt_tokens"] += rep.prompt_tokens
    summary["completion_tokens"] += rep.completion_tokens
    summary["calls"].append(
        {
            "model": rep.model,
            "prompt_tokens": rep.prompt_tokens,
            "completion_tokens": rep.completion_tokens,
            "tokens_source": rep.tokens_source,
            "cost_usd": rep.cost_usd,
            "reasoning_tokens": rep.reasoning_tokens,
            "request": rep.request,
            "learned": rep.learned,
        }
    )


@dataclass
class _Repairing:
    """A candidate under repair: its last problem, the SQL shown, the model's last answer."""

    cand: Candidate
    problem: str
    problem_rule: str | None  # the rule of ``rules.RULES`` that found ``problem``, if one did
    shown_sql: str | None
    last_answer: str | None
    temperature: float | None = None  # None: the model's own; RETRY_TEMPERATURE once it repeated

    def set_problem(self, c: Candidate, gate: Gate, ev) -> None:
        """Take ``feedback``'s problem of attempt ``c`` (and its rule), where it has one.

        Args:
            c: the attempt, executed.
            gate: the call's gate (error texts).
            ev: the question's ``Evaluator``.
        """
        problem, rule = _problem(c, gate, ev)
        if problem:
            self.problem, self.problem_rule = problem, rule


_TAKEN_OVER = (
    "sql",
    "status",
    "reason",
    "result_hash",
    "order_hash",
    "answer",
    "row_count",
    "truncated",
    "exec_ms",
    "tables",
    "cleaning",
    "alignments",
    "sample_rows",
    "sqlstate",
)


def _tried(c: Candidate, text: str, answer: str, ev, entry: dict[str, Any]) -> Candidate:
    """The repair answer ``text`` checked, aligned and executed as a candidate of ``c``'s model;
    ``entry`` (the round's record) completed with its outcome and added to ``c.repairs``."""
    trial = Candidate(source=c.source, model=c.model, raw_text=text)
    ev.run(trial, text)
    entry.update(
        sql=trial.sql or answer,
        status=trial.status,
        reason=trial.reason,
        row_count=trial.row_count,
        exec_ms=trial.exec_ms,
        cleaning=trial.cleaning,
        alignments=trial.alignments,
    )
    c.repairs.append(entry)
    return trial


def _sent_temperature(rep) -> float | None:
    """The temperature the reply's request was sent with (its ``request.sent``), if known."""
    return ((rep.request or {}).get("sent") or {}).get("temperature")


def _take_reply(a: _Repairing, rep, r: int, ev, gate: Gate) -> str:
    """Record one repair reply; the candidate takes over a better attempt. Returns ``fixed``,
    ``again`` or ``stop``."""
    c = a.cand
    entry: dict[str, Any] = {
        "round": r,
        "problem": a.problem,
        "problem_rule": a.problem_rule,
        "model": rep.model,
        "latency_ms": round(rep.latency_ms, 1),
    }
    if rep.error or not rep.text:
        entry.update(status=RepairOutcome.NO_ANSWER, reason=rep.error or "empty")
        c.repairs.append(entry)
        return "again"
    answer = clean(rep.text, ev.dialects.get(c.model, "postgres"), ev.schema).sql
    if answer == a.last_answer:
        again = a.temperature is None and (_sent_temperature(rep) or 0) < RETRY_TEMPERATURE
        entry.update(
            status=RepairOutcome.UNCHANGED,
            sql=answer,
            reason=(
                f"the model answered with the same SQL; asked again at temperature {RETRY_TEMPERATURE}"
                if again
                else "the model answered with the same SQL; repair stopped"
            ),
        )
        c.repairs.append(entry)
        if again:  # a model at temperature 0 repeats itself: one sample off its first choice
            a.temperature = RETRY_TEMPERATURE
            return "again"
        return "stop"
    a.last_answer = answer
    trial = _tried(c, rep.text, answer, ev, entry)
    if _rank(trial, ev) > _rank(c, ev):
        for f in _TAKEN_OVER:
            setattr(c, f, getattr(trial, f))
        c.raw_text = rep.text
    if _rank(trial, ev) == 2:
        return "fixed"
    a.set_problem(trial, gate, ev)
    a.shown_sql = trial.sql or answer
    return "again"
