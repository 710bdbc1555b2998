"""One call of ``nl2sql(question)``: PET-SQL's two stages with cross-consistency voting.

question → value retrieval, mask & embed, top-k examples (masked-question cosine), column
similarity (context.py) → PreSQL (first model, reference-enhanced prompt over the indexed
schema, pruned to the token budget when too large) → schema linking (PreSQL ∪ matched values ∪
similar columns ∪ FK bridges) and DAIL example selection → FinSQL (every model, concurrently,
prompt with the linked tables only) → check → execute
(read-only, time-limited) → vote (largest result group; tie → fastest) → log.

Sources: PET-SQL (Li et al. 2024) §3.1–3.4; DAIL-SQL (Gao et al. 2023) §3.3–3.4.
"""
from __future__ import annotations

import time
from typing import Any

from . import catalog, context, prompts, safety
from .execute import run_candidate
from .llm import call_models
from .settings import get_models, get_settings
from .sqlcheck import CandidateRefused, clean_model_output, referenced_tables, to_sql
from .types import Candidate, LLMReply
from .vote import vote


class QuestionError(ValueError):
    """The question itself cannot be answered as given (empty, too long, not text)."""


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
    q = validate_question(question, int(st["question_max_chars"]))
    models = get_models(plpy)
    trace: dict[str, Any] = {"question": q, "evidence": evidence, "search_path": search_path,
                             "models": [m.name for m in models],
                             "values_withheld": safety.withheld_value_columns(plpy)}
    t = time.perf_counter()
    path = catalog.parse_search_path(plpy, search_path)
    schema = catalog.load_schema(plpy, path, int(st["sample_values"]))
    t = lap("schema_ms", t)

    ctx = context.retrieve_context(plpy, q, evidence, schema, st)
    trace.update(context.context_trace(ctx))
    trace["examples"] = [e.__dict__ for e in ctx.candidates[:int(st["k_examples"])]]
    t = lap("retrieval_ms", t)

    # PreSQL: the first model, full (or budget-pruned) schema, reference-enhanced prompt.
    pre_prompt, _pre_schema, pruning = context.presql_prompt(ctx, schema, st)
    trace["pruning"] = pruning
    t = lap("prompt_ms", t)
    wait_ms = 0.0

    def on_wait() -> None:
        plpy.execute("SELECT 1")  # lets a pg_cancel_backend (Ctrl-C) interrupt the wait

    tw = time.perf_counter()
    pre_reply = call_models([(models[0], prompts.messages(pre_prompt))], on_wait,
                            safety.statement_remaining_s(plpy))[0]
    wait_ms += (time.perf_counter() - tw) * 1000
    presql = clean_model_output(pre_reply.text) if pre_reply.text else None
    trace["presql"] = {"prompt": pre_prompt, "reply": _reply_json(pre_reply), "sql": presql}

    # Schema linking and DAIL selection, then FinSQL: every model, linked schema, concurrently.
    linked, selection = context.finsql_context(ctx, schema, presql, st)
    trace.update(context.linking_trace(linked, selection))
    fin_prompt, _fin_schema = context.finsql_prompt(ctx, schema, linked, selection, st)
    t = time.perf_counter()
    fin_replies = call_models([(m, prompts.messages(fin_prompt)) for m in models], on_wait,
                              safety.statement_remaining_s(plpy))
    wait_ms += (time.perf_counter() - t) * 1000
    trace["finsql"] = {"prompt": fin_prompt, "replies": [_reply_json(r) for r in fin_replies]}
    t = time.perf_counter()

    # Candidates: every FinSQL, and the PreSQL.
    cands: list[Candidate] = []
    for r in fin_replies:
        cands.append(Candidate(source=f"finsql:{r.model}", model=r.model, raw_text=r.text))
    if st["presql_votes"] == "on":
        cands.append(Candidate(source=f"presql:{pre_reply.model}", model=pre_reply.model,
                               raw_text=pre_reply.text))
    replies = {f"finsql:{r.model}": r for r in fin_replies}
    replies[f"presql:{pre_reply.model}"] = pre_reply
    timeout_ms = int(st["candidate_timeout_ms"])
    max_rows = int(st["max_rows"])
    for c in cands:
        rep = replies[c.source]
        if rep.error or not c.raw_text:
            c.status, c.reason = "refused", f"no answer: {rep.error or 'empty'}"
            continue
        try:
            tree = safety.check_candidate_in_db(plpy, clean_model_output(c.raw_text), schema)
        except CandidateRefused as e:
            c.status, c.reason = "refused", str(e)
            continue
        c.sql = to_sql(tree)
        c.tables = referenced_tables(tree)
        run_candidate(plpy, c, search_path, timeout_ms, max_rows)
    t = lap("execute_ms", t)
    v = vote(cands)
    t = lap("vote_ms", t)

    trace["candidates"] = [c.to_json() for c in cands]
    trace["vote"] = {"sql": v.sql, "confidence": v.confidence, "reason": v.reason,
                     "groups": v.groups}
    trace["sql"] = v.sql
    trace["confidence"] = v.confidence
    all_replies = [pre_reply, *fin_replies]
    trace["tokens"] = {
        "prompt": sum(r.prompt_tokens for r in all_replies),
        "completion": sum(r.completion_tokens for r in all_replies),
    }
    if v.sql is None:
        if all(r.error for r in all_replies):
            trace["error"] = ("nl2sql: every model failed: "
                              + "; ".join(sorted({r.error for r in all_replies if r.error})))
        else:
            reasons = "; ".join(f"{c.source}: {c.reason}" for c in cands)
            trace["error"] = f"nl2sql: no candidate executed successfully ({reasons})"
    total = (time.perf_counter() - t_start) * 1000
    timings["llm_wait_ms"] = round(wait_ms, 3)
    timings["total_ms"] = round(total, 3)
    timings["overhead_ms"] = round(total - wait_ms, 3)
    trace["timings"] = timings
    return trace


def log_trace(plpy, trace: dict[str, Any]) -> int | None:
    """Insert the trace into ``nl2sql.query_log`` (through ``safety.log_query``); returns its id,
    or None on a server in recovery (read replica), where nothing is written."""
    return safety.log_query(plpy, trace)
