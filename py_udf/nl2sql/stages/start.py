"""The run's start and the question stages (ReBoost §3.1 relative time), the schema, the gate."""

from __future__ import annotations

from ..core import catalog
from ..core.settings import get_settings
from ..core.timing import StageTimer
from ..model import quota as quotas
from ..model.config import get_models
from ..model.gate import Gate
from ..ops import value_policy
from ..retrieval.conversation import earlier_turns, validate_key
from ..retrieval.question import rewrite_question, validate_question
from .run import LeaveOut, Run


def open_run(
    plpy,
    question: str,
    search_path: str,
    evidence: str | None,
    conversation: str | None = None,
    leave_out: LeaveOut | None = None,
    with_models: bool = True,
) -> Run:
    """Read the settings, validate the question, read the models and the earlier turns.

    Args:
        question, search_path, evidence: as asked; the caller's search_path; hint or None.
        conversation, leave_out: the conversation key; evaluation only; or None.
        with_models: read the enabled models (``retrieve()`` needs none).

    Returns:
        The run, its timer started before anything was read.

    Raises:
        QuestionError: a bad question or conversation key.
        ConfigError: no model is enabled (``with_models``), or a stored setting is invalid.
    """
    timer = StageTimer()
    st = get_settings(plpy)
    q = validate_question(question, st.question_max_chars)
    models = get_models(plpy, st) if with_models else []
    key = validate_key(conversation)
    turns = earlier_turns(plpy, key, st.conversation_turns)
    return Run(
        plpy,
        st,
        models,
        q,
        search_path,
        evidence,
        timer,
        conversation=key,
        turns=turns,
        leave_out=leave_out,
        prompt_question=q,
    )


def quota(run: Run) -> None:
    """Check the calling role's questions_per_minute quota and count the question
    (``model.quota.take``), before anything else of the question runs.

    Args:
        run: sets ``quota``.

    Raises:
        QuotaExceeded: the role is over the limit.
    """
    run.quota = quotas.take(run.plpy, quotas.QUESTION)


def quota_tokens(run: Run) -> None:
    """Check the calling role's tokens_per_day quota before the first model request (a
    question the fast path answered never gets here: it costs no tokens).

    Args:
        run: its ``quota`` was taken (no check for a role without a quota).

    Raises:
        QuotaExceeded: the role is over the limit.
    """
    if run.quota is not None and run.quota.get("limited"):
        quotas.take(run.plpy, quotas.TOKENS)


def record_usage(run: Run) -> None:
    """Add the call's question (unless ``quota`` counted it), tokens and cost to the role's
    day (``model.quota.record``; nothing on a read replica).

    Args:
        run: after its stages (``outcome.tokens``).
    """
    if run.quota is None:
        return
    usage = run.outcome.tokens if run.outcome is not None else quotas.usage_of([])
    quotas.record(run.plpy, 0 if run.quota.get("counted") else 1, usage)


def rewrite(run: Run) -> None:
    """Make relative time explicit in the question the prompts show (``rewrite_time``).

    Args:
        run: sets ``prompt_question`` and ``rewriting``.

    Raises:
        plpy.SPIError: the date could not be read.
    """
    run.prompt_question, run.rewriting = rewrite_question(run.plpy, run.question, run.st)


def load_schema(run: Run) -> None:
    """Load the schema the role may read over the caller's search_path, and the call's gate.

    Args:
        run: sets ``schema``, ``gate`` (the role's value rules), ``values_withheld`` and
            ``values_partial``.

    Raises:
        NotIndexedError: nothing the role may read is indexed.
    """
    path = catalog.parse_search_path(run.plpy, run.search_path)
    run.schema = catalog.load_schema(run.plpy, path, run.st.sample_values)
    run.gate = Gate(run.schema, run.st.send_values)
    run.values_withheld = run.gate.report()
    run.values_partial = value_policy.partial_value_columns(run.schema)
