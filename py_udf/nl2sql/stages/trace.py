"""The trace, rendered once from the run object: ``render``, ``render_retrieval``, the gated
candidates, ``record_embedder``."""

from __future__ import annotations

from typing import Any

from ..core.types import Candidate, LLMReply, Status
from ..embedding import client as embed_client
from ..embedding import encode as embed_encode
from ..embedding import value_vectors
from ..model.gate import Gate
from .gather import Context
from .run import Linking, Run, Selected


def record_embedder(run: Run) -> None:
    """Note what served the call's embeddings and which model (the trace's ``embedder``).

    Args:
        run: sets ``embedder``.
    """
    run.embedder = {
        **embed_client.report(),
        "model": embed_encode.current_model(),
        "values": value_vectors.current() or embed_encode.current_model(),
    }


def gated_candidate(gate: Gate, c: Candidate) -> dict[str, Any]:
    """A candidate as the trace keeps it: errors and rows through the gate's rules.

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


def without_nul(value: Any) -> Any:
    """``value`` with every NUL (U+0000) in its strings replaced by U+FFFD.

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


def _reply(r: LLMReply) -> dict[str, Any]:
    return {
        "model": r.model,
        "error": r.error,
        "latency_ms": round(r.latency_ms, 1),
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": r.completion_tokens,
        "tokens_source": r.tokens_source,
        "cost_usd": r.cost_usd,
        "reasoning_tokens": r.reasoning_tokens,
        "request": r.request,
        "learned": r.learned,
        "text": r.text,
    }


def _retrieval_part(ctx: Context) -> dict[str, Any]:
    """``masked_question``, ``values`` and, once computed, the 10 most similar columns."""
    out: dict[str, Any] = {
        "masked_question": ctx.masked_question,
        "values": [v.to_json() for v in ctx.values],
    }
    if ctx.column_sims is not None:
        out["columns_similar"] = [list(c) for c in ctx.column_sims[:10]]
    return out


def _linking_part(link: Linking) -> dict[str, Any]:
    """``linked_tables``, ``linked_columns``, ``linking`` (why, how) and ``selection`` (after
    a PreSQL: ``link.linked`` and ``link.selection`` set)."""
    linked, sel = link.linked, link.selection
    return {
        "linked_tables": linked.tables,
        "linked_columns": linked.columns,
        "linking": {
            "why": linked.why,
            "how": "linked" if linked.tables else "full schema (nothing linked)",
        },
        "selection": {
            "how": sel.how,
            "passed_tau": sel.passed,
            "tau": sel.tau,
            "examples": [e.__dict__ for e in link.examples_shown],
        },
    }


def _question_part(run: Run) -> dict[str, Any]:
    """The call's inputs: question, evidence, search_path, models, conversation, evaluation,
    rewriting."""
    out: dict[str, Any] = {
        "question": run.question,
        "evidence": run.evidence,
        "search_path": run.search_path,
        "models": [m.name for m in run.models],
    }
    if run.conversation is not None:
        turns = run.turns_shown if run.turns_shown is not None else run.turns
        out["conversation"] = run.conversation
        out["turns"] = [t.__dict__ for t in turns]
    if (lo := run.leave_out) is not None:
        out["evaluation_run"] = lo.run_id
        out["evaluation"] = {
            "run": lo.run_id,
            "verified_query": lo.verified_id,
            "fast_path": "bypassed",
            "left_out": "this verified query and examples of the same question or SQL",
        }
    if (rw := run.rewriting) is not None:
        out["rewriting"] = {
            "original": run.question,
            "rewritten": rw.question,
            "today": rw.today,
            "rewrites": [r.__dict__ for r in rw.rewrites],
        }
    return out


def _models_part(run: Run) -> dict[str, Any]:
    """``presql``, linking and ``hardness``, ``finsql`` and ``repair``: what the models did."""
    out: dict[str, Any] = {}
    pre, link = run.presql, run.linking
    if pre is not None and pre.reply is not None:
        out["presql"] = {
            "prompt": pre.prompt,
            "reply": _reply(pre.reply),
            "sql": pre.sql,
            "cleaning": pre.cleaning,
        }
        if pre.refused is not None:
            out["presql"]["refused"] = pre.refused
    if run.rounds is not None:
        out["rounds"] = run.rounds.n
        out["rounds_reason"] = run.rounds.reason
    if link is not None:
        if link.linked is not None:  # none in one round
            out.update(_linking_part(link))
        out["hardness"] = {"presql": link.level, "voters": link.voters, "reason": link.why}
    if run.plan is not None:
        calls = run.plan.calls
        out["finsql"] = {
            "prompt": calls[0].prompt if calls else None,
            "prompts": [c.prompt for c in calls if c.variant > 0 and c.model is link.models[0]],
            "replies": [_reply(r) for r in run.finsql_replies],
        }
    if run.repair is not None:
        out["repair"] = run.repair
    if run.last_resort is not None:
        out["last_resort"] = {"prompt": run.last_resort[0], "reply": _reply(run.last_resort[1])}
    return out


def _model_choice(sel: Selected) -> dict[str, Any]:
    """``multiple_choice`` and ``judge``: what a model asked after the vote chose, when one was."""
    out: dict[str, Any] = {}
    if (mc := sel.choice) is not None:
        out["multiple_choice"] = {
            "model": mc.model,
            "prompt": mc.prompt,
            "reply": _reply(mc.reply),
            "choice": mc.choice,
        }
    if sel.judge is not None:
        out["judge"] = sel.judge.to_json()
    return out


def _choice_part(run: Run) -> dict[str, Any]:
    """``reliability``, ``multiple_choice``, ``judge``, and the outcome: ``candidates``, ``vote``,
    ``sql``, ``confidence``, ``tokens``, ``error``, ``abstained``."""
    out: dict[str, Any] = {}
    if (sel := run.selected) is not None:
        w = sel.weights
        out["reliability"] = {
            "used": w is not None,
            "level": run.linking.level,
            "weights": w,
            "why": (
                "weights learned by nl2sql.calibrate()"
                if w is not None
                else "reliability_vote is off"
                if not run.st.reliability_vote
                else "nothing calibrated, or calibration kept the plain majority"
            ),
        }
        out.update(_model_choice(sel))
    if (o := run.outcome) is not None:
        v = o.vote
        out["candidates"] = o.candidates_shown
        out["vote"] = {
            "sql": v.sql,
            "confidence": v.confidence,
            "reason": v.reason,
            "method": v.method,
            "groups": v.groups,
            "dropped": v.dropped,
            "set_aside": v.set_aside,
        }
        out.update(sql=o.sql, confidence=o.confidence, tokens=o.tokens)
        if o.error is not None:
            out["error"] = o.error
        if o.abstained is not None:
            out["abstained"] = o.abstained
    return out


def render(run: Run) -> dict[str, Any]:
    """Render the trace of ``answer``/``explain`` from the run (timings finished now).

    Args:
        run: the run, after the stages.

    Returns:
        The JSON-able trace, NUL-free (``without_nul``); keys as docs/internals/pipeline.md
        lists them.
    """
    ctx = run.context
    trace = _question_part(run)
    trace["values_withheld"] = run.values_withheld
    trace["values_partial"] = run.values_partial
    trace["examples"] = [e.__dict__ for e in run.examples_shown]
    trace["business_context"] = ctx.business.to_json()
    trace["semantic_model"] = ctx.semantic.to_json()
    if run.fast_path_skipped is not None:
        trace["verified_query"] = {"considered": [], "skipped": run.fast_path_skipped}
    elif run.fast_path is not None:
        trace["verified_query"] = run.fast_path.trace()
    if run.presql is not None:
        trace["pruning"] = run.presql.pruning
        if (after := run.presql.examples_after_vector_values) is not None:
            trace["examples_after_vector_values"] = [e.__dict__ for e in after]
    trace.update(_retrieval_part(ctx))
    trace.update(_models_part(run))
    trace.update(_choice_part(run))
    if run.embedder is not None:
        trace["embedder"] = run.embedder
    run.timer.finish(trace)
    return without_nul(trace)


def render_retrieval(run: Run) -> dict[str, Any]:
    """Render what ``retrieve`` returns from the run (its stages before the first model call).

    Args:
        run: the run, after ``retrieve``'s stages.

    Returns:
        ``question``, ``evidence``, ``masked_question``, ``values``, ``columns_similar``,
        ``examples``, ``presql_prompt``, ``presql_tables``, ``pruning``,
        ``business_context``, ``semantic_model``, ``verified``; with a given PreSQL also ``linked_tables``,
        ``linked_columns``, ``linking``, ``selection``, ``finsql_prompt``; then
        ``values_withheld`` and ``timings`` (milliseconds).
    """
    ctx, pre, timings = run.context, run.presql, run.timer.timings
    out: dict[str, Any] = {
        "question": run.question,
        "evidence": run.evidence,
        **_retrieval_part(ctx),
        "examples": [e.__dict__ for e in run.examples_shown],
        "presql_prompt": pre.prompt,
        "presql_tables": ctx.presql_schema.table_names(),
        "pruning": pre.pruning,
        "business_context": ctx.business.to_json(),
        "semantic_model": ctx.semantic.to_json(),
        "verified": [
            {"id": r.id, "kind": r.kind, "question": r.question, "similarity": r.similarity}
            for r in ctx.verified_rows
        ],
    }
    if run.linking is not None:
        out.update(_linking_part(run.linking))
        out["finsql_prompt"] = run.finsql_prompt
    out["values_withheld"] = run.gate.report()
    prompt_ms = timings["prompt_ms"]
    out["timings"] = {
        "schema_ms": round(timings["schema_ms"], 3),
        **ctx.timings,
        "prompt_ms": round(prompt_ms, 3),
        "retrieval_ms": round(sum(ctx.timings.values()) + prompt_ms, 3),
    }
    return out
