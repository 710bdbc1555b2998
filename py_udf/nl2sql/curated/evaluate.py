"""Evaluation on the user's own questions: execution accuracy (EX) on the verified queries.

``nl2sql.evaluate()`` asks every verified query's question (kind ``query``; templates have
parameters and no single right answer, so they are not evaluated) that the calling role may use
(view ``nl2sql.visible_verified_query``) through the pipeline, as that role, with two changes
that make the models, not the curated answers, measured (``pipeline.LeaveOut``): the fast path
is bypassed, and the verified query itself, and any example of the same question or SQL, is no
few-shot example (leave-one-out).

The right answer (gold) is the verified SQL executed read-only as the caller under the
candidate limits (``reliability.run_verified``, as ``nl2sql.calibrate`` executes it). A question
is **right** when the chosen SQL's result equals gold's as a multiset of rows (the result
signature every candidate gets; row order and column names are not compared). A **model** is
right on a question when its first FinSQL candidate (prompt variant 1, sample 1, after repair)
executed with gold's result; a model the hardness routing did not ask is not counted there.

A miss is classified with the deterministic reasons of Databricks Genie's benchmark assessment
(``EMPTY_RESULT``, ``RESULT_MISSING_ROWS``, ``RESULT_EXTRA_ROWS``, columns, single cell)
plus what this pipeline can also end in (``CATEGORIES``): ``classify_rows`` and
``classify_outcome`` are pure functions.

Every run and every question's outcome is kept (``nl2sql.evaluation_run``,
``nl2sql.evaluation_result``; view ``nl2sql.evaluation_trend``); ``nl2sql.calibrate()`` learns the
per-model weights from the last finished run's judged candidates
(``reliability.judged_from_evaluation``).

Source: execution accuracy (EX) of Spider (Yu et al. 2018) and BIRD (Li et al. 2023); miss
categories after Databricks Genie's benchmark assessment reasons.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from ..core import spi
from ..core.errors import ConfigError, EmbeddingError, EvaluationError, Nl2sqlError
from ..core.types import Status

# The categories of a miss, each with what it means.
CATEGORIES = {
    "EMPTY_RESULT": "the chosen SQL returned no rows; the verified SQL returns some",
    "RESULT_MISSING_ROWS": "the chosen SQL's rows are some of the verified SQL's, not all",
    "RESULT_EXTRA_ROWS": "the chosen SQL returns every row of the verified SQL, and more",
    "COLUMNS_MISMATCH": "the chosen SQL returns another number of columns",
    "SINGLE_CELL_DIFFERENCE": "both return one value, and the values differ",
    "RESULT_MISMATCH": "same columns, but rows differ both ways (wrong values or filters)",
    "ERROR": "SQL was written but none executed (database error, refused by the check, "
    "timeout), the chosen SQL failed when fetched, or the call failed",
    "NO_SQL": "no model wrote SQL (every model failed or answered without SQL)",
    "ABSTAINED": "the vote's confidence was below abstain_below: no answer was given",
}
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


@dataclass
class Judged:
    """One evaluated verified question.

    Attributes:
        verified_query_id: its id in ``nl2sql.verified_query``.
        question: the verified question.
        expected_sql: the verified SQL.
        chosen_sql: the SQL the pipeline chose, or None.
        right: whether the chosen SQL's result equals the verified SQL's; None when the
            verified SQL itself failed (not judged).
        category: the miss's category (``CATEGORIES``), None when right or not judged.
        detail: the miss (or why it was not judged) in words.
        per_model: model -> whether its first FinSQL candidate was right.
        candidates: the judged FinSQL candidates (``reliability.judge_candidates``).
        level: the PreSQL's hardness, or None.
        log_id: the call's ``nl2sql.query_log`` id, or None.
        ms: the question's wall time in milliseconds.
    """

    verified_query_id: int
    question: str
    expected_sql: str
    chosen_sql: str | None = None
    right: bool | None = None
    category: str | None = None
    detail: str | None = None
    per_model: dict[str, bool] = field(default_factory=dict)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    level: str | None = None
    log_id: int | None = None
    ms: float = 0.0


# --------------------------------------------------------------------------------------------
# pure parts
# --------------------------------------------------------------------------------------------


def classify_rows(gold: list[tuple], got: list[tuple]) -> tuple[str | None, str]:
    """Classify a chosen SQL's rows against the verified SQL's rows.

    Rows are compared as multisets of value tuples (``vote.row_from_json``'s form), as the
    result signature compares them. Source: Databricks Genie benchmark assessment reasons
    (``EMPTY_RESULT``, ``RESULT_MISSING_ROWS``, ``RESULT_EXTRA_ROWS``, column and single-cell
    differences).

    Args:
        gold: the verified SQL's rows.
        got: the chosen SQL's rows.

    Returns:
        (category or None when the results are equal, the difference in words).
    """
    g, c = Counter(map(_key, gold)), Counter(map(_key, got))
    if g == c:
        return None, "the same rows"
    if not got:
        return "EMPTY_RESULT", f"no rows where the verified SQL returns {len(gold)}"
    if not gold:
        return "RESULT_EXTRA_ROWS", f"{len(got)} rows where the verified SQL returns none"
    gw, cw = {len(r) for r in gold}, {len(r) for r in got}
    if gw != cw:
        return "COLUMNS_MISMATCH", (f"{_widths(cw)} where the verified SQL returns {_widths(gw)}")
    if not c - g:
        return "RESULT_MISSING_ROWS", (
            f"{len(got)} of the verified SQL's {len(gold)} rows ({sum((g - c).values())} missing)"
        )
    if not g - c:
        return "RESULT_EXTRA_ROWS", (
            f"every row of the verified SQL's {len(gold)}, and {sum((c - g).values())} more"
        )
    if len(gold) == len(got) == 1 and gw == {1}:
        return (
            "SINGLE_CELL_DIFFERENCE",
            f"{_cell(got[0][0])} where the verified SQL has {_cell(gold[0][0])}",
        )
    return "RESULT_MISMATCH", (
        f"{sum((g - c).values())} of the verified SQL's {len(gold)} rows "
        f"missing, {sum((c - g).values())} other rows"
    )


def _key(row: tuple) -> str:
    return json.dumps(row, default=str)


def _widths(ws: set[int]) -> str:
    return " or ".join(f"{w} column{'s' if w != 1 else ''}" for w in sorted(ws))


def _cell(v: Any) -> str:
    return json.dumps(v, default=str)[:80]


def classify_outcome(
    trace: dict[str, Any] | None, error: str | None = None
) -> tuple[str, str] | None:
    """Classify a call that chose no SQL (or failed); None when it chose one.

    Args:
        trace: the pipeline's trace, or None when the call raised.
        error: the call's error message when it raised.

    Returns:
        (``ABSTAINED`` | ``NO_SQL`` | ``ERROR``, the reason in words), or None when the trace
        has a chosen SQL (compare its rows with ``classify_rows``).
    """
    if trace is None:
        return "ERROR", (error or "the call failed")[:500]
    if trace.get("sql"):
        return None
    if trace.get("abstained"):
        return "ABSTAINED", (trace.get("error") or "abstained")[:500]
    if not any(c.get("sql") for c in trace.get("candidates") or []):
        return "NO_SQL", (trace.get("error") or "no model wrote SQL")[:500]
    return "ERROR", (trace.get("error") or "no candidate executed")[:500]


def chosen_hash(trace: dict[str, Any]) -> str | None:
    """The result signature of the trace's chosen SQL.

    Args:
        trace: the pipeline's trace.

    Returns:
        The ``result_hash`` of an executed candidate whose SQL is the chosen one (else of the
        vote group whose SQL it is), or None.
    """
    sql = trace.get("sql")
    if not sql:
        return None
    for c in trace.get("candidates") or []:
        if c.get("sql") == sql and c.get("status") == Status.OK and c.get("result_hash"):
            return c["result_hash"]
    for g in (trace.get("vote") or {}).get("groups") or []:
        if g.get("sql") == sql:
            return g.get("result_hash")
    return None


def model_rightness(trace: dict[str, Any], gold_hash: str) -> dict[str, bool]:
    """Per model: whether its first FinSQL candidate returned the verified SQL's result.

    Args:
        trace: the pipeline's trace (``candidates`` in call order).
        gold_hash: the verified SQL's ``result_hash``.

    Returns:
        model -> right, for every model that wrote a FinSQL candidate (answered or not).
    """
    out: dict[str, bool] = {}
    for c in trace.get("candidates") or []:
        m = c.get("model")
        if m and m not in out and str(c.get("source", "")).startswith("finsql:"):
            out[m] = c.get("status") == Status.OK and c.get("result_hash") == gold_hash
    return out


def summarize(results: list[Judged]) -> dict[str, Any]:
    """The totals of a run.

    Args:
        results: the evaluated questions.

    Returns:
        ``{"questions", "judged", "right", "ex", "per_model": {model: {"questions", "right",
        "ex"}}, "categories": {category: count}}``; ``ex`` is right / judged (4 places), None
        when nothing was judged.
    """
    judged = [r for r in results if r.right is not None]
    right = sum(1 for r in judged if r.right)
    per: dict[str, dict[str, Any]] = {}
    for r in judged:
        for m, ok in r.per_model.items():
            d = per.setdefault(m, {"questions": 0, "right": 0})
            d["questions"] += 1
            d["right"] += ok
    for d in per.values():
        d["ex"] = round(d["right"] / d["questions"], 4)
    cats = Counter(r.category for r in judged if r.category)
    return {
        "questions": len(results),
        "judged": len(judged),
        "right": right,
        "ex": round(right / len(judged), 4) if judged else None,
        "per_model": dict(sorted(per.items())),
        "categories": dict(sorted(cats.items())),
    }


# --------------------------------------------------------------------------------------------
# the database side
# --------------------------------------------------------------------------------------------


def verified_questions(plpy, max_questions: int | None) -> list[dict[str, Any]]:
    """The verified queries (not templates) the calling role may use, oldest first.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        max_questions: at most this many, or None for all.

    Returns:
        ``{"id", "question", "sql"}`` dicts.

    Raises:
        EvaluationError: ``max_questions`` is below 1, or there is none.
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


def start_run(plpy, st, models, note: str | None) -> int:
    """Record a new run with the settings and models in force.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        st: the settings.
        models: the enabled ``ModelConfig`` list.
        note: the caller's note, or None.

    Returns:
        The ``nl2sql.evaluation_run`` id.
    """
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


def store_result(plpy, run_id: int, r: Judged) -> None:
    """Insert one question's outcome into ``nl2sql.evaluation_result``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        run_id: the run.
        r: the outcome.
    """
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


def finish_run(plpy, run_id: int, totals: dict[str, Any], stopped: str | None) -> None:
    """Write a run's totals and its finishing time.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        run_id: the run.
        totals: ``summarize``'s dict.
        stopped: why it stopped before its last question, or None.
    """
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


def ask(
    plpy, run_id: int, vq: dict[str, Any], search_path: str
) -> tuple[dict[str, Any] | None, str | None]:
    """Ask one verified question through the pipeline (fast path bypassed, left out of its
    own examples) and log the call (its trace carries ``evaluation_run``).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        run_id: the run.
        vq: the verified query (``id``, ``question``, ``sql``).
        search_path: the caller's search_path.

    Returns:
        (the redacted trace with its ``log_id``, None), or (None, the redacted error) when
        the call failed for this question.

    Raises:
        ConfigError, EmbeddingError: what would fail every question.
        plpy.SPIError: the user cancelled.
    """
    from ..core.redaction import configured_secrets, redact, redact_obj
    from ..pipeline import LeaveOut, answer, log_trace

    secrets = configured_secrets(plpy)
    try:
        trace = answer(
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


def rows_of(plpy, sql: str, search_path: str, st) -> list[tuple]:
    """Fetch a query's rows (read-only, candidate limits) as value tuples.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        sql: a checked query.
        search_path: the caller's search_path.
        st: the settings (``candidate_timeout_ms``, ``max_rows``, ``max_result_bytes``).

    Returns:
        At most ``max_rows`` rows, values normalised (``vote.row_from_json``).

    Raises:
        plpy.SPIError: the query failed or was cancelled.
        Nl2sqlError: the result was too large, or the query took an advisory lock.
    """
    from ..generation.execute import fetch_rows
    from ..selection.vote import row_from_json

    return [
        row_from_json(t)
        for t in fetch_rows(
            plpy, sql, search_path, st.candidate_timeout_ms, st.max_rows, st.max_result_bytes
        )
    ]


def judge(plpy, run_id: int, vq: dict[str, Any], search_path: str, st) -> Judged:
    """Evaluate one verified question: gold, the pipeline's answer, rightness, the miss.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        run_id: the run.
        vq: the verified query (``id``, ``question``, ``sql``).
        search_path: the caller's search_path.
        st: the settings.

    Returns:
        The ``Judged`` outcome.

    Raises:
        ConfigError, EmbeddingError: what would fail every question.
        plpy.SPIError: the user cancelled.
    """
    from ..selection.reliability import judge_candidates, run_verified

    t0 = time.perf_counter()
    out = Judged(vq["id"], vq["question"], vq["sql"])
    gold = run_verified(
        plpy, vq["sql"], search_path, st.candidate_timeout_ms, st.max_rows, st.max_result_bytes
    )
    if gold.status != Status.OK:
        out.detail = f"not judged: the verified SQL {gold.status}: {str(gold.reason)[:300]}"
        out.ms = (time.perf_counter() - t0) * 1000
        return out
    trace, error = ask(plpy, run_id, vq, search_path)
    if trace is not None:
        out.chosen_sql, out.log_id = trace.get("sql"), trace.get("log_id")
        out.level = (trace.get("hardness") or {}).get("presql")
        out.per_model = model_rightness(trace, gold.result_hash)
        out.candidates = judge_candidates(trace.get("candidates"), gold.result_hash)
    out.right = trace is not None and chosen_hash(trace) == gold.result_hash
    if not out.right:
        out.category, out.detail = classify_miss(plpy, trace, error, vq, search_path, st)
    out.ms = (time.perf_counter() - t0) * 1000
    return out


def classify_miss(
    plpy, trace: dict[str, Any] | None, error: str | None, vq: dict[str, Any], search_path: str, st
) -> tuple[str, str]:
    """Classify a miss: the call's outcome, else the chosen rows against the verified rows.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        trace: the trace, or None when the call failed.
        error: the call's error, or None.
        vq: the verified query.
        search_path: the caller's search_path.
        st: the settings.

    Returns:
        (category, detail).

    Raises:
        plpy.SPIError: the user cancelled.
    """
    from ..generation.execute import is_cancel

    found = classify_outcome(trace, error)
    if found is not None:
        return found
    t0 = time.perf_counter()
    try:
        got = rows_of(plpy, trace["sql"], search_path, st)
        gold = rows_of(plpy, vq["sql"], search_path, st)
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


def time_left(plpy, slowest_s: float) -> str | None:
    """Whether the next question still fits in the caller's ``statement_timeout``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        slowest_s: the slowest question so far, in seconds (0 before the first).

    Returns:
        None when it fits (or no statement_timeout is set), else why it does not.
    """
    from ..generation.safety import statement_remaining_s

    left = statement_remaining_s(plpy)
    if left is None or left > max(slowest_s, 0.0):
        return None
    return (
        f"statement_timeout leaves {max(left, 0) * 1000:.0f} ms, less than the slowest "
        f"question so far ({slowest_s * 1000:.0f} ms)"
    )


def evaluate(plpy, max_questions: int | None, note: str | None, search_path: str) -> dict[str, Any]:
    """Run an evaluation: backs ``nl2sql.evaluate(max_questions, note) → jsonb``.

    Every verified query the role may use (``verified_questions``) is judged (``judge``) and
    kept; the run's totals are written at the end. Before each question the remaining
    ``statement_timeout`` is checked (``time_left``): when the next question may not fit, the
    run stops there, keeps what it has and says so in ``stopped``.

    Source: execution accuracy (EX) of Spider (Yu et al. 2018) and BIRD (Li et al. 2023).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        max_questions: at most this many verified queries (oldest first), or None for all.
        note: a note kept with the run (e.g. what changed), or None.
        search_path: the caller's search_path.

    Returns:
        ``{"run_id", "questions", "judged", "right", "ex", "per_model", "categories",
        "misses": [{verified_query_id, question, category, detail, expected_sql, chosen_sql,
        log_id}], "not_judged": [...], "stopped"}``.

    Raises:
        EvaluationError: no verified query to evaluate, or a bad ``max_questions``.
        ConfigError: no model is enabled, or a setting is invalid.
        EmbeddingError: the embedding model is missing.
        plpy.SPIError: the user cancelled.
    """
    from ..core.settings import get_settings
    from ..model.config import get_models

    st = get_settings(plpy)
    models = get_models(plpy, st)
    todo = verified_questions(plpy, max_questions)
    run_id = start_run(plpy, st, models, note)
    results: list[Judged] = []
    stopped = None
    for i, vq in enumerate(todo):
        why = time_left(plpy, max((r.ms for r in results), default=0.0) / 1000)
        if why:
            stopped = (
                f"{why}: {i} of {len(todo)} questions evaluated; raise it (SET "
                f"statement_timeout = 0) or evaluate fewer (max_questions => n)"
            )
            plpy.warning(f"nl2sql.evaluate: {stopped}")
            break
        r = judge(plpy, run_id, vq, search_path, st)
        store_result(plpy, run_id, r)
        results.append(r)
    totals = summarize(results)
    finish_run(plpy, run_id, totals, stopped)
    return {
        "run_id": run_id,
        **totals,
        "misses": [
            {
                "verified_query_id": r.verified_query_id,
                "question": r.question,
                "category": r.category,
                "detail": r.detail,
                "expected_sql": r.expected_sql,
                "chosen_sql": r.chosen_sql,
                "log_id": r.log_id,
            }
            for r in results
            if r.right is False
        ],
        "not_judged": [
            {"verified_query_id": r.verified_query_id, "detail": r.detail}
            for r in results
            if r.right is None
        ],
        "stopped": stopped,
    }
