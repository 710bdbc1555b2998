"""One call of ``nl2sql(question)``: PET-SQL's two stages with cross-consistency voting.

``answer()`` runs the stages below one after another; each
is a function of its own taking and returning dataclasses, and each is timed by ``answer()``
under its key of the trace's ``timings`` (timing.StageTimer):

=====================  =====================================================  =================
stage                  what it does                                           timing key
=====================  =====================================================  =================
``question_stage``     validate the question, rewrite relative time           ``schema_ms``
                       (ReBoost), load the schema the role may see
``retrieve_stage``     business terms and instructions, exact/trigram value   ``retrieval_ms``
                       matches, mask & embed, top-k examples and the nearest
                       verified queries by masked-question similarity
``verified_stage``     the fast path: a verified query or template that       ``verified_ms``
                       matches and binds answers without a model call (the
                       call ends here)
``presql_prompt_stage`` reference-enhanced prompt, schema pruned to the       ``prompt_ms``
                       token budget when too large
``presql_stage``       the first model writes the PreSQL; vector value        ``presql_round_ms``
                       matches and question/column similarity run meanwhile
``linking_stage``      clean the PreSQL; schema linking (PreSQL ∪ values ∪    ``finsql_prompt_ms``
                       similar columns ∪ FK bridges); DAIL re-selection;
                       PreSQL hardness routes the voters
``finsql_plan_stage``  FinSQL calls (models × prompt variants × samples),     ``finsql_prompt_ms``
                       the PreSQL as a candidate, the evaluator
``finsql_stage``       the FinSQL round; the PreSQL candidate and each early  ``finsql_round_ms``
                       answer are cleaned → checked → aligned → executed
                       while other models are still out
``execute_stage``      the answers that came last: clean → check → align →    ``execute_ms``
                       execute (read-only, time-limited)
``repair_stage``       failing or empty candidates, ≤ 3 rounds                ``repair_ms``
``vote_stage``         MCS-SQL selection: filter, confidence threshold,        ``vote_ms``
                       majority with ties to the fastest, optional multiple
                       choice by a model
``trace_stage``        candidates, vote, tokens and error into the trace;     ``trace_ms``
                       abstention below ``abstain_below`` (abstain.py)
=====================  =====================================================  =================

The caller logs the trace (``log_trace``). Model waits are recorded per round in
``llm_waits_ms`` and left out of every stage's figure; work done while a round's models are
out is shown in ``overlapped_ms``; ``overhead_ms`` = total − model waits.

Sources: PET-SQL (Li et al. 2024) §3.1–3.4; DAIL-SQL (Gao et al. 2023) §3.3–3.4; MCS-SQL (Lee
et al. 2024) §3.2–3.3; ReBoost (Sui et al. 2023) §3.1, §3.3; OpenSearch-SQL (Xie et al. 2024) §3.5.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from .core import catalog, spi
from .core.errors import Nl2sqlError
from .core.settings import Settings, get_settings
from .core.timing import StageTimer
from .core.types import Candidate, LLMReply, ModelConfig, Schema, Status, Turn, Vote
from .curated import verified
from .embedding import client as embed_client
from .generation import safety
from .generation.alignment import ValueIndex
from .generation.candidates import Evaluator, GenCall, candidates_from, finsql_calls
from .generation.cleaning import clean
from .generation.repair import repair_loop
from .model import prompts
from .model.config import get_models
from .model.gate import Gate
from .model.llm import call_models, call_models_during, pick_model
from .ops import value_policy
from .retrieval import context
from .retrieval.context import Context
from .retrieval.conversation import earlier_turns, validate_key, visible_turns
from .retrieval.example_selection import Selection
from .retrieval.linking import Linked
from .retrieval.question import rewrite_question, validate_question
from .selection import abstain, reliability
from .selection.hardness import hardness, route
from .selection.multiple_choice import apply_choice, multiple_choice_prompt, parse_choice, select


@dataclass
class LeaveOut:
    """Evaluation only (``nl2sql.evaluate``): the verified query whose question is being asked.

    The call then measures the models: the fast path is bypassed, and neither this verified
    query nor an example of the same question or SQL is a few-shot example (leave-one-out).

    Attributes:
        verified_id: the verified query's id in ``nl2sql.verified_query``.
        question: its question.
        sql: its SQL.
        run_id: the ``nl2sql.evaluation_run`` id (the trace's ``evaluation_run``).
    """

    verified_id: int
    question: str
    sql: str
    run_id: int

    def keeps(self, question: str, sql: str, verified_id: int | None = None) -> bool:
        """Whether an example or verified query may still be shown.

        Args:
            question: its question.
            sql: its SQL.
            verified_id: its verified query id, when it is one.

        Returns:
            False for the evaluated verified query itself and for any pair with the same
            question (case and spacing ignored) or the same SQL (spacing and a final ``;``
            ignored).
        """

        def q(t: str) -> str:
            return " ".join((t or "").lower().split())

        def s(t: str) -> str:
            return " ".join((t or "").strip().rstrip(";").split())

        return not (
            verified_id == self.verified_id
            or q(question) == q(self.question)
            or s(sql) == s(self.sql)
        )


@dataclass
class Run:
    """What every stage of one call shares: the database, settings, models, trace and timer.

    Attributes:
        plpy: the PL/Python module of the calling backend (SPI access).
        st: the effective settings.
        models: the enabled models, in position order (the first writes the PreSQL).
        search_path: the caller's search_path text.
        evidence: the caller's hint text, or None.
        trace: the call's trace, filled in by the stages.
        timer: the call's stage timer.
        gate: the gate every text bound for a model passes (the asking role's value rules),
            set by ``question_stage``.
        turns: the conversation's earlier turns, oldest first (empty outside a conversation).
        leave_out: evaluation only: the verified query being evaluated (``LeaveOut``), else
            None.
    """

    plpy: Any
    st: Settings
    models: list[ModelConfig]
    search_path: str
    evidence: str | None
    trace: dict[str, Any]
    timer: StageTimer
    gate: Gate | None = None
    turns: list[Turn] = field(default_factory=list)
    leave_out: LeaveOut | None = None

    def on_wait(self) -> None:
        """Let a pending cancel land; called between slices of a model wait.

        Raises:
            plpy.SPIError: QueryCanceled when the caller cancelled (``pg_cancel_backend``,
                Ctrl-C).
        """
        spi.cancel_point(self.plpy)

    def budget_s(self) -> float | None:
        """Return the seconds left before the caller's ``statement_timeout``.

        Returns:
            Seconds (may be negative when already over), or None when no statement_timeout
            is set.
        """
        return safety.statement_remaining_s(self.plpy)


@dataclass
class Asked:
    """The question: as validated, as the prompts show it, and the schema the role may see.

    Attributes:
        question: the validated question.
        prompt_question: the question as the prompts show it (relative time rewritten).
        schema: the schema the calling role may read (``catalog.load_schema``).
    """

    question: str
    prompt_question: str
    schema: Schema


@dataclass
class PreSQL:
    """PreSQL's round: its prompt, the model's reply and the cleaned SQL.

    Attributes:
        prompt: the PreSQL prompt.
        reply: the first model's reply.
        sql: the cleaned PreSQL, set by ``linking_stage``; None when there was no answer.
    """

    prompt: str
    reply: LLMReply
    sql: str | None = None


@dataclass
class Linking:
    """After PreSQL: linked schema, DAIL selection, and the routed FinSQL writers/voters.

    Attributes:
        linked: the schema linking (tables, columns, why).
        selection: the DAIL selection of examples.
        models: the FinSQL writers (voters) routed by the PreSQL's hardness.
        schema: the linked tables (the whole schema when nothing linked).
        level: the PreSQL's Spider hardness, or None.
        reliability: the calibrated per-model reliability the vote uses (``reliability.load``),
            or None for a plain majority.
    """

    linked: Linked
    selection: Selection
    models: list[ModelConfig]
    schema: Schema  # the linked tables (the whole schema when nothing linked)
    level: str | None = None  # the PreSQL's hardness
    reliability: reliability.Reliability | None = None  # calibrated, when the vote uses it


@dataclass
class FinsqlPlan:
    """The FinSQL round to run: its calls, the PreSQL as a candidate, and the evaluator.

    Attributes:
        calls: the FinSQL requests, variant-major.
        presql: the PreSQL as a candidate (status ``refused`` when it had no answer).
        evaluator: turns answer text into executed candidates.
        early: call index -> its candidates, for answers evaluated during the round.
    """

    calls: list[GenCall]
    presql: Candidate
    evaluator: Evaluator
    early: dict[int, list[Candidate]] = field(default_factory=dict)  # answers evaluated early


@dataclass
class Selected:
    """The vote's outcome and the multiple-choice replies.

    Attributes:
        vote: the selection's outcome.
        replies: the multiple-choice model's reply; empty when no model was asked.
    """

    vote: Vote
    replies: list[LLMReply] = field(default_factory=list)


def _reply_json(r: LLMReply) -> dict[str, Any]:
    return {
        "model": r.model,
        "error": r.error,
        "latency_ms": round(r.latency_ms, 1),
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "text": r.text,
    }


def answer(
    plpy,
    question: str,
    search_path: str,
    evidence: str | None = None,
    conversation: str | None = None,
    leave_out: LeaveOut | None = None,
) -> dict[str, Any]:
    """Run the pipeline for one question: the stages of the module docstring, in order.

    Source: PET-SQL (Li et al. 2024) §3, with DAIL-SQL (Gao et al. 2023) §3.3 selection,
    MCS-SQL (Lee et al. 2024) §3.2–3.3 prompts and selection, ReBoost (Sui et al. 2023) §3.1
    rewriting and §3.3 repair.

    Model failures are not raised: they are recorded in the trace; when every model failed,
    its ``error`` says so.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        question: the question as asked.
        search_path: the caller's search_path (names resolve as the caller's would).
        evidence: BIRD-style external knowledge, or None.
        conversation: the conversation key (follow-up questions: its earlier turns go into
            the prompts), or None.
        leave_out: evaluation only (``nl2sql.evaluate``): the verified query whose question
            this is; the fast path is bypassed and it is no example (``LeaveOut``). None for
            every ordinary call.

    Returns:
        The trace (a JSON-able dict) whose ``sql`` is the chosen query (None with ``error`` set
        when no candidate executed, or when the vote abstained: then ``abstained`` lists the
        readings). Timings in milliseconds: ``llm_wait_ms`` is time spent
        waiting on models, ``overhead_ms`` = total − llm_wait (in-database work).

    Raises:
        QuestionError: a bad question.
        ConfigError: no model, or a bad setting.
        NotIndexedError: nothing the role may read is indexed.
        EmbeddingError: the embedding model is missing.
        plpy.SPIError: QueryCanceled when the caller cancelled.
    """
    timer = StageTimer()
    run = start(plpy, question, search_path, evidence, timer, conversation)
    if leave_out is not None:
        _mark_evaluation(run, leave_out)
    with timer.stage("schema_ms"):
        asked = question_stage(run)
    with timer.stage("retrieval_ms"):
        ctx = retrieve_stage(run, asked)
    with timer.stage("verified_ms"):
        answered = verified_stage(run, asked, ctx)
    if not answered:
        _generate_and_select(run, timer, asked, ctx)
        run.trace["embedder"] = embed_client.report()
    timer.finish(run.trace)
    return without_nul(run.trace)


def _mark_evaluation(run: Run, leave_out: LeaveOut) -> None:
    """Set the run's leave-one-out query and record the evaluation run in the trace."""
    run.leave_out = leave_out
    run.trace["evaluation_run"] = leave_out.run_id
    run.trace["evaluation"] = {
        "run": leave_out.run_id,
        "verified_query": leave_out.verified_id,
        "fast_path": "bypassed",
        "left_out": "this verified query and examples of the same question or SQL",
    }


def _generate_and_select(run: Run, timer: StageTimer, asked: Asked, ctx: Context) -> None:
    """The stages after the fast path, each timed: PreSQL, linking, FinSQL, execution, repair,
    the vote, and the trace (with abstention)."""
    with timer.stage("prompt_ms"):
        pre_prompt = presql_prompt_stage(run, asked, ctx)
    with timer.stage("presql_round_ms"):
        pre = presql_stage(run, asked, ctx, pre_prompt)
    with timer.stage("finsql_prompt_ms"):
        link = linking_stage(run, asked, ctx, pre)
        plan = finsql_plan_stage(run, asked, ctx, pre, link)
    with timer.stage("finsql_round_ms"):
        fin_replies = finsql_stage(run, plan, link)
    with timer.stage("execute_ms"):
        cands = execute_stage(run, plan, fin_replies)
    with timer.stage("repair_ms"):
        rep = repair_stage(run, ctx, pre, plan, cands)
    with timer.stage("vote_ms"):
        sel = vote_stage(run, asked, link, cands)
    with timer.stage("trace_ms"):
        trace_stage(run, pre, fin_replies, cands, rep, sel)
        abstain_stage(run, asked, cands, sel)


def without_nul(value: Any) -> Any:
    """``value`` with every NUL character (U+0000) in its strings replaced by U+FFFD.

    PostgreSQL text and jsonb cannot hold U+0000, and a model's answer may contain it: the
    trace keeps the answer's text (``raw_text``, the replies), so the log write and ``explain``
    would fail on it. One pass over the JSON-able trace; nothing is copied where no string
    holds a NUL.

    Args:
        value: a JSON-able value (dicts, lists, tuples, strings, scalars).

    Returns:
        The value itself when it holds no NUL; otherwise a copy with each NUL replaced.
    """
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        out = {k: without_nul(v) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    if isinstance(value, (list, tuple)):
        items = [without_nul(v) for v in value]
        if all(a is b for a, b in zip(items, value)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


def start(
    plpy,
    question: str,
    search_path: str,
    evidence: str | None,
    timer: StageTimer,
    conversation: str | None = None,
) -> Run:
    """Read the settings, validate the question and read the models, before any timed stage.

    In a conversation, its earlier turns (the caller's own, ``conversation.earlier_turns``)
    are read too, and listed in the trace's ``turns``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        question: the question as asked.
        search_path: the caller's search_path text.
        evidence: the caller's hint text, or None.
        timer: the call's timer.
        conversation: the conversation key, or None.

    Returns:
        The Run every stage shares, its trace holding question, evidence, search_path, models
        (and ``conversation``, ``turns`` in a conversation).

    Raises:
        QuestionError: a bad question (question.validate_question) or conversation key.
        ConfigError: no model is enabled, or a stored setting is invalid.
    """
    st = get_settings(plpy)
    q = validate_question(question, st.question_max_chars)
    models = get_models(plpy, st)
    key = validate_key(conversation)
    trace: dict[str, Any] = {
        "question": q,
        "evidence": evidence,
        "search_path": search_path,
        "models": [m.name for m in models],
    }
    turns = earlier_turns(plpy, key, st.conversation_turns)
    if key is not None:
        trace["conversation"] = key
        trace["turns"] = [t.__dict__ for t in turns]
    return Run(plpy, st, models, search_path, evidence, trace, timer, turns=turns)


def question_stage(run: Run) -> Asked:
    """Rewrite the question and load the schema the role may see.

    The rewriting makes relative time explicit; the schema is ``catalog.load_schema`` over the
    caller's search_path.

    Source: ReBoost (Sui et al. 2023) §3.1, query rewriting.

    Args:
        run: the call's shared state (``trace["question"]`` is the validated question).

    Returns:
        Asked: the question, its rewritten form and the schema. Sets ``trace["rewriting"]``
        (when rewritten), ``run.gate`` (the asking role's value rules, ``gate.Gate``),
        ``trace["values_withheld"]`` and ``trace["values_partial"]``.

    Raises:
        NotIndexedError: nothing the role may read is indexed.
        plpy.SPIError: the date could not be read.
    """
    q = run.trace["question"]
    q_prompt = rewrite_question(run.plpy, q, run.st, run.trace)
    path = catalog.parse_search_path(run.plpy, run.search_path)
    schema = catalog.load_schema(run.plpy, path, run.st.sample_values)
    run.gate = Gate(schema, run.st.send_values)
    run.trace["values_withheld"] = run.gate.report()
    run.trace["values_partial"] = value_policy.partial_value_columns(schema)
    return Asked(q, q_prompt, schema)


def retrieve_stage(run: Run, asked: Asked) -> Context:
    """Retrieve what the PreSQL prompt needs (``context.retrieve_context``).

    Exact and trigram value matches, the masked question, its embedding and the top-k
    examples by masked-question similarity.

    Source: PET-SQL (Li et al. 2024) §3.2, masked-question examples; OpenSearch-SQL (Xie et
    al. 2024) §3.4, value retrieval.

    Args:
        run: the call's shared state.
        asked: from ``question_stage``.

    Returns:
        The retrieval context (with the conversation's turns the role may still read:
        ``conversation.visible_turns``); ``trace["examples"]`` holds the top-k examples.

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    ctx = context.retrieve_context(
        run.plpy, asked.prompt_question, run.evidence, asked.schema, run.st
    )
    leave_out_examples(run, ctx)
    ctx.turns = tuple(visible_turns(run.turns, asked.schema))
    if "turns" in run.trace:  # the turns the prompts show (the gate masks their literals there)
        run.trace["turns"] = [t.__dict__ for t in run.gate.turns("trace", ctx.turns)]
    run.trace["examples"] = [
        e.__dict__
        for e in run.gate.examples(
            "trace", context.first_examples(ctx.verified, ctx.candidates, run.st.k_examples)
        )
    ]
    run.trace["business_context"] = ctx.business.to_json()
    return ctx


def leave_out_examples(run: Run, ctx: Context) -> None:
    """Evaluation only: drop the evaluated verified query and its pairs from the examples.

    Without ``run.leave_out`` nothing changes. Otherwise the nearest verified queries, the
    verified examples and the example candidates lose every pair ``LeaveOut.keeps`` refuses
    (leave-one-out: a question is never its own example).

    Args:
        run: the call's shared state.
        ctx: retrieval's context, changed in place.

    Returns:
        None.
    """
    lo = run.leave_out
    if lo is None:
        return
    ctx.verified_rows = [r for r in ctx.verified_rows if lo.keeps(r.question, r.sql, r.id)]
    ctx.verified = [e for e in ctx.verified if lo.keeps(e.question, e.sql, e.id)]
    ctx.candidates = [e for e in ctx.candidates if lo.keeps(e.question, e.sql)]


def verified_stage(run: Run, asked: Asked, ctx: Context) -> bool:
    """The fast path: answer from a verified query or template, without any model call.

    ``verified.fast_path`` over the nearest verified queries; skipped when the question was
    rewritten for relative time (its dates depend on the day asked). When one answers, the
    trace is complete: ``verified_query`` (id, kind, similarity, bindings), the candidate,
    ``vote`` (method ``verified_query``), ``sql``, confidence 1 and no tokens.

    Source: verified queries and query templates of in-database text-to-SQL products; ReBoost
    (Sui et al. 2023) Text-to-Function.

    Args:
        run: the call's shared state.
        asked: from ``question_stage``.
        ctx: retrieval's context (values, nearest verified queries, business context).

    Returns:
        True when a verified query answered (the caller ends the call), else False; either way
        ``trace["verified_query"]`` says what was considered.

    Raises:
        plpy.SPIError: QueryCanceled when the caller cancelled.
    """
    if run.leave_out is not None:
        run.trace["verified_query"] = {
            "considered": [],
            "skipped": "evaluation: the fast path is bypassed so that the models are measured",
        }
        return False
    if not ctx.verified_rows:
        return False
    if asked.prompt_question != asked.question:
        run.trace["verified_query"] = {
            "considered": [],
            "skipped": "the question was rewritten for relative time",
        }
        return False
    named = [(t.id, t.phrase) for t in ctx.business.terms if t.phrase]
    fp = verified.fast_path(
        run.plpy,
        asked.question,
        ctx.verified_rows,
        ctx.values,
        asked.schema,
        ctx.business.known_terms,
        named,
        run.st,
        run.search_path,
    )
    run.trace["verified_query"] = fp.trace()
    if fp.candidate is None:
        return False
    c, trace = fp.candidate, run.trace
    run.timer.add_all(ctx.timings)
    trace.update(context.context_trace(ctx))
    trace["candidates"] = [c.to_json()]
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
    trace["vote"] = {
        "sql": c.sql,
        "confidence": 1.0,
        "method": "verified_query",
        "reason": f"answered from verified {fp.row.kind} {fp.row.id} "
        f"(similarity {fp.row.similarity}) without a model call",
        "groups": [group],
        "dropped": [],
    }
    trace["sql"], trace["confidence"] = c.sql, 1.0
    trace["tokens"] = {"prompt": 0, "completion": 0}
    return True


def presql_prompt_stage(run: Run, asked: Asked, ctx: Context) -> str:
    """Build the PreSQL prompt over the whole schema, or one pruned to the token budget.

    Uses ``context.presql_prompt``. Records ``trace["pruning"]`` and retrieval's own figures
    (``values_ms``, ``embed_ms``, ``examples_ms``; ``columns_ms`` when pruning needed the
    question/column similarity, left out of this stage's time).

    Source: PET-SQL (Li et al. 2024) §3.1, the reference-enhanced prompt.

    Args:
        run: the call's shared state.
        asked: from ``question_stage``.
        ctx: retrieval's context.

    Returns:
        The PreSQL prompt.

    Raises:
        EmbeddingError: pruning needed an embedding and the model is missing.
    """
    prompt, _schema, pruning = context.presql_prompt(run.plpy, ctx, asked.schema, run.st, run.gate)
    run.trace["pruning"] = pruning
    run.timer.add_all(ctx.timings)
    run.timer.exclude(ctx.timings.get("columns_ms", 0.0))
    return prompt


def presql_overlap(run: Run, ctx: Context, schema: Schema) -> None:
    """Do the PreSQL round's calling-thread work while the model writes.

    Vector value matches and question/column similarity, needed only after PreSQL (linking,
    DAIL selection, FinSQL, value alignment). Times are recorded in ``overlapped_ms``
    (``vector_values_ms``, ``columns_ms``) when there was work to do.

    Source: OpenSearch-SQL (Xie et al. 2024) §3.4, vector value retrieval; PET-SQL (Li et al.
    2024) §3.3, similar columns.

    Args:
        run: the call's shared state.
        ctx: retrieval's context, changed in place.
        schema: the role's schema.

    Returns:
        None.

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    run.timer.overlapped(
        "vector_values_ms", context.add_vector_values(run.plpy, ctx, schema, run.st)
    )
    run.timer.overlapped("columns_ms", context.add_columns(run.plpy, ctx, schema))


def presql_stage(run: Run, asked: Asked, ctx: Context, prompt: str) -> PreSQL:
    """Run the PreSQL round: the first model answers while ``presql_overlap`` runs.

    The wait is recorded as ``llm_waits_ms.presql``.

    Source: PET-SQL (Li et al. 2024) §3.1, PreSQL.

    Args:
        run: the call's shared state.
        asked: from ``question_stage``.
        ctx: retrieval's context.
        prompt: from ``presql_prompt_stage``.

    Returns:
        PreSQL with the prompt and the reply (``sql`` is set by ``linking_stage``). Sets the
        trace's retrieval part (context.context_trace) and, when a strong vector match
        re-masked the question, ``examples_after_vector_values``.

    Raises:
        plpy.SPIError: QueryCanceled when the caller cancelled during the wait.
        EmbeddingError: the embedding model is missing (``presql_overlap``).
    """
    rnd = call_models_during(
        [(run.models[0], run.gate.seal("presql", prompt))],
        partial(presql_overlap, run, ctx, asked.schema),
        run.on_wait,
        run.budget_s(),
    )
    run.timer.waited("presql", rnd.wait_ms)
    leave_out_examples(run, ctx)  # a re-masked question fetched its examples again
    run.trace.update(context.context_trace(ctx))
    if ctx.remasked:
        run.trace["examples_after_vector_values"] = [
            e.__dict__ for e in run.gate.examples("trace", ctx.candidates[: run.st.k_examples])
        ]
    return PreSQL(prompt, rnd.replies[0])


def linking_stage(run: Run, asked: Asked, ctx: Context, pre: PreSQL) -> Linking:
    """Clean the PreSQL, link the schema from it, re-select examples, route the voters.

    Sets ``pre.sql``; schema linking from it and DAIL re-selection of examples by its
    skeleton; its hardness picks the FinSQL writers and voters (setting ``hardness_voters``).

    Source: PET-SQL (Li et al. 2024) §3.3, PreSQL-based schema linking, and §3.4, fine-grained
    voting; DAIL-SQL (Gao et al. 2023) §3.3, DAIL selection.

    Args:
        run: the call's shared state.
        asked: from ``question_stage``.
        ctx: retrieval's context (with the column similarity ``presql_overlap`` computed).
        pre: from ``presql_stage``; ``pre.sql`` is set here.

    Returns:
        Linking. Sets the trace's ``presql``, linking/selection part and ``hardness``.

    Raises:
        ValueError: the column similarity is missing (``presql_overlap`` did not run); not
            expected within ``answer``.
    """
    reply = pre.reply
    cl = clean(reply.text, run.models[0].dialect) if reply.text else None
    pre.sql = (cl.sql or None) if cl else None
    run.trace["presql"] = {
        "prompt": pre.prompt,
        "reply": _reply_json(reply),
        "sql": pre.sql,
        "cleaning": cl.steps if cl else [],
    }
    if cl is not None and cl.reason is not None:
        run.trace["presql"]["refused"] = cl.reason
    try:
        linked, selection = context.finsql_context(ctx, asked.schema, pre.sql, run.st, reply.text)
        level = hardness(pre.sql) if pre.sql else None
    except Exception as e:
        if isinstance(e, Nl2sqlError) or isinstance(e, getattr(run.plpy, "SPIError", ())):
            raise
        run.trace["presql"]["refused"] = f"linking failed: {type(e).__name__}: {str(e)[:300]}"
        pre.sql = None  # link, select examples and route as without a PreSQL
        linked, selection = context.finsql_context(ctx, asked.schema, None, run.st, reply.text)
        level = None
    run.trace.update(context.linking_trace(linked, selection))
    run.trace["selection"]["examples"] = [
        e.__dict__ for e in run.gate.examples("trace", selection.examples)
    ]
    names = [m.name for m in run.models]
    rel = reliability.load(run.plpy) if run.st.reliability_vote else None
    routing = run.st.hardness_voters or (rel.voters if rel is not None else {})
    voters, why = route(level, routing, names)
    if routing and not run.st.hardness_voters:
        why += " (voter sets learned by nl2sql.calibrate)"
    run.trace["hardness"] = {"presql": level, "voters": voters, "reason": why}
    fin_schema = asked.schema.subset(set(linked.tables)) if linked.tables else asked.schema
    return Linking(
        linked, selection, [m for m in run.models if m.name in voters], fin_schema, level, rel
    )


def finsql_plan_stage(
    run: Run, asked: Asked, ctx: Context, pre: PreSQL, link: Linking
) -> FinsqlPlan:
    """Plan the FinSQL round: its calls, the PreSQL as a candidate, and the evaluator.

    The calls are routed models × prompt variants × samples over the linked schema, the nearest
    verified queries first, then the DAIL-selected examples; the business context (terms,
    instructions) is in every prompt. The PreSQL is a candidate (it votes with ``presql_votes``;
    otherwise a FinSQL answer of the same text reuses its outcome). The evaluator aligns
    values when ``value_alignment`` is on.

    Source: PET-SQL (Li et al. 2024) §3.4, cross-consistency; MCS-SQL (Lee et al. 2024) §3.2,
    prompt variants; OpenSearch-SQL (Xie et al. 2024) §3.5, value alignment.

    Args:
        run: the call's shared state.
        asked: from ``question_stage``.
        ctx: retrieval's context.
        pre: the cleaned PreSQL.
        link: from ``linking_stage``.

    Returns:
        FinsqlPlan.

    Raises:
        Nothing of its own.
    """
    st, k = run.st, run.st.k_examples
    chosen = {e.id for e in link.selection.examples}
    pool = context.first_examples(
        ctx.verified,
        list(link.selection.examples) + [e for e in ctx.candidates if e.id not in chosen][:k],
    )
    calls = finsql_calls(
        link.models,
        asked.prompt_question,
        link.schema,
        pool,
        k,
        st.sample_values,
        run.evidence,
        variants=st.prompt_variants,
        samples=st.samples_per_model,
        sample_temperature=st.sample_temperature,
        values=context.value_triples(
            asked.schema, ctx.values, {tb.name for tb in link.schema.tables}
        ),
        business=ctx.business.prompt_text() or None,
        turns=ctx.turns,
        gate=run.gate,
    )
    reply = pre.reply
    pc = Candidate(
        source=f"presql:{reply.model}", model=reply.model, raw_text=reply.text, prompt=pre.prompt
    )
    if reply.error or not reply.text:
        pc.status, pc.reason = Status.REFUSED, f"no answer: {reply.error or 'empty'}"
    index = None
    if st.value_alignment:
        index = ValueIndex(
            run.plpy,
            st.values_per_column,
            st.value_max_chars,
            st.align_min_trigram,
            st.align_min_cosine,
            partial=value_policy.partial_columns(asked.schema),
        )
    ev = Evaluator(
        plpy=run.plpy,
        schema=asked.schema,
        search_path=run.search_path,
        timeout_ms=st.candidate_timeout_ms,
        max_rows=st.max_rows,
        max_bytes=st.max_result_bytes,
        dialects={m.name: m.dialect for m in run.models},
        values=index,
    )
    return FinsqlPlan(calls, pc, ev)


@dataclass
class FinsqlOverlap:
    """The FinSQL round's calling-thread work while models are out.

    ``work`` evaluates the PreSQL candidate; ``on_reply`` evaluates each answer that arrives
    while other calls are still out (kept in ``plan.early``). Times go to ``overlapped_ms``
    (``presql_candidate_ms``, ``finsql_candidates_ms``).

    Source: PET-SQL (Li et al. 2024) §3.4, candidates (here evaluated as they arrive).

    Attributes:
        timer: the call's stage timer.
        plan: the round's plan.
    """

    timer: StageTimer
    plan: FinsqlPlan

    def work(self) -> None:
        """Check, align and execute the PreSQL candidate (unless it had no answer).

        Raises:
            plpy.SPIError: QueryCanceled when the caller cancelled.
        """
        pc, ev = self.plan.presql, self.plan.evaluator
        if pc.status == Status.PENDING:
            ev.reset_ms()
            ev.run(pc, pc.raw_text)
            self.timer.overlapped("presql_candidate_ms", sum(ev.ms.values()))

    def on_reply(self, i: int, reply: LLMReply, still_out: int) -> None:
        """Evaluate one call's answer now, when other calls are still out.

        Args:
            i: the call's index in ``plan.calls``.
            reply: its reply.
            still_out: how many calls are still out; 0 leaves the answer to ``execute_stage``.

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


def finsql_stage(run: Run, plan: FinsqlPlan, link: Linking) -> list[LLMReply]:
    """Run the FinSQL round: every call concurrently, ``FinsqlOverlap``'s work meanwhile.

    The wait is recorded as ``llm_waits_ms.finsql``.

    Source: PET-SQL (Li et al. 2024) §3.4, cross-consistency.

    Args:
        run: the call's shared state.
        plan: from ``finsql_plan_stage``.
        link: the routing (its first model's prompt variants go into the trace).

    Returns:
        The replies, in call order. Sets ``trace["finsql"]`` (prompts and replies).

    Raises:
        plpy.SPIError: QueryCanceled when the caller cancelled during the wait.
    """
    overlap = FinsqlOverlap(run.timer, plan)
    rnd = call_models_during(
        [c.as_call(run.gate) for c in plan.calls],
        overlap.work,
        run.on_wait,
        run.budget_s(),
        overlap.on_reply,
    )
    run.timer.waited("finsql", rnd.wait_ms)
    calls = plan.calls
    run.trace["finsql"] = {
        "prompt": calls[0].prompt if calls else None,
        "prompts": [c.prompt for c in calls if c.variant > 0 and c.model is link.models[0]],
        "replies": [_reply_json(r) for r in rnd.replies],
    }
    return rnd.replies


def execute_stage(run: Run, plan: FinsqlPlan, replies: list[LLMReply]) -> list[Candidate]:
    """Evaluate the answers not evaluated during the round; collect every candidate.

    Every FinSQL sample is a candidate, in call order: those not evaluated during the round
    are cleaned, checked, aligned and executed now (read-only, time-limited); the PreSQL
    candidate is added when setting ``presql_votes`` is on. Records ``check_ms``, ``align_ms``
    and ``run_ms`` of this work.

    Source: MCS-SQL (Lee et al. 2024) §3.3, candidates executed and filtered before voting.

    Args:
        run: the call's shared state.
        plan: the round's plan.
        replies: from ``finsql_stage``, in call order.

    Returns:
        The candidates.

    Raises:
        plpy.SPIError: QueryCanceled when the caller cancelled.
    """
    ev = plan.evaluator
    ev.reset_ms()  # what runs after the round
    cands: list[Candidate] = []
    for i, (call, reply) in enumerate(zip(plan.calls, replies)):
        if i in plan.early:
            cands.extend(plan.early[i])
            continue
        for c in candidates_from([call], [reply]):
            if c.status == Status.PENDING:
                ev.run(c, c.raw_text)
            cands.append(c)
    if run.st.presql_votes:
        cands.append(plan.presql)
    run.timer.add_all(ev.ms)
    return cands


def repair_stage(
    run: Run, ctx: Context, pre: PreSQL, plan: FinsqlPlan, cands: list[Candidate]
) -> dict[str, Any]:
    """Repair failing or empty candidates with the error and the relevant cell values.

    At most ``repair_rounds`` (≤ 3) rounds; the waits are recorded as
    ``llm_waits_ms.repair``.

    Source: ReBoost (Sui et al. 2023) §3.3, error-driven correction; OpenSearch-SQL (Xie et
    al. 2024) §3.5, refinement.

    Args:
        run: the call's shared state.
        ctx: retrieval's context (matched values).
        pre: the PreSQL (its prompt for candidates without one).
        plan: the round's plan (its evaluator).
        cands: the candidates, changed in place.

    Returns:
        repair.repair_loop's summary, also set as ``trace["repair"]``.

    Raises:
        plpy.SPIError: QueryCanceled when the caller cancelled.
    """
    rep = repair_loop(
        cands,
        {m.name: m for m in run.models},
        partial(_prompt_of, pre.prompt),
        plan.evaluator,
        [v.to_json() for v in ctx.values],
        run.st.repair_rounds,
        run.on_wait,
        run.budget_s,
        gate=run.gate,
    )
    run.timer.waited("repair", rep["llm_wait_ms"])
    run.trace["repair"] = rep
    return rep


def _prompt_of(default: str, c: Candidate) -> str:
    return c.prompt or default


def vote_stage(run: Run, asked: Asked, link: Linking, cands: list[Candidate]) -> Selected:
    """Select the answer: filter, confidence threshold, majority, optional multiple choice.

    Each vote weighs what ``nl2sql.calibrate()`` learned for its model at the PreSQL's
    hardness (``reliability``; trace ``reliability``), 1 when nothing is calibrated.
    Majority ties go as setting ``tie_break`` says (by default to the fastest). With
    ``selection`` = multiple_choice and several groups, a model picks among them (its wait is
    ``llm_waits_ms.multiple_choice``).

    Source: MCS-SQL (Lee et al. 2024) §3.3, filtering, confidence and multiple-choice
    selection; PET-SQL (Li et al. 2024) §3.4 and OpenSearch-SQL (Xie et al. 2024) §3.6, vote
    by result.

    Args:
        run: the call's shared state.
        asked: the question.
        link: the linked schema (shown to the choosing model).
        cands: the candidates.

    Returns:
        Selected. Sets ``trace["multiple_choice"]`` when a model chose.

    Raises:
        ConfigError: setting ``selection_model`` names a model that is not enabled.
        plpy.SPIError: QueryCanceled when the caller cancelled during the wait.
    """
    st = run.st
    weights = None
    if link.reliability is not None:
        weights = {
            m.name: round(link.reliability.weight(m.name, link.level), 6) for m in link.models
        }
    v = select(cands, st.confidence_threshold, st.tie_break, [m.name for m in run.models], weights)
    run.trace["reliability"] = {
        "used": weights is not None,
        "level": link.level,
        "weights": weights,
        "why": (
            "weights learned by nl2sql.calibrate()"
            if weights is not None
            else "reliability_vote is off"
            if not st.reliability_vote
            else "nothing calibrated, or calibration kept the plain majority"
        ),
    }
    if st.selection != "multiple_choice" or len(v.groups) <= 1:
        return Selected(v)
    mc_model = pick_model(run.models, "selection_model", st.selection_model)
    rows: dict[str, list[str]] = {}
    notes: dict[str, str] = {}
    for c in cands:  # each option's rows pass the gate (rows / columns withheld, shapes kept)
        if c.status == Status.OK and c.result_hash not in rows:
            rows[c.result_hash], note = run.gate.rows("multiple_choice", c.sql, c.sample_rows)
            if note:
                notes[c.result_hash] = note
    mc_prompt = multiple_choice_prompt(
        asked.prompt_question,
        v.groups,
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
    v = apply_choice(v, choice, mc_model.name, replies[0].text or replies[0].error)
    run.trace["multiple_choice"] = {
        "model": mc_model.name,
        "prompt": mc_prompt,
        "reply": _reply_json(replies[0]),
        "choice": choice,
    }
    return Selected(v, replies)


def trace_stage(
    run: Run,
    pre: PreSQL,
    fin_replies: list[LLMReply],
    cands: list[Candidate],
    rep: dict[str, Any],
    sel: Selected,
) -> None:
    """Write the outcome into the trace.

    Candidates, vote, ``sql``, confidence, tokens of every model call, and ``error`` when
    nothing was chosen (every model failed, or no candidate executed).

    Args:
        run: the call's shared state.
        pre: from ``presql_stage``.
        fin_replies: from ``finsql_stage``.
        cands: from ``execute_stage`` (after repair).
        rep: from ``repair_stage`` (its token counts).
        sel: from ``vote_stage``.

    Returns:
        None (``run.trace`` is filled in).

    Raises:
        Nothing.
    """
    trace, v = run.trace, sel.vote
    trace["candidates"] = [gated_candidate(run.gate, c) for c in cands]
    trace["vote"] = {
        "sql": v.sql,
        "confidence": v.confidence,
        "reason": v.reason,
        "method": v.method,
        "groups": v.groups,
        "dropped": v.dropped,
    }
    trace["sql"] = v.sql
    trace["confidence"] = v.confidence
    all_replies = [pre.reply, *fin_replies, *sel.replies]
    trace["tokens"] = {
        "prompt": sum(r.prompt_tokens for r in all_replies) + rep["prompt_tokens"],
        "completion": sum(r.completion_tokens for r in all_replies) + rep["completion_tokens"],
    }
    if v.sql is None:
        if all(r.error for r in [pre.reply, *fin_replies]):
            trace["error"] = "nl2sql: every model failed: " + "; ".join(
                sorted({r.error for r in all_replies if r.error})
            )
        else:
            reasons = "; ".join(f"{c['source']}: {c['reason']}" for c in trace["candidates"])
            trace["error"] = f"nl2sql: no candidate executed successfully ({reasons})"
    trace["values_withheld"] = run.gate.report()


def gated_candidate(gate: Gate, c: Candidate) -> dict[str, Any]:
    """A candidate as the trace keeps it: errors and rows through the gate's rules.

    The trace is logged and shown (``explain``, ``my_query_log``, the error ``nl2sql()``
    raises); while values are withheld it holds no more of them than a model was sent: the
    database's error messages lose quoted values (``Gate.error``) and sample rows lose withheld
    columns (``Gate.rows``).

    Args:
        gate: the call's gate.
        c: the candidate.

    Returns:
        ``c.to_json()``, with ``reason``, ``sample_rows`` and each repair's ``reason`` gated.
    """
    d = c.to_json()
    if not gate.withholding:
        return d
    if not (c.reason or "").startswith("no answer"):  # a model's failure, already redacted
        d["reason"] = gate.error("trace", c.reason, c.sql or c.raw_text, c.sqlstate)
    d["sample_rows"] = gate.rows("trace", c.sql, d["sample_rows"])[0]
    for r in d["repairs"]:  # an attempt's database error or refusal (not a model's failure)
        if r.get("reason") and r.get("status") in (Status.ERROR, Status.REFUSED, Status.TIMEOUT):
            r["reason"] = gate.error("trace", r["reason"], r.get("sql"))
    return d


def abstain_stage(run: Run, asked: Asked, cands: list[Candidate], sel: Selected) -> None:
    """Abstain when the chosen group's confidence is below setting ``abstain_below``.

    The trace then has no ``sql``; its ``abstained`` holds the threshold, the confidence and
    the readings (``abstain.readings``: the top groups' SQL and first rows after the value
    policy), and its ``error`` the message ``nl2sql()`` raises. The vote's choice stays in
    ``vote.sql``.

    Source: MCS-SQL (Lee et al. 2024) §3.3, confidence as the share of agreeing candidates;
    abstention on low confidence (selective prediction).

    Args:
        run: the call's shared state.
        asked: the question and the role's schema.
        cands: the candidates.
        sel: the vote's outcome.

    Returns:
        None (``run.trace`` is changed when abstaining).
    """
    v, threshold = sel.vote, run.st.abstain_below
    if not abstain.should_abstain(v, threshold):
        return
    found = abstain.readings(v, cands, run.gate, run.st.abstain_readings)
    run.trace["abstained"] = {"threshold": threshold, "confidence": v.confidence, "readings": found}
    run.trace["sql"] = None
    run.trace["error"] = abstain.message(v.confidence, threshold, found)


def log_trace(plpy, trace: dict[str, Any]) -> int | None:
    """Log the whole trace to ``nl2sql.query_log`` (the pipeline's last step).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        trace: ``answer``'s trace.

    Returns:
        The ``nl2sql.query_log`` id, or None on a server in recovery (read replica), where
        nothing is written.

    Raises:
        plpy.SPIError: the insert failed.
    """
    return safety.log_query(plpy, trace)
