"""Choosing the answer: the vote, the outcome, abstention. Sources: MCS-SQL (Lee et al. 2024)
§3.3; PET-SQL (Li et al. 2024) §3.4; OpenSearch-SQL (Xie et al. 2024) §3.6."""

from __future__ import annotations

from ..core.types import Status, Vote
from ..model import prompts
from ..model.llm import call_models, pick_model
from ..model.quota import usage_of
from ..ops import value_policy
from ..selection import abstain as abstention
from ..selection.consensus import VoteRule
from ..selection.literals import literal_misses
from ..selection.multiple_choice import apply_choice, multiple_choice_prompt, parse_choice, select
from .run import MultipleChoice, Outcome, Run, Selected
from .trace import gated_candidate


def vote(run: Run) -> None:
    """Select the answer: filter, confidence threshold, majority, optional multiple choice.

    Args:
        run: sets ``selected``.

    Raises:
        ConfigError: setting ``selection_model`` names a model that is not enabled.
        plpy.SPIError: QueryCanceled when the caller cancelled during the wait.
    """
    st, link, cands = run.st, run.linking, run.candidates
    weights = link.weights()
    v = _majority(run, weights)
    run.selected = Selected(v, weights)
    if st.selection != "multiple_choice" or len(v.groups) <= 1:
        return
    mc_model = pick_model(run.models, "selection_model", st.selection_model)
    rows: dict[str, list[str]] = {}
    notes: dict[str, str] = {}
    for c in cands:  # each option's rows pass the gate (rows / columns withheld, shapes kept)
        if c.status == Status.OK and c.result_hash not in rows:
            rows[c.result_hash], note = run.gate.rows("multiple_choice", c.sql, c.sample_rows)
            if note:
                notes[c.result_hash] = note
    shown = [{**g, "sql": run.gate.sql("multiple_choice", g["sql"])} for g in v.groups]
    mc_prompt = multiple_choice_prompt(
        run.prompt_question,
        shown,
        prompts.render_schema(link.schema, st.sample_values),
        rows,
        run.evidence,
        notes,
    )
    with run.timer.model_wait("multiple_choice"):
        replies = call_models(
            [(mc_model, run.gate.seal("multiple_choice", mc_prompt))], run.on_wait, run.budget_s()
        )
    choice = parse_choice(replies[0].text, len(v.groups))
    run.selected.vote = apply_choice(v, choice, mc_model.name, replies[0].text or replies[0].error)
    run.selected.choice = MultipleChoice(mc_model.name, mc_prompt, replies[0], choice)


def _majority(run: Run, weights: dict[str, float] | None) -> Vote:
    """The vote before any multiple choice (``multiple_choice.select`` under ``VoteRule``'s
    fitted parameters, the question as the prompts show it; a weak consensus weighs the
    candidates' literals against the value index as the role reads it)."""
    st, names = run.st, [m.name for m in run.models]
    misses = None
    if run.schema is not None:
        partial = value_policy.partial_columns(run.schema)
        misses = literal_misses(run.plpy, run.schema, st.values_per_column, partial)
    return select(
        run.candidates,
        st.confidence_threshold,
        st.tie_break,
        names,
        weights,
        False,
        VoteRule(),
        run.prompt_question,
        misses,
    )


def outcome(run: Run) -> None:
    """Settle the answer: the candidates as the trace shows them, tokens, and the error.

    ``error`` when nothing was chosen: every model failed, or no candidate executed.

    Args:
        run: sets ``outcome`` and ``values_withheld``.
    """
    v, sel = run.selected.vote, run.selected
    shown = [gated_candidate(run.gate, c) for c in run.candidates]
    presql = [run.presql.reply] if run.presql.reply is not None else []  # none in one round
    first = [*presql, *run.finsql_replies]
    replies = first + ([sel.choice.reply] if sel.choice else [])
    replies += sel.judge.calls if sel.judge else []
    replies += [run.last_resort[1]] if run.last_resort else []
    tokens = usage_of(replies, run.repair["calls"])
    error = None
    if v.sql is None:
        if all(r.error for r in first):
            error = "nl2sql: every model failed: " + "; ".join(
                sorted({r.error for r in replies if r.error})
            )
        elif (plan_error := _over_plan_limits(run)) is not None:
            error = plan_error
        else:
            reasons = "; ".join(f"{c['source']}: {c['reason']}" for c in shown)
            error = f"nl2sql: no candidate executed successfully ({reasons})"
    run.outcome = Outcome(v, shown, v.sql, v.confidence, tokens, error)
    run.values_withheld = run.gate.report()


def _over_plan_limits(run: Run) -> str | None:
    """The error when every candidate that got as far as its plan was refused by the
    plan-cost limit: the estimates and the setting to raise; None otherwise."""
    planned = [c for c in run.candidates if c.plan_cost is not None]
    refused = [c for c in planned if (c.reason or "").startswith("refused before running")]
    if not refused or len(refused) < len(planned):
        return None
    st = run.st
    settings = []
    if st.max_plan_cost > 0 and any(c.plan_cost > st.max_plan_cost for c in refused):
        low = min(c.plan_cost for c in refused)
        settings.append(f"max_plan_cost (now {st.max_plan_cost:g}; the cheapest plan: {low:.0f})")
    if st.max_plan_rows > 0 and any(c.plan_rows > st.max_plan_rows for c in refused):
        low = min(c.plan_rows for c in refused)
        settings.append(f"max_plan_rows (now {st.max_plan_rows:g}; the fewest rows: {low:.0f})")
    name = "max_plan_cost" if "max_plan_cost" in settings[0] else "max_plan_rows"
    return (
        f"nl2sql: every candidate ({len(refused)}) was refused before running: the planner "
        f"estimates more than the plan-cost limit allows ({'; '.join(settings)}). If such a "
        f"query is expected, raise it: SELECT nl2sql.set_setting('{name}', '...'), or ask a "
        f"narrower question"
    )


def abstain(run: Run) -> None:
    """Abstain when the chosen group's confidence is below setting ``abstain_below``.

    Args:
        run: its ``outcome`` changes when abstaining.
    """
    v, threshold, out = run.outcome.vote, run.st.abstain_below, run.outcome
    if not abstention.should_abstain(v, threshold):
        return
    found = abstention.readings(v, run.candidates, run.gate, run.st.abstain_readings)
    out.abstained = {"threshold": threshold, "confidence": v.confidence, "readings": found}
    out.sql = None
    out.error = abstention.message(v.confidence, threshold, found)
