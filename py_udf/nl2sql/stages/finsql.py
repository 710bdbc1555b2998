"""The FinSQL round, execution and repair. Sources: PET-SQL (Li et al. 2024) §3.4; MCS-SQL
(Lee et al. 2024) §3.2–3.3; OpenSearch-SQL (Xie et al. 2024) §3.5; ReBoost (Sui et al. 2023) §3.3."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.timing import StageTimer
from ..core.types import Candidate, Example, LLMReply, ModelConfig, Schema, Status
from ..generation.alignment import ValueIndex
from ..generation.candidates import Evaluator, GenCall, candidates_from, finsql_calls
from ..generation.execute import PlanLimits
from ..generation.repair import feedback, repair_loop, snap_failed
from ..model import prompts
from ..model.llm import call_models, call_models_during
from ..ops import value_policy
from ..rules import rules_off
from ..selection.consensus import held_by_majority
from .before_models import late_lookups_overlapped
from .prompt_parts import context_text, first_examples, prompt_with_examples, value_triples
from .run import FinsqlPlan, Run


def plan(run: Run) -> None:
    """Plan the FinSQL round: routed models × prompt variants × samples over the linked
    schema (verified queries, then DAIL-selected examples), the PreSQL as a candidate, and the
    evaluator (aligning values with ``value_alignment``).

    Args:
        run: sets ``plan``.
    """
    k, ctx, link, pre = run.st.k_examples, run.context, run.linking, run.presql
    chosen = {e.id for e in link.selection.examples}
    pool = first_examples(
        ctx.verified,
        list(link.selection.examples) + [e for e in ctx.candidates if e.id not in chosen][:k],
    )
    calls = _calls(run, link.models, link.schema, pool)
    reply = pre.reply
    pc = Candidate(
        source=f"presql:{reply.model}", model=reply.model, raw_text=reply.text, prompt=pre.prompt
    )
    if reply.error or not reply.text:
        pc.status, pc.reason = Status.REFUSED, f"no answer: {reply.error or 'empty'}"
    run.plan = FinsqlPlan(calls, pc, _evaluator(run))


def plan_one_round(run: Run) -> None:
    """Plan the one round (``model_rounds``): every model × prompt variants × samples, variant
    0 the PreSQL prompt itself (the whole schema, or the schema pruned to the budget), the
    others shuffled and sampled from it; no PreSQL candidate.

    Args:
        run: sets ``plan``.
    """
    ctx, k = run.context, run.st.k_examples
    pool = first_examples(ctx.verified, ctx.candidates[: 2 * k])
    calls = _calls(run, run.models, ctx.presql_schema, pool, run.presql.prompt)
    run.plan = FinsqlPlan(calls, None, _evaluator(run))


def _calls(
    run: Run,
    models: list[ModelConfig],
    schema: Schema,
    pool: list[Example],
    first_prompt: str | None = None,
) -> list[GenCall]:
    """The round's requests (``generation.candidates.finsql_calls``) over ``schema``."""
    st, ctx = run.st, run.context
    tables = {tb.name for tb in schema.tables}
    built = first_prompt is None or st.prompt_variants > 1  # a prompt is built from parts
    return finsql_calls(
        models,
        run.prompt_question,
        schema,
        pool,
        st.k_examples,
        st.sample_values,
        run.evidence,
        variants=st.prompt_variants,
        samples=st.samples_per_model,
        sample_temperature=st.sample_temperature,
        values=value_triples(run.schema, ctx.values, tables),
        business=(context_text(ctx, tables, run.gate, "finsql") or None) if built else None,
        turns=ctx.turns,
        gate=run.gate,
        first_prompt=first_prompt,
    )


def _evaluator(run: Run) -> Evaluator:
    """The question's evaluator: clean, check, align (``value_alignment``), execute."""
    st = run.st
    index = None
    if st.value_alignment:
        index = ValueIndex(
            run.plpy,
            st.values_per_column,
            st.value_max_chars,
            st.align_min_trigram,
            st.align_min_cosine,
            partial=value_policy.partial_columns(run.schema),
        )
    return Evaluator(
        plpy=run.plpy,
        schema=run.schema,
        search_path=run.search_path,
        timeout_ms=st.candidate_timeout_ms,
        max_rows=st.max_rows,
        max_bytes=st.max_result_bytes,
        dialects={m.name: m.dialect for m in run.models},
        values=index,
        limits=PlanLimits(st.max_plan_cost, st.max_plan_rows),
        keep_rows=run.keep_rows,
        question=run.question,
        rules_off=rules_off(st.rules_off),
    )


@dataclass
class FinsqlOverlap:
    """The FinSQL round's calling-thread work while models are out: ``work`` evaluates the
    PreSQL candidate (in one round: runs the late lookups instead), ``on_reply`` each early
    answer (into ``plan.early``); times go to ``overlapped_ms``."""

    timer: StageTimer
    plan: FinsqlPlan
    lookups: Callable[[], None] | None = None  # one round: what the PreSQL round overlapped

    def work(self) -> None:
        """Check, align and execute the PreSQL candidate (unless it had no answer); in one
        round, run ``lookups``.

        Raises:
            plpy.SPIError: QueryCanceled when the caller cancelled.
            EmbeddingError: the lookups' embedding model is missing.
        """
        if self.lookups is not None:
            self.lookups()
        pc, ev = self.plan.presql, self.plan.evaluator
        if pc is not None and pc.status == Status.PENDING:
            ev.reset_ms()
            ev.run(pc, pc.raw_text)
            self.timer.overlapped("presql_candidate_ms", sum(ev.ms.values()))

    def on_reply(self, i: int, reply: LLMReply, still_out: int) -> None:
        """Evaluate one call's answer now, when other calls are still out.

        Args:
            i: the call's index in ``plan.calls``.
            reply: its reply.
            still_out: how many calls are still out; 0 leaves the answer to ``execute``.

        Raises:
            plpy.SPIError: QueryCanceled when the caller cancelled.
        """
        if not still_out:
            return
        ev = self.plan.evaluator
        with self.timer.overlap("finsql_candidates_ms"):
            ev.reset_ms()
            self.plan.early[i] = candidates_from([self.plan.calls[i]], [reply])
            for c in self.plan.early[i]:
                if c.status == Status.PENDING:
                    ev.run(c, c.raw_text)


def write_finsql(run: Run) -> None:
    """Run the FinSQL round (in one round, the only one): every call concurrently,
    ``FinsqlOverlap``'s work meanwhile (in one round, the late lookups the PreSQL round
    overlapped).

    Args:
        run: sets ``finsql_replies`` (call order).

    Raises:
        plpy.SPIError: QueryCanceled when the caller cancelled during the wait.
        EmbeddingError: the lookups' embedding model is missing.
    """
    lookups = (lambda: late_lookups_overlapped(run)) if run.one_round() else None
    overlap = FinsqlOverlap(run.timer, run.plan, lookups)
    rnd = call_models_during(
        [c.as_call(run.gate) for c in run.plan.calls],
        overlap.work,
        run.on_wait,
        run.budget_s(),
        overlap.on_reply,
    )
    run.timer.waited("finsql", rnd.wait_ms)
    run.finsql_replies = rnd.replies


def execute(run: Run) -> None:
    """Clean, check, align and execute (read-only, time-limited) the answers not evaluated
    during the round; every candidate of the routed voters in call order (in two rounds only
    they were asked), the PreSQL's with ``presql_votes``.

    Args:
        run: sets ``candidates``.

    Raises:
        plpy.SPIError: QueryCanceled when the caller cancelled.
    """
    plan = run.plan
    ev = plan.evaluator
    ev.reset_ms()  # what runs after the round
    voters = {m.name for m in run.linking.models}
    cands: list[Candidate] = []
    for i, (call, reply) in enumerate(zip(plan.calls, run.finsql_replies)):
        if call.model.name not in voters:  # one round: routed out after the answers came
            continue
        if i in plan.early:
            cands.extend(plan.early[i])
            continue
        for c in candidates_from([call], [reply]):
            if c.status == Status.PENDING:
                ev.run(c, c.raw_text)
            cands.append(c)
    if run.st.presql_votes and plan.presql is not None:
        cands.append(plan.presql)
    run.timer.add_all(ev.ms)
    run.candidates = cands


def repair(run: Run) -> None:
    """Repair failing or empty candidates with the error and the relevant cell values
    (at most ``repair_rounds`` rounds) — none when one answer already holds a majority of the
    candidates' vote (``consensus.held_by_majority``: several samples or models agreeing, the
    rest failed), which repairs could not outvote.

    Args:
        run: its ``candidates`` change in place; sets ``repair`` (``repair_loop``'s summary,
            with ``skipped`` when the majority made repair moot).

    Raises:
        plpy.SPIError: QueryCanceled when the caller cancelled.
    """
    ev = run.plan.evaluator
    due = {id(c) for c in run.candidates if feedback(c, None, ev) is not None}  # each read once
    weights = run.linking.weights() if run.linking is not None else None
    moot = bool(due) and (
        held_by_majority(run.candidates, weights, lambda c: id(c) not in due) is not None
    )
    rep = repair_loop(
        [] if moot else run.candidates,
        {m.name: m for m in run.models},
        _repair_base(run),
        ev,
        [v.to_json() for v in run.context.values],
        run.st.repair_rounds,
        run.on_wait,
        run.budget_s,
        gate=run.gate,
    )
    if moot:
        rep["skipped"] = "one answer already holds a majority of the candidates' vote"
    run.timer.waited("repair", rep["llm_wait_ms"])
    run.repair = rep


def _repair_base(run: Run) -> Callable[[Candidate], str]:
    """Candidate -> the prompt its repair starts from: the one it answered, except that with
    ``examples_when`` = ``on_failure`` in one round the first prompt's candidates are repaired
    from that prompt with the retrieved examples added (``prompt_parts.prompt_with_examples``,
    built once, when the first candidate needs it)."""
    first = run.presql.prompt
    if run.st.examples_when != "on_failure" or not run.one_round():
        return lambda c: c.prompt or first
    built: list[str | None] = []

    def prompt_of(c: Candidate) -> str:
        p = c.prompt or first
        if p != first:
            return p
        if not built:
            built.append(prompt_with_examples(run.context, run.st, run.gate))
        return built[0] or p

    return prompt_of


def last_resort(run: Run) -> None:
    """When no candidate executed after repair: one more request to the first model, asked
    as a user asks plainly: the schema the PreSQL prompt showed without cell values, nothing
    retrieved (no examples, no matched values) and the basic instruction
    (``prompts.BASIC_INSTRUCTION``). Few-shot examples from other schemas lead a small model to
    names the database lacks (bench/live.py's misses); asked with the values and the
    reference-enhanced instruction, as the first prompt is, it repeated that prompt's failing
    answer in 22 of 33 such questions and rescued none (160 questions, both Qwen2.5-Coder
    models, 2026-11-29). A failing answer gets repair's round 0 (names snapped, no model call).

    Args:
        run: a ``last_resort:<model>`` candidate added to ``candidates``; sets ``last_resort``
            (the reply), or nothing when some candidate executed, every model failed or
            ``repair_rounds`` is 0.

    Raises:
        plpy.SPIError: QueryCanceled when the caller cancelled during the wait.
    """
    if run.st.repair_rounds == 0 or not run.models:
        return  # repair off: no call beyond the rounds
    if any(c.status == Status.OK for c in run.candidates):
        return
    if run.finsql_replies and all(r.error for r in run.finsql_replies):
        return  # the endpoint is down or refuses: one more call would fail the same way
    ctx, model = run.context, run.models[0]
    schema = ctx.presql_schema or run.schema
    prompt = prompts.build_prompt(
        ctx.question,
        schema,
        [],
        0,
        ctx.evidence,
        None,
        context_text(ctx, {t.name for t in schema.tables}, run.gate, "last_resort"),
        run.gate.turns("last_resort", ctx.turns),
        prompts.BASIC_INSTRUCTION,
    )
    call = GenCall(model, prompt, 0, stage="last_resort")
    with run.timer.model_wait("last_resort"):
        reply = call_models([call.as_call(run.gate)], run.on_wait, run.budget_s())[0]
    run.last_resort = (prompt, reply)
    for c in candidates_from([call], [reply]):
        c.source = f"last_resort:{reply.model}"
        if c.status == Status.PENDING:
            run.plan.evaluator.run(c, c.raw_text)
            snap_failed(c, run.plan.evaluator, run.gate)
        run.candidates.append(c)
