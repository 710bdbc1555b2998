"""Evaluation on the user's own questions: ``nl2sql.evaluate()`` (docs/internals/curated.md
"Evaluation"). Source: execution accuracy (EX) of Spider (Yu et al. 2018) and BIRD (2023)."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Any

from .core import spi
from .core.errors import ConfigError, EmbeddingError, EvaluationError, Nl2sqlError
from .core.redaction import configured_secrets, redact, redact_obj
from .core.settings import get_settings
from .core.types import Status
from .curated.scoring import (
    Judged,
    chosen_hash,
    classify_outcome,
    classify_rows,
    model_rightness,
    summarize,
)
from .generation.db_checks import statement_remaining_s
from .generation.execute import fetch_rows, is_cancel, row_from_json
from .model.config import get_models
from .pipeline import LeaveOut, explain, log_trace
from .selection.reliability import judge_candidates, run_verified

# the message when the caller may use no verified query
NO_QUESTIONS = (
    "nl2sql.evaluate: there is no verified query to evaluate (none the calling role "
    "may use: every table it reads must be readable by the role; templates are not "
    "evaluated)"
)
NO_QUESTIONS_HINT = (
    "add question/SQL pairs with nl2sql.add_verified_query(question, sql), or "
    "judge logged answers with nl2sql.feedback(log_id, true)"
)


def _verified_questions(plpy, max_questions: int | None) -> list[dict[str, Any]]:
    """``{"id", "question", "sql"}`` of the verified queries (not templates) the role may
    use, oldest first, at most ``max_questions``; EvaluationError for a bad limit or none.
    """
    if max_questions is not None and max_questions < 1:
        raise EvaluationError(
            f"nl2sql.evaluate: max_questions must be at least 1, not "
            f"{max_questions} (NULL evaluates every verified query)"
        )
    rows = spi.query(
        plpy,
        "SELECT id, question, sql FROM nl2sql.visible_verified_query "
        "WHERE kind = 'query' ORDER BY id LIMIT $1",
        [max_questions],
        ["int4"],
    )
    if not rows:
        raise EvaluationError(NO_QUESTIONS)
    return [dict(r) for r in rows]


def _start_run(plpy, st, models, note: str | None) -> int:
    """Record a new run with the settings and the enabled models; returns its id."""
    snap = [
        {
            "name": m.name,
            "model": m.model,
            "base_url": m.base_url,
            "dialect": m.dialect,
            "temperature": m.temperature,
            "max_tokens": m.max_tokens,
        }
        for m in models
    ]
    return spi.query(
        plpy,
        "INSERT INTO nl2sql.evaluation_run (role_name, note, settings, models) "
        "VALUES (current_user, $1, $2::jsonb, $3::jsonb) RETURNING id",
        [note, json.dumps(asdict(st), default=str), json.dumps(snap)],
        ["text", "text", "text"],
    )[0]["id"]


def _store_result(plpy, run_id: int, r: Judged) -> None:
    """Insert one question's outcome into ``nl2sql.evaluation_result``."""
    spi.query(
        plpy,
        "INSERT INTO nl2sql.evaluation_result (run_id, verified_query_id, question, "
        'expected_sql, chosen_sql, "right", category, detail, per_model, candidates, '
        "level, log_id, ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, "
        "$10::jsonb, $11, $12, $13)",
        [
            run_id,
            r.verified_query_id,
            r.question,
            r.expected_sql,
            r.chosen_sql,
            r.right,
            r.category,
            r.detail,
            json.dumps(r.per_model),
            json.dumps(r.candidates),
            r.level,
            r.log_id,
            round(r.ms, 1),
        ],
        [
            "int8",
            "int8",
            "text",
            "text",
            "text",
            "bool",
            "text",
            "text",
            "text",
            "text",
            "text",
            "int8",
            "float8",
        ],
    )


def _finish_run(plpy, run_id: int, totals: dict[str, Any], stopped: str | None) -> None:
    """Write a run's totals (``summarize``), why it ``stopped`` early (or None) and its end."""
    spi.query(
        plpy,
        "UPDATE nl2sql.evaluation_run SET finished_at = now(), questions = $2, "
        'judged = $3, "right" = $4, ex = $5, per_model = $6::jsonb, '
        "categories = $7::jsonb, stopped = $8 WHERE id = $1",
        [
            run_id,
            totals["questions"],
            totals["judged"],
            totals["right"],
            totals["ex"],
            json.dumps(totals["per_model"]),
            json.dumps(totals["categories"]),
            stopped,
        ],
        ["int8", "int4", "int4", "int4", "float8", "text", "text", "text"],
    )


def _ask(
    plpy, run_id: int, vq: dict[str, Any], search_path: str
) -> tuple[dict[str, Any] | None, str | None]:
    """Ask one verified question through the pipeline (fast path bypassed, left out of its own
    examples) and log the call. Returns (the redacted trace with ``log_id``, None), or (None, the
    redacted error); ConfigError and EmbeddingError, which would fail every question, propagate.
    """
    secrets = configured_secrets(plpy)
    try:
        trace = explain(
            plpy,
            vq["question"],
            search_path,
            leave_out=LeaveOut(vq["id"], vq["question"], vq["sql"], run_id),
        )
    except (ConfigError, EmbeddingError):
        raise
    except (Nl2sqlError, RuntimeError) as e:
        return None, redact(str(e), secrets)
    trace = redact_obj(trace, secrets)
    trace["log_id"] = log_trace(plpy, trace)
    return trace, None


def _rows_of(plpy, sql: str, search_path: str, st) -> list[tuple]:
    """A checked query's rows, fetched read-only under the candidate limits, as value tuples
    (``vote.row_from_json``); plpy.SPIError or Nl2sqlError when it fails.
    """
    return [
        row_from_json(t)
        for t in fetch_rows(
            plpy, sql, search_path, st.candidate_timeout_ms, st.max_rows, st.max_result_bytes
        )
    ]


def _judge(plpy, run_id: int, vq: dict[str, Any], search_path: str, st) -> Judged:
    """Evaluate one verified question: gold rows, the pipeline's answer, rightness per model,
    the miss's category (``Judged``).
    """
    t0 = time.perf_counter()
    out = Judged(vq["id"], vq["question"], vq["sql"])
    gold = run_verified(
        plpy, vq["sql"], search_path, st.candidate_timeout_ms, st.max_rows, st.max_result_bytes
    )
    if gold.status != Status.OK:
        out.detail = f"not judged: the verified SQL {gold.status}: {str(gold.reason)[:300]}"
        out.ms = (time.perf_counter() - t0) * 1000
        return out
    trace, error = _ask(plpy, run_id, vq, search_path)
    if trace is not None:
        out.chosen_sql, out.log_id = trace.get("sql"), trace.get("log_id")
        out.level = (trace.get("hardness") or {}).get("presql")
        out.per_model = model_rightness(trace, gold.result_hash)
        out.candidates = judge_candidates(trace.get("candidates"), gold.result_hash)
    out.right = trace is not None and chosen_hash(trace) == gold.result_hash
    if not out.right:
        out.category, out.detail = _classify_miss(plpy, trace, error, vq, search_path, st)
    out.ms = (time.perf_counter() - t0) * 1000
    return out


def _classify_miss(
    plpy, trace: dict[str, Any] | None, error: str | None, vq: dict[str, Any], search_path: str, st
) -> tuple[str, str]:
    """(category, detail) of a miss: the call's outcome, else the chosen rows against the
    verified rows; a cancel well within the candidate time limit is the user's and is raised.
    """
    found = classify_outcome(trace, error)
    if found is not None:
        return found
    t0 = time.perf_counter()
    try:
        got = _rows_of(plpy, trace["sql"], search_path, st)
        gold = _rows_of(plpy, vq["sql"], search_path, st)
    except Nl2sqlError as e:
        return "ERROR", f"fetching the rows failed: {str(e)[:300]}"
    except plpy.SPIError as e:
        if is_cancel(e) and (time.perf_counter() - t0) * 1000 < st.candidate_timeout_ms * 0.9:
            raise  # the user's own cancel
        return "ERROR", f"fetching the rows failed: {str(e).splitlines()[0][:300]}"
    category, detail = classify_rows(gold, got)
    if category is None:  # equal rows beyond the row cap, or the signature differed otherwise
        return (
            "RESULT_MISMATCH",
            "the rows fetched are equal, but the results differ (beyond max_rows)",
        )
    return category, detail


def _time_left(plpy, slowest_s: float) -> str | None:
    """None when the next question fits in the remaining ``statement_timeout`` (longer than the
    slowest so far, or no limit), else why not.
    """
    left = statement_remaining_s(plpy)
    if left is None or left > max(slowest_s, 0.0):
        return None
    return (
        f"statement_timeout leaves {max(left, 0) * 1000:.0f} ms, less than the slowest "
        f"question so far ({slowest_s * 1000:.0f} ms)"
    )


def _miss(r: Judged) -> dict[str, Any]:
    """One wrong answer as ``evaluate``'s ``misses`` lists it."""
    return {
        "verified_query_id": r.verified_query_id,
        "question": r.question,
        "category": r.category,
        "detail": r.detail,
        "expected_sql": r.expected_sql,
        "chosen_sql": r.chosen_sql,
        "log_id": r.log_id,
    }


def evaluate(plpy, max_questions: int | None, note: str | None, search_path: str) -> dict[str, Any]:
    """Run an evaluation: backs ``nl2sql.evaluate(max_questions, note) → jsonb``.

    Args:
        max_questions: at most this many verified queries (oldest first), or None for all.
        note: a note kept with the run (e.g. what changed), or None.
        search_path: the caller's search_path.

    Returns:
        ``{"run_id", "questions", "judged", "right", "ex", "per_model", "categories", "misses":
        [{verified_query_id, question, category, detail, expected_sql, chosen_sql, log_id}],
        "not_judged": [...], "stopped"}``.

    Raises:
        EvaluationError: no verified query to evaluate, or a bad ``max_questions``.
        ConfigError: no model is enabled, or a setting is invalid.
        EmbeddingError: the embedding model is missing.
        plpy.SPIError: the user cancelled.
    """
    st = get_settings(plpy)
    models = get_models(plpy, st)
    todo = _verified_questions(plpy, max_questions)
    run_id = _start_run(plpy, st, models, note)
    results: list[Judged] = []
    stopped = None
    for i, vq in enumerate(todo):
        why = _time_left(plpy, max((r.ms for r in results), default=0.0) / 1000)
        if why:
            stopped = (
                f"{why}: {i} of {len(todo)} questions evaluated; raise it (SET "
                f"statement_timeout = 0) or evaluate fewer (max_questions => n)"
            )
            plpy.warning(f"nl2sql.evaluate: {stopped}")
            break
        r = _judge(plpy, run_id, vq, search_path, st)
        _store_result(plpy, run_id, r)
        results.append(r)
    totals = summarize(results)
    _finish_run(plpy, run_id, totals, stopped)
    return {
        "run_id": run_id,
        **totals,
        "misses": [_miss(r) for r in results if r.right is False],
        "not_judged": [
            {"verified_query_id": r.verified_query_id, "detail": r.detail}
            for r in results
            if r.right is None
        ],
        "stopped": stopped,
    }
