"""The judge after the vote (setting ``selection = judge``, off by default): where the vote is
unsure, a model compares the top two result groups' SQL and rows in both orders. Source:
DeepEye-SQL (Li et al. 2025), its selection step (``selection.judge`` cites the code)."""

from __future__ import annotations

from typing import Any

from ..core.types import Status
from ..model import prompts
from ..model.llm import call_models, pick_model
from ..selection import judge as pairwise
from .run import Run

STAGE = "judge"
"""The gate's stage name for what the judge is sent (its ``values_withheld.held``)."""


def wanted(run: Run) -> bool:
    """Whether the judge stage runs: setting ``selection`` is ``judge`` and the vote ran.

    Args:
        run: after the vote.

    Returns:
        True when the judge is on for this database.
    """
    return run.st.selection == "judge" and run.selected is not None


def judge(run: Run) -> None:
    """Ask the judge where the vote is unsure, and make its winner the answer.

    Skipped (and recorded) with fewer than two groups or the top group at ``SKIP_SHARE`` of the
    vote weight or more. Otherwise one request per order (A/B, then B/A), ``SAMPLES`` samples
    each, made concurrently within the call's deadline (``Run.budget_s``); every text passes
    the gate for the asking role. A reply of any shape (garbage, a refusal, empty, a timeout)
    counts for nothing; with no usable verdict in either order the vote's choice stands.

    Args:
        run: its ``selected`` (the vote) is read; ``selected.judge`` is set and
            ``selected.vote`` changed when the judge picks the second group.

    Raises:
        ConfigError: setting ``selection_model`` names a model that is not enabled.
        plpy.SPIError: QueryCanceled when the caller cancelled during the wait.
    """
    v = run.selected.vote
    model = pick_model(run.models, "selection_model", run.st.selection_model)
    j = pairwise.Judgement(model.name, skipped=pairwise.skip_reason(v))
    j.top_share, second_share = pairwise.top_share(v)
    run.selected.judge = j
    if j.skipped is not None:
        return
    shown = [_shown_group(run, g) for g in v.groups[:2]]
    temperature = run.st.sample_temperature if model.temperature == 0 else None
    calls = []
    for order in pairwise.ORDERS:
        pair = shown if order == "AB" else shown[::-1]
        j.prompts[order] = _prompt(run, pair)
        gated = run.gate.seal(STAGE, j.prompts[order], system=pairwise.SYSTEM)
        calls.append((model, gated, pairwise.SAMPLES, temperature))
    with run.timer.model_wait(STAGE):
        j.calls = call_models(calls, run.on_wait, run.budget_s())
    for order, rep in zip(pairwise.ORDERS, j.calls):
        texts = [] if rep.error else (rep.choices or [rep.text])
        j.replies[order] = list(texts)
        j.verdicts[order] = [pairwise.parse_verdict(t) for t in texts]
        if rep.error:
            j.errors[order] = rep.error
    pairwise.decide(j, (j.top_share, second_share))
    run.selected.vote = pairwise.apply_judgement(v, j)


def _prompt(run: Run, pair: list[dict[str, Any]]) -> str:
    """One order's user message, from gated parts only."""
    link = run.linking
    return pairwise.judge_prompt(
        run.prompt_question,
        prompts.render_schema(link.schema, run.st.sample_values),
        run.evidence,
        pair,
    )


def _shown_group(run: Run, g: dict[str, Any]) -> dict[str, Any]:
    """A vote group as the judge may see it: its SQL through ``Gate.sql``, the rows of the
    execution that gave its SQL through ``Gate.rows`` (a withheld column's values never; no
    rows with ``send_values`` off), and what was withheld."""
    ran = [c for c in run.candidates if c.status == Status.OK and c.result_hash is not None]
    own = [c for c in ran if c.sql == g["sql"]] or [
        c for c in ran if c.result_hash == g["result_hash"]
    ]
    rows: list[str] = []
    note = None
    if own:
        rows, note = run.gate.rows(
            STAGE, own[0].sql, (own[0].sample_rows or [])[: pairwise.MAX_ROWS]
        )
    return {
        "sql": run.gate.sql(STAGE, g["sql"]),
        "rows": rows,
        "note": note,
        "row_count": g.get("row_count"),
    }
