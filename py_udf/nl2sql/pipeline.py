"""One call of ``nl2sql(question)``: PET-SQL's two stages with cross-consistency voting.

question → rewrite relative time (ReBoost) → exact/trigram value retrieval, mask & embed,
top-k examples (masked-question cosine) (context.py) → PreSQL (first model,
reference-enhanced prompt over the indexed schema, pruned to the token budget when too large)
→ schema linking (PreSQL ∪ matched values ∪ similar columns ∪ FK bridges) and DAIL example
selection → PreSQL hardness routes the voters (PET-SQL fine-grained voting) → FinSQL (models ×
prompt variants × samples, concurrently, linked tables only) → clean → check → align values →
execute (read-only, time-limited) → repair failing/empty candidates (≤ 3 rounds) → selection
(MCS-SQL: filter, confidence threshold, majority with ties to the fastest, optional multiple
choice) → log.

Work that needs no reply of a model round runs while the round's models are out (vector value
retrieval and question/column similarity during PreSQL; the PreSQL candidate, and each FinSQL
answer as it arrives, during FinSQL), so the in-database time a caller waits for beyond the
models shrinks; the trace's ``overlapped_ms`` shows what was hidden that way.

Sources: PET-SQL (Li et al. 2024) §3.1–3.4; DAIL-SQL (Gao et al. 2023) §3.3–3.4; MCS-SQL (Lee
et al. 2024) §3.2–3.3; ReBoost (Sui et al. 2023) §3.1, §3.3; OpenSearch-SQL (Xie et al. 2024) §3.5.
"""
from __future__ import annotations

import time
from datetime import date
from typing import Any

from . import catalog, context, prompts, safety
from .alignment import ValueIndex
from .cleaning import clean
from .generation import Evaluator, candidates_from, finsql_calls
from .hardness import hardness, route
from .llm import call_models, call_models_during
from .repair import repair_loop
from .rewriting import needs_rewrite, rewrite_relative_time
from .selection import apply_choice, multiple_choice_prompt, parse_choice, select
from .settings import ConfigError, Settings, get_models, get_settings
from .types import Candidate, LLMReply, ModelConfig


from .errors import QuestionError  # noqa: E402  (re-exported)


def validate_question(question: str | None, max_chars: int) -> str:
    """The stripped question; raises QuestionError for null, empty/whitespace, NUL bytes or more
    than ``max_chars`` characters, saying what to change."""
    if question is None:
        raise QuestionError("nl2sql: the question is NULL; pass a question as text")
    q = question.strip()
    if not q:
        raise QuestionError("nl2sql: the question is empty; ask something about the data, "
                            "e.g. SELECT nl2sql('How many singers do we have?')")
    if "\x00" in q:
        raise QuestionError("nl2sql: the question contains a NUL byte")
    if len(q) > max_chars:
        raise QuestionError(
            f"nl2sql: the question is {len(q)} characters long, over the limit of {max_chars}; "
            f"shorten it or raise it with SELECT nl2sql.set_setting('question_max_chars', '...')")
    return q


def _reply_json(r: LLMReply) -> dict[str, Any]:
    return {"model": r.model, "error": r.error, "latency_ms": round(r.latency_ms, 1),
            "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
            "text": r.text}


def answer(plpy, question: str, search_path: str, evidence: str | None = None) -> dict[str, Any]:
    """Run the pipeline for one question; returns the trace (a JSON-able dict) whose ``sql`` is
    the chosen query (None with ``error`` set when no candidate executed).

    Raises QuestionError (bad question), settings.ConfigError (no model), RuntimeError (nothing
    indexed). Model failures are recorded in the trace; when every model failed, ``error`` says
    so. Timings in milliseconds: ``llm_wait_ms`` is time spent waiting on models,
    ``overhead_ms`` = total − llm_wait (in-database work).
    """
    t_start = time.perf_counter()
    timings: dict[str, float] = {}

    def lap(name: str, t0: float) -> float:
        timings[name] = round((time.perf_counter() - t0) * 1000, 3)
        return time.perf_counter()

    st = get_settings(plpy)
    q = validate_question(question, st.question_max_chars)
    models = get_models(plpy, st)
    trace: dict[str, Any] = {"question": q, "evidence": evidence, "search_path": search_path,
                             "models": [m.name for m in models]}
    t = time.perf_counter()
    q_prompt = rewrite_question(plpy, q, st, trace)  # ReBoost query rewriting (relative time)
    path = catalog.parse_search_path(plpy, search_path)
    schema = catalog.load_schema(plpy, path, st.sample_values)
    trace["values_withheld"] = safety.withheld_value_columns(schema)
    t = lap("schema_ms", t)

    ctx = context.retrieve_context(plpy, q_prompt, evidence, schema, st)
    k = st.k_examples
    variants = st.prompt_variants
    n_values = st.sample_values
    trace["examples"] = [e.__dict__ for e in ctx.candidates[:k]]
    t = lap("retrieval_ms", t)

    # PreSQL: the first model, full (or budget-pruned) schema, reference-enhanced prompt.
    pre_prompt, _pre_schema, pruning = context.presql_prompt(plpy, ctx, schema, st)
    trace["pruning"] = pruning
    timings.update(ctx.timings)
    t = lap("prompt_ms", t)
    timings["prompt_ms"] = round(timings["prompt_ms"] - ctx.timings.get("columns_ms", 0.0), 3)
    waits: dict[str, float] = {}  # time waiting on models, per stage (ms)
    overlapped: dict[str, float] = {}  # work done while models were out, per item (ms)

    def on_wait() -> None:
        plpy.execute("SELECT 1")  # lets a pg_cancel_backend (Ctrl-C) interrupt the wait

    def presql_work() -> None:
        # vector value matches and question/column similarity are needed only after PreSQL
        # (schema linking, DAIL selection, FinSQL, value alignment)
        for key, ms in (("vector_values_ms", context.add_vector_values(plpy, ctx, schema, st)),
                        ("columns_ms", context.add_columns(plpy, ctx, schema))):
            if ms:
                overlapped[key] = ms

    tw = time.perf_counter()
    rnd = call_models_during([(models[0], prompts.messages(pre_prompt))], presql_work, on_wait,
                             safety.statement_remaining_s(plpy))
    pre_reply = rnd.replies[0]
    waits["presql"] = rnd.wait_ms
    timings["presql_round_ms"] = round((time.perf_counter() - tw) * 1000 - rnd.wait_ms, 3)
    trace.update(context.context_trace(ctx))
    if ctx.remasked:
        trace["examples_after_vector_values"] = [e.__dict__ for e in ctx.candidates[:k]]
    t = time.perf_counter()
    pre_clean = clean(pre_reply.text, models[0].dialect) if pre_reply.text else None
    presql = pre_clean.sql if pre_clean else None
    trace["presql"] = {"prompt": pre_prompt, "reply": _reply_json(pre_reply), "sql": presql,
                       "cleaning": pre_clean.steps if pre_clean else []}

    # Schema linking and DAIL selection (issue 3's context stages).
    linked, selection = context.finsql_context(ctx, schema, presql, st)
    trace.update(context.linking_trace(linked, selection))

    # PET-SQL fine-grained voting: PreSQL's hardness picks the FinSQL writers/voters.
    level = hardness(presql) if presql else None
    voters, why = route(level, st.hardness_voters, [m.name for m in models])
    fin_models = [m for m in models if m.name in voters]
    trace["hardness"] = {"presql": level, "voters": voters, "reason": why}

    # FinSQL: routed models × prompt variants × samples, linked schema only, concurrently.
    fin_schema = schema.subset(set(linked.tables)) if linked.tables else schema
    chosen = {e.id for e in selection.examples}
    pool = list(selection.examples) + [e for e in ctx.candidates if e.id not in chosen][:k]
    calls = finsql_calls(fin_models, q_prompt, fin_schema, pool, k, n_values, evidence,
                         variants=variants, samples=st.samples_per_model,
                         sample_temperature=st.sample_temperature,
                         values=context.value_triples(schema, ctx.values,
                                                      {tb.name for tb in fin_schema.tables}))
    # The PreSQL as a candidate: checked, aligned and executed while the FinSQL calls are out.
    # Without presql_votes it does not vote, but a FinSQL answer with the same text (a writer
    # often repeats its PreSQL) then reuses its outcome instead of running again.
    pc = Candidate(source=f"presql:{pre_reply.model}", model=pre_reply.model,
                   raw_text=pre_reply.text, prompt=pre_prompt)
    if pre_reply.error or not pre_reply.text:
        pc.status, pc.reason = "refused", f"no answer: {pre_reply.error or 'empty'}"
    index = None
    if st.value_alignment:
        index = ValueIndex(plpy, st.values_per_column, st.value_max_chars,
                           st.align_min_trigram, st.align_min_cosine)
    ev = Evaluator(plpy=plpy, schema=schema, search_path=search_path,
                   timeout_ms=st.candidate_timeout_ms, max_rows=st.max_rows,
                   dialects={m.name: m.dialect for m in models}, values=index)

    def finsql_work() -> None:
        if pc.status == "pending":
            ev.reset_ms()
            ev.run(pc, pc.raw_text)
            overlapped["presql_candidate_ms"] = round(sum(ev.ms.values()), 3)

    # FinSQL answers are evaluated as they arrive while other models are still out (their time
    # is overlapped); what arrives last is evaluated after the round.
    early: dict[int, list[Candidate]] = {}

    def on_reply(i: int, reply: LLMReply, still_out: int) -> None:
        if not still_out:
            return
        tr = time.perf_counter()
        ev.reset_ms()
        early[i] = candidates_from([calls[i]], [reply])
        for c in early[i]:
            if c.status == "pending":
                ev.run(c, c.raw_text)
        overlapped["finsql_candidates_ms"] = round(
            overlapped.get("finsql_candidates_ms", 0.0) + (time.perf_counter() - tr) * 1000, 3)

    t = lap("finsql_prompt_ms", t)
    tw = time.perf_counter()
    rnd = call_models_during([c.as_call() for c in calls], finsql_work, on_wait,
                             safety.statement_remaining_s(plpy), on_reply)
    fin_replies = rnd.replies
    waits["finsql"] = rnd.wait_ms
    timings["finsql_round_ms"] = round((time.perf_counter() - tw) * 1000 - rnd.wait_ms, 3)
    t = time.perf_counter()
    trace["finsql"] = {"prompt": calls[0].prompt if calls else None,
                       "prompts": [c.prompt for c in calls if c.variant > 0 and c.model is fin_models[0]],
                       "replies": [_reply_json(r) for r in fin_replies]}

    # Candidates: every FinSQL sample (in call order), and the PreSQL (already evaluated).
    ev.reset_ms()  # what runs after the round
    cands = []
    for i, (call, reply) in enumerate(zip(calls, fin_replies)):
        if i not in early:
            for c in candidates_from([call], [reply]):
                if c.status == "pending":
                    ev.run(c, c.raw_text)
                cands.append(c)
        else:
            cands.extend(early[i])
    if st.presql_votes:
        cands.append(pc)
    t = lap("execute_ms", t)
    timings.update({k: round(v, 3) for k, v in ev.ms.items()})

    # Repair (ReBoost / OpenSearch-SQL): failing or empty candidates, at most 3 rounds.
    rep = repair_loop(cands, {m.name: m for m in models}, lambda c: c.prompt or pre_prompt, ev,
                      [v.to_json() for v in ctx.values], st.repair_rounds, on_wait,
                      lambda: safety.statement_remaining_s(plpy))
    waits["repair"] = rep["llm_wait_ms"]
    trace["repair"] = rep
    t = lap("repair_ms", t)
    timings["repair_ms"] = round(timings["repair_ms"] - rep["llm_wait_ms"], 3)

    # Selection (MCS-SQL): filter, confidence threshold, majority; optional multiple choice.
    v = select(cands, st.confidence_threshold, st.tie_break,
               [m.name for m in models])
    mc_replies: list[LLMReply] = []
    if st.selection == "multiple_choice" and len(v.groups) > 1:
        mc_model = pick_selection_model(models, st.selection_model)
        rows = {c.result_hash: c.sample_rows for c in cands if c.status == "ok"}
        mc_prompt = multiple_choice_prompt(q_prompt, v.groups, prompts.render_schema(fin_schema, n_values),
                                           rows, evidence)
        t = lap("vote_ms", t)
        tw = time.perf_counter()
        mc_replies = call_models([(mc_model, prompts.messages(mc_prompt))], on_wait,
                                 safety.statement_remaining_s(plpy))
        waits["multiple_choice"] = (time.perf_counter() - tw) * 1000
        t = time.perf_counter()
        choice = parse_choice(mc_replies[0].text, len(v.groups))
        v = apply_choice(v, choice, mc_model.name, mc_replies[0].text or mc_replies[0].error)
        trace["multiple_choice"] = {"model": mc_model.name, "prompt": mc_prompt,
                                    "reply": _reply_json(mc_replies[0]), "choice": choice}
    timings["vote_ms"] = round(timings.get("vote_ms", 0.0) + (time.perf_counter() - t) * 1000, 3)
    t = time.perf_counter()

    trace["candidates"] = [c.to_json() for c in cands]
    trace["vote"] = {"sql": v.sql, "confidence": v.confidence, "reason": v.reason,
                     "method": v.method, "groups": v.groups, "dropped": v.dropped}
    trace["sql"] = v.sql
    trace["confidence"] = v.confidence
    all_replies = [pre_reply, *fin_replies, *mc_replies]
    trace["tokens"] = {
        "prompt": sum(r.prompt_tokens for r in all_replies) + rep["prompt_tokens"],
        "completion": sum(r.completion_tokens for r in all_replies) + rep["completion_tokens"],
    }
    if v.sql is None:
        if all(r.error for r in [pre_reply, *fin_replies]):
            trace["error"] = ("nl2sql: every model failed: "
                              + "; ".join(sorted({r.error for r in all_replies if r.error})))
        else:
            reasons = "; ".join(f"{c.source}: {c.reason}" for c in cands)
            trace["error"] = f"nl2sql: no candidate executed successfully ({reasons})"
    timings["trace_ms"] = round((time.perf_counter() - t) * 1000, 3)
    total = (time.perf_counter() - t_start) * 1000
    wait_ms = sum(waits.values())
    trace["llm_waits_ms"] = {k: round(v, 3) for k, v in waits.items()}
    trace["overlapped_ms"] = overlapped
    timings["llm_wait_ms"] = round(wait_ms, 3)
    timings["total_ms"] = round(total, 3)
    timings["overhead_ms"] = round(total - wait_ms, 3)
    trace["timings"] = timings
    return trace


def rewrite_question(plpy, q: str, st: Settings, trace: dict[str, Any]) -> str:
    """The question as the prompts show it: relative time made explicit from the database's
    ``now()`` when setting ``rewrite_time`` is on (ReBoost §3.1; see rewriting.py). Records
    ``trace["rewriting"]`` when something was rewritten."""
    if not st.rewrite_time or not needs_rewrite(q):
        return q
    today = plpy.execute("SELECT (pg_catalog.now())::date::text AS d")[0]["d"]
    rw = rewrite_relative_time(q, date.fromisoformat(today))
    if rw.rewrites:
        trace["rewriting"] = {"original": q, "rewritten": rw.question, "today": rw.today,
                              "rewrites": [r.__dict__ for r in rw.rewrites]}
    return rw.question


def pick_selection_model(models: list[ModelConfig], name: str) -> ModelConfig:
    """The model for multiple-choice selection: setting ``selection_model``, or the PreSQL
    writer when empty. Raises ConfigError when the named model is not enabled."""
    if not name:
        return models[0]
    for m in models:
        if m.name == name:
            return m
    raise ConfigError(f"nl2sql: setting 'selection_model' names {name!r}, which is not an "
                      f"enabled model ({', '.join(m.name for m in models)}); fix it with "
                      f"SELECT nl2sql.set_setting('selection_model', '<name>') or '' for the "
                      f"PreSQL writer")


def log_trace(plpy, trace: dict[str, Any]) -> int | None:
    """Insert the trace into ``nl2sql.query_log`` (through ``safety.log_query``); returns its id,
    or None on a server in recovery (read replica), where nothing is written."""
    return safety.log_query(plpy, trace)
