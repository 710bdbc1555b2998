"""One call of ``nl2sql(question)`` as the stage table ``STAGES`` (PET-SQL's two stages with
cross-consistency voting); ``answer``, ``explain``, ``retrieve`` (docs/internals/pipeline.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .core import query_log
from .stages import before_models, choose, finsql, judge, presql, start
from .stages.run import LeaveOut, Run
from .stages.trace import record_embedder, render, render_retrieval


@dataclass(frozen=True)
class Stage:
    """One row of the stage table."""

    name: str
    timing: str | None  # its key in the trace's ``timings`` (may be shared); None: untimed
    step: Callable[[Run], None]  # reads and writes the run object's fields
    calls_model: bool = False  # waits on a model: ``retrieve`` stops at the first such stage
    in_retrieve: bool = True  # ``retrieve`` runs it too (before the first model call)
    without_model: Callable[[Run], None] | None = None  # what ``retrieve`` runs instead
    when: Callable[[Run], bool] | None = None  # ``answer`` runs it only when this is true


# The stages of one question, in order (docs/internals/pipeline.md has one line on each).
# fmt: off
STAGES: tuple[Stage, ...] = (
    #     name             timing key           step
    Stage("quota",         "schema_ms",         start.quota, in_retrieve=False),
    Stage("rewrite",       "schema_ms",         start.rewrite, in_retrieve=False),
    Stage("schema",        "schema_ms",         start.load_schema),
    Stage("retrieval",     "retrieval_ms",      before_models.gather_context),
    Stage("verified",      "verified_ms",       before_models.fast_path, in_retrieve=False),
    Stage("examples",      "retrieval_ms",      before_models.gather_examples),
    Stage("presql_prompt", "prompt_ms",         before_models.presql_prompt),
    Stage("rounds",        "prompt_ms",         before_models.choose_rounds, in_retrieve=False),
    Stage("quota_tokens",  "prompt_ms",         start.quota_tokens, in_retrieve=False),
    Stage("presql",        "presql_round_ms",   presql.write_presql, calls_model=True,
          without_model=before_models.instead_of_presql, when=Run.two_rounds),
    Stage("linking",       "finsql_prompt_ms",  presql.link, when=Run.two_rounds),
    Stage("finsql_plan",   "finsql_prompt_ms",  finsql.plan, when=Run.two_rounds),
    Stage("one_round_plan", "finsql_prompt_ms", finsql.plan_one_round, when=Run.one_round),
    Stage("finsql",        "finsql_round_ms",   finsql.write_finsql, calls_model=True),
    Stage("one_round_route", "finsql_prompt_ms", presql.route_one_round, when=Run.one_round),
    Stage("execute",       "execute_ms",        finsql.execute),
    Stage("repair",        "repair_ms",         finsql.repair, calls_model=True),
    Stage("last_resort",   "repair_ms",         finsql.last_resort, calls_model=True),
    Stage("vote",          "vote_ms",           choose.vote, calls_model=True),
    Stage("judge",         "vote_ms",           judge.judge, calls_model=True, when=judge.wanted),
    Stage("outcome",       "trace_ms",          choose.outcome),
    Stage("abstain",       "trace_ms",          choose.abstain),
    Stage("embedder",      None,                record_embedder),
)
# fmt: on


def _run_stage(run: Run, stage: Stage) -> None:
    """Run one stage, timed under its key when it has one."""
    if stage.timing is None:
        stage.step(run)
        return
    with run.timer.stage(stage.timing):
        stage.step(run)


def answer(
    plpy,
    question: str,
    search_path: str,
    evidence: str | None = None,
    conversation: str | None = None,
    leave_out: LeaveOut | None = None,
    keep_rows: bool = False,
    usage_if_failed: bool = True,
) -> Run:
    """Answer one question: walk ``STAGES`` in order (the fast path may end the walk early).
    Model failures are not raised: they end in the outcome's ``error``.

    Args:
        question, search_path: the question as asked; the caller's search_path.
        evidence: BIRD-style external knowledge, or None.
        conversation: the conversation key (its earlier turns go into the prompts), or None.
        leave_out: evaluation only (``nl2sql.evaluate``); None for every ordinary call.
        keep_rows: every execution keeps its rows (``Run.chosen_rows``: ``nl2sql.ask``).
        usage_if_failed: False: when no SQL was chosen the call's question and tokens are not
            added to the role's day here (the caller raises, which would roll them back: it
            has them written where the error cannot undo them, with the log row).

    Returns:
        The run, every stage's output in its fields (``run.outcome.sql``: the chosen query).

    Raises:
        QuestionError: a bad question or conversation key.
        ConfigError: no model, or a bad setting.
        NotIndexedError: nothing the role may read is indexed.
        EmbeddingError: the embedding model is missing.
        plpy.SPIError: QueryCanceled when the caller cancelled.
    """
    run = start.open_run(plpy, question, search_path, evidence, conversation, leave_out)
    run.keep_rows = keep_rows
    for stage in STAGES:
        if stage.when is not None and not stage.when(run):
            continue
        _run_stage(run, stage)
        if run.finished:
            break
    if usage_if_failed or (run.outcome is not None and run.outcome.sql is not None):
        start.record_usage(run)
    return run


def explain(
    plpy,
    question: str,
    search_path: str,
    evidence: str | None = None,
    conversation: str | None = None,
    leave_out: LeaveOut | None = None,
    usage_if_failed: bool = True,
) -> dict[str, Any]:
    """Answer one question (``answer``) and render its trace from the run.

    Args:
        plpy, question, search_path, evidence, conversation, leave_out, usage_if_failed: as
            for ``answer``.

    Returns:
        The JSON-able trace: ``sql`` (None with ``error`` when nothing executed or the vote
        abstained), ``timings`` in ms (``overhead_ms`` = total − ``llm_wait_ms``), ...

    Raises:
        As ``answer``.
    """
    run = answer(
        plpy,
        question,
        search_path,
        evidence,
        conversation,
        leave_out,
        usage_if_failed=usage_if_failed,
    )
    return render(run)


def ask(
    plpy,
    question: str,
    search_path: str,
    evidence: str | None = None,
    conversation: str | None = None,
    usage_if_failed: bool = True,
) -> tuple[dict[str, Any], list[str] | None]:
    """Answer one question, keeping the rows of the chosen SQL's checked execution: the rows
    ``nl2sql.ask`` returns are those the vote saw, read while the candidate's subtransaction
    held its locks (a re-run could meet a table dropped or renamed since).

    Args:
        plpy, question, search_path, evidence, conversation, usage_if_failed: as for
            ``answer``.

    Returns:
        ``(trace, rows)``: the trace as ``explain`` renders it, and the chosen SQL's rows (at
        most ``max_rows`` ``row_to_json`` texts; None when nothing was chosen).

    Raises:
        As ``answer``.
    """
    run = answer(
        plpy,
        question,
        search_path,
        evidence,
        conversation,
        keep_rows=True,
        usage_if_failed=usage_if_failed,
    )
    return render(run), run.chosen_rows()


def retrieve(
    plpy, question: str, search_path: str, evidence: str | None, presql: str | None
) -> dict[str, Any]:
    """Walk the stages before the first model call and, in its place, its ``without_model``
    (backs ``nl2sql.retrieve``). The question is not rewritten; the fast path is not tried.

    Args:
        question, search_path, evidence: as for ``answer``.
        presql: a PreSQL from elsewhere (adds linking, DAIL selection, FinSQL prompt), or None.

    Returns:
        ``stages.trace.render_retrieval``'s JSON-able dict.

    Raises:
        QuestionError, ConfigError, NotIndexedError, EmbeddingError: as ``answer`` (no model
            is needed).
    """
    run = start.open_run(plpy, question, search_path, evidence, with_models=False)
    run.given_presql = presql
    for stage in STAGES:
        if stage.calls_model:
            stage.without_model(run)
            break
        if stage.in_retrieve:
            _run_stage(run, stage)
    return render_retrieval(run)


def log_trace(plpy, trace: dict[str, Any]) -> int | None:
    """Log the whole trace to ``nl2sql.query_log`` (the call's last step).

    Args:
        trace: ``explain``'s trace.

    Returns:
        The ``nl2sql.query_log`` id, or None on a read replica (nothing written).

    Raises:
        plpy.SPIError: the insert failed.
    """
    return query_log.log_query(plpy, trace)
