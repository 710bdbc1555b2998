"""The stages before the first model call. Sources: PET-SQL (Li et al. 2024) §3.1–3.3;
OpenSearch-SQL (Xie et al. 2024) §3.4."""

from __future__ import annotations

import dataclasses

from ..core.types import Vote
from ..curated.fast_path import FastPath
from ..curated.fast_path import fast_path as fast_path_of
from ..generation.candidates import rounds_for
from ..model import capability
from ..model.llm import fitted_budget
from ..model.quota import usage_of
from ..retrieval.conversation import visible_turns
from .gather import add_columns, add_examples, add_vector_values, gather
from .prompt_parts import finsql_prompt, first_examples, link_and_select
from .prompt_parts import presql_prompt as build_presql_prompt
from .run import Linking, Outcome, PreSQL, Rounds, Run


def gather_context(run: Run) -> None:
    """Retrieval (``stages.gather.gather``); keep the turns the role may still read.

    Args:
        run: sets ``context`` and (in a conversation) ``turns_shown``; the examples come in
            the next stage but one (``gather_examples``).

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    run.context = ctx = gather(run.plpy, run.prompt_question, run.evidence, run.schema, run.st)
    leave_out_examples(run)
    ctx.turns = tuple(visible_turns(run.turns, run.schema))
    if run.conversation is not None:  # the turns the prompts show (literals masked there)
        run.turns_shown = run.gate.turns("trace", ctx.turns)


def gather_examples(run: Run) -> None:
    """The pool examples nearest to the masked question (``stages.gather.add_examples``), after
    the fast path: a question a verified query answers does not look them up.

    Args:
        run: its ``context`` gets ``candidates`` and ``skeletons``; sets ``examples_shown``.
    """
    ctx = run.context
    add_examples(run.plpy, ctx, run.st)
    leave_out_examples(run)
    run.examples_shown = run.gate.examples(
        "trace", first_examples(ctx.verified, ctx.candidates, run.st.k_examples)
    )


def leave_out_examples(run: Run) -> None:
    """Evaluation only: drop the pairs ``LeaveOut.keeps`` refuses from the examples.

    Args:
        run: its ``context`` changes when ``leave_out`` is set.
    """
    lo, ctx = run.leave_out, run.context
    if lo is None:
        return
    ctx.verified_rows = [r for r in ctx.verified_rows if lo.keeps(r.question, r.sql, r.id)]
    ctx.verified = [e for e in ctx.verified if lo.keeps(e.question, e.sql, e.id)]
    ctx.candidates = [e for e in ctx.candidates if lo.keeps(e.question, e.sql)]


def fast_path(run: Run) -> None:
    """Answer from a verified query or template without a model call (``curated.fast_path``);
    not tried in an evaluation or for a question rewritten for relative time.

    Args:
        run: sets ``fast_path`` or ``fast_path_skipped``; when answered, ``outcome`` and
            ``finished`` (no later stage runs).

    Raises:
        plpy.SPIError: QueryCanceled when the caller cancelled.
    """
    ctx = run.context
    if run.leave_out is not None:
        run.fast_path_skipped = (
            "evaluation: the fast path is bypassed so that the models are measured"
        )
        return
    if not ctx.verified_rows:
        return
    if run.prompt_question != run.question:
        run.fast_path_skipped = "the question was rewritten for relative time"
        return
    named = [(t.id, t.phrase) for t in ctx.business.terms if t.phrase]
    run.fast_path = fp = fast_path_of(
        run.plpy,
        run.question,
        ctx.verified_rows,
        ctx.values,
        run.schema,
        ctx.business.known_terms,
        named,
        run.st,
        run.search_path,
        keep_rows=run.keep_rows,
    )
    if fp.candidate is not None:
        run.timer.add_all(ctx.timings)
        run.outcome, run.finished = _verified_outcome(fp), True


def _verified_outcome(fp: FastPath) -> Outcome:
    """The outcome of a verified query that answered: one candidate, confidence 1, no tokens."""
    c, row = fp.candidate, fp.row
    group = {
        "result_hash": c.result_hash,
        "size": 1,
        "confidence": 1.0,
        "sources": [c.source],
        "fastest_ms": c.exec_ms,
        "fastest_source": c.source,
        "sql": c.sql,
        "row_count": c.row_count,
    }
    reason = (
        f"answered from verified {row.kind} {row.id} "
        f"(similarity {row.similarity}) without a model call"
    )
    vote = Vote(c.sql, c.result_hash, 1.0, [group], reason, [], "verified_query")
    return Outcome(vote, [c.to_json()], c.sql, 1.0, usage_of([]))


def presql_prompt(run: Run) -> None:
    """Build the PreSQL prompt (``prompt_parts.presql_prompt``); add retrieval's figures to
    the timer (``columns_ms``, when pruning needed it, left out of this stage's time).

    Args:
        run: sets ``presql`` (its prompt and pruning).

    Raises:
        EmbeddingError: pruning needed an embedding and the model is missing.
    """
    ctx = run.context
    model = run.models[0].model if run.models else ""
    if run.st.examples_when == "auto":  # resolved once: the repair (stages.finsql) reads it too
        run.st = dataclasses.replace(run.st, examples_when=_examples_when(run))
    st, window = run.st, None
    # a server that states its context window bounds the prompt too; every model's, as one
    # round sends this prompt to each of them
    for m in run.models:
        budget, why = fitted_budget(m, st.prompt_token_budget)
        if why:
            st, window = dataclasses.replace(st, prompt_token_budget=budget), f"{m.name}: {why}"
    prompt, _schema, pruning = build_presql_prompt(run.plpy, ctx, run.schema, st, run.gate, model)
    if window:
        pruning["budget_from"] = window
    run.presql = PreSQL(prompt, pruning)
    run.timer.add_all(ctx.timings)
    run.timer.exclude(ctx.timings.get("columns_ms", 0.0))


def _examples_when(run: Run) -> str:
    """Setting ``examples_when`` = ``auto``: ``on_failure`` when every model is served by a
    local server (``capability.local_server``), whose prompt cache then keeps all of the first
    prompt but the question; else ``always``. Where it came from: bench/live.py with
    Qwen2.5-Coder-0.5B and 1.5B-Instruct on llama.cpp (docs/benchmarks.md): the same EX, the
    time a question 3 to 6 times lower."""
    local = [capability.local_server(m) for m in run.models]
    return "on_failure" if local and all(local) else "always"


def choose_rounds(run: Run) -> None:
    """Decide one or two model rounds from setting ``model_rounds`` and the PreSQL prompt's
    pruning (``generation.candidates.rounds_for``).

    Args:
        run: sets ``rounds``.
    """
    n, why = rounds_for(run.st.model_rounds, run.presql.pruning)
    run.rounds = Rounds(n, run.st.model_rounds, why)


def late_lookups(run: Run) -> tuple[float, float]:
    """Vector value matches and question/column similarity, needed only after PreSQL.

    Args:
        run: its ``context`` is completed.

    Returns:
        ``(vector values ms, columns ms)``; 0.0 for what was already done.

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    ctx, schema = run.context, run.schema
    vector_ms = add_vector_values(run.plpy, ctx, schema, run.st)
    return vector_ms, add_columns(run.plpy, ctx, schema)


def late_lookups_overlapped(run: Run) -> None:
    """``late_lookups`` while a model round is out; times go to ``overlapped_ms``.

    Args:
        run: its ``context`` is completed.

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    vector_ms, columns_ms = late_lookups(run)
    run.timer.overlapped("vector_values_ms", vector_ms)
    run.timer.overlapped("columns_ms", columns_ms)


def instead_of_presql(run: Run) -> None:
    """``retrieve()``'s stand-in for the PreSQL round: ``late_lookups`` timed as retrieval;
    with the caller's PreSQL, linking, DAIL selection and the FinSQL prompt.

    Args:
        run: its ``context`` is completed; with ``given_presql`` sets ``linking`` and
            ``finsql_prompt``.

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    vector_ms, columns_ms = late_lookups(run)
    ctx = run.context
    ctx.timings["values_ms"] = round(ctx.timings["values_ms"] + vector_ms, 3)
    ctx.timings["columns_ms"] = round(ctx.timings.get("columns_ms", 0.0) + columns_ms, 3)
    if not run.given_presql:
        return
    linked, sel = link_and_select(ctx, run.schema, run.given_presql, run.st)
    run.linking = Linking(linked, sel, run.gate.examples("trace", sel.examples))
    run.finsql_prompt = finsql_prompt(ctx, run.schema, linked, sel, run.st, run.gate)[0]
