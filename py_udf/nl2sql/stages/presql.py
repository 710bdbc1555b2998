"""The PreSQL round and the linking, DAIL re-selection and voter routing after it.
Sources: PET-SQL (Li et al. 2024) §3.1, §3.3, §3.4; DAIL-SQL (Gao et al. 2023) §3.3."""

from __future__ import annotations

from ..core.errors import Nl2sqlError
from ..generation.cleaning import clean
from ..model.llm import call_models_during
from ..selection import reliability
from ..selection.hardness import hardness, route
from .before_models import late_lookups_overlapped, leave_out_examples
from .prompt_parts import link_and_select
from .run import Linking, Run


def write_presql(run: Run) -> None:
    """Run the PreSQL round: the first model answers while ``late_lookups`` runs.

    The wait is recorded as ``llm_waits_ms.presql``.

    Args:
        run: sets ``presql.reply`` (and ``examples_after_vector_values`` when a strong
            vector match re-masked the question).

    Raises:
        plpy.SPIError: QueryCanceled when the caller cancelled during the wait.
        EmbeddingError: the embedding model is missing.
    """
    pre = run.presql
    rnd = call_models_during(
        [(run.models[0], run.gate.seal("presql", pre.prompt))],
        lambda: late_lookups_overlapped(run),
        run.on_wait,
        run.budget_s(),
    )
    run.timer.waited("presql", rnd.wait_ms)
    leave_out_examples(run)  # a re-masked question fetched its examples again
    if run.context.remasked:
        pre.examples_after_vector_values = run.gate.examples(
            "trace", run.context.candidates[: run.st.k_examples]
        )
    pre.reply = rnd.replies[0]


def link(run: Run) -> None:
    """Clean the PreSQL, link the schema from it, re-select examples, route the voters.

    Args:
        run: sets ``presql.sql`` (as cleaned), ``cleaning``, ``refused`` and ``linking``.

    Raises:
        ValueError: the column similarity is missing (not expected after ``write_presql``).
    """
    pre, ctx, schema = run.presql, run.context, run.schema
    reply = pre.reply
    cl = clean(reply.text, run.models[0].dialect) if reply.text else None
    pre.sql = (cl.sql or None) if cl else None
    pre.cleaning = cl.steps if cl else []
    if cl is not None and cl.reason is not None:
        pre.refused = cl.reason
    try:
        linked, selection = link_and_select(ctx, schema, pre.sql, run.st, reply.text)
        level = hardness(pre.sql) if pre.sql else None
    except Exception as e:
        if isinstance(e, Nl2sqlError) or isinstance(e, getattr(run.plpy, "SPIError", ())):
            raise
        pre.refused = f"linking failed: {type(e).__name__}: {str(e)[:300]}"
        # link, select examples and route as without a PreSQL (the trace shows the cleaned one)
        linked, selection = link_and_select(ctx, schema, None, run.st, reply.text)
        level = None
    shown = run.gate.examples("trace", selection.examples)
    voters, why, rel = _route(run, level)
    run.linking = Linking(
        linked,
        selection,
        shown,
        [m for m in run.models if m.name in voters],
        schema.subset(set(linked.tables)) if linked.tables else schema,
        level,
        voters,
        why,
        rel,
    )


def _route(run: Run, level: str | None) -> tuple[list[str], str, reliability.Reliability | None]:
    """The voters for a PreSQL of hardness ``level`` (``hardness_voters``, else the voter sets
    ``nl2sql.calibrate`` learned), the reason, and the calibrated reliability (or None)."""
    names = [m.name for m in run.models]
    rel = reliability.load(run.plpy) if run.st.reliability_vote else None
    routing = run.st.hardness_voters or (rel.voters if rel is not None else {})
    voters, why = route(level, routing, names)
    if routing and not run.st.hardness_voters:
        why += " (voter sets learned by nl2sql.calibrate)"
    return voters, why, rel


def route_one_round(run: Run) -> None:
    """One round: the first model's answer (written from the PreSQL prompt, as its PreSQL
    would be) gives the hardness that routes the voters; no linking.

    Args:
        run: after the round (``finsql_replies``); sets ``linking`` (``linked`` and
            ``selection`` None, ``schema`` the PreSQL prompt's).
    """
    first = run.models[0]
    reply = next((r for c, r in zip(run.plan.calls, run.finsql_replies) if c.model is first), None)
    cl = clean(reply.text, first.dialect) if reply is not None and reply.text else None
    level = hardness(cl.sql) if cl is not None and cl.sql else None
    voters, why, rel = _route(run, level)
    why = f"one round: the first model's answer stands for the PreSQL; {why}"
    if left := [m.name for m in run.models if m.name not in voters]:
        why += f"; the answers of {', '.join(left)} do not vote"
    models = [m for m in run.models if m.name in voters]
    schema = run.context.presql_schema or run.schema
    run.linking = Linking(None, None, [], models, schema, level, voters, why, rel)
