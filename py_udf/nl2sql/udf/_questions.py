"""The entry points of a question: ``nl2sql()``, ``explain``, ``ask``, ``narrate``, ``chart``,
``retrieve``, and ``explain_sql``."""

from __future__ import annotations

import json
from typing import Any

from .. import pipeline
from ..core import query_log
from ..core.errors import (
    GONE_HINT,
    GONE_SQLSTATES,
    CandidateRefused,
    ConfigError,
    EmbeddingError,
    Nl2sqlError,
    QuestionError,
    gone_message,
)
from ..core.redaction import configured_secrets, redact, redact_obj
from ..core.settings import get_settings
from ..curated import narrate as nr
from ..generation import explain_sql as xs
from ..generation.execute import fetch_rows
from ..pipeline import log_trace
from ._door import MODELS_HINT, entry_point, fail
from ._failed_log import keep as keep_failed_row


def _run(
    plpy,
    question: str,
    search_path: str,
    evidence: str | None,
    conversation: str | None = None,
    explained: bool = False,
    with_rows: bool = False,
    raises: bool = False,
) -> tuple[dict[str, Any], list[str] | None]:
    # every error message raised here and the whole trace (logged, returned by explain, its
    # ``error`` raised by nl2sql/ask) are redacted: no configured key, no key-like token.
    # Returns the trace and, ``with_rows``, the chosen SQL's rows from its checked execution.
    # ``raises``: the caller raises when no SQL was chosen, so that call's row is written where
    # the error cannot undo it (``_failed_log.keep``: its ``log_not_kept`` says why it was not).
    secrets = configured_secrets(plpy)
    rows = None
    try:
        # a call that raises when no SQL was chosen has its usage written with its log row
        # (``keep_failed_row``), where the error cannot undo it
        how = {"usage_if_failed": not raises}
        if with_rows:
            trace, rows = pipeline.ask(plpy, question, search_path, evidence, conversation, **how)
        else:
            trace = pipeline.explain(plpy, question, search_path, evidence, conversation, **how)
    except QuestionError as e:
        fail(plpy, redact(str(e), secrets))
    except ConfigError as e:
        fail(plpy, redact(str(e), secrets), MODELS_HINT)
    except EmbeddingError as e:
        fail(plpy, redact(f"nl2sql: {e}", secrets))
    except (RuntimeError, Nl2sqlError) as e:
        fail(plpy, redact(str(e), secrets))
    if explained and trace.get("sql") and get_settings(plpy).explain_sql_in_trace:
        trace["sql_explanation"] = _explanation(plpy, trace["sql"], search_path)
    trace = redact_obj(trace, secrets)
    if raises and trace.get("sql") is None:
        trace["log_id"], why = keep_failed_row(plpy, trace)
        if why:
            trace["log_not_kept"] = why
    else:
        trace["log_id"] = log_trace(plpy, trace)
    return trace, rows


def _chosen_sql(plpy, trace: dict[str, Any]) -> str:
    """The trace's SQL; raises the trace's error when nothing was chosen, the hint naming the log
    row kept for the call (``_run(raises=True)``) or why none was."""
    if trace.get("sql") is None:
        hint = query_log.failed_hint(trace.get("log_id"), trace.get("log_not_kept"))
        fail(plpy, trace.get("error") or "nl2sql: no SQL chosen", hint)
    return trace["sql"]


def _explanation(plpy, sql: str, search_path: str) -> dict[str, Any]:
    """The trace's ``sql_explanation`` (setting ``explain_sql_in_trace``): ``{"text"}``, or
    ``{"error"}`` when the explanation failed (the trace is returned all the same)."""
    try:
        return {"text": xs.explain(plpy, get_settings(plpy), sql, search_path)}
    except (RuntimeError, Nl2sqlError) as e:
        return {"error": str(e)}


@entry_point
def trace(
    plpy, question: str, search_path: str, evidence: str | None, conversation: str | None
) -> tuple[dict[str, Any], list[str] | None]:
    """The whole trace of a question as ``nl2sql()`` makes it (logged, its id ``log_id``), for
    the Python API beside the database (``nl2sql.client``): not raised when no SQL was chosen;
    with the chosen SQL's rows from its checked execution, as ``nl2sql.ask`` returns them.

    Args:
        question, search_path, evidence, conversation: as for ``nl2sql``.

    Returns:
        ``(trace, rows)``: the trace (``sql`` None and ``error`` why, when no SQL was chosen)
        and at most ``max_rows`` ``row_to_json`` texts (None when none were kept).

    Raises:
        plpy.Error: an invalid question, key, setting or model configuration, a missing index.
    """
    return _run(plpy, question, search_path, evidence, conversation, with_rows=True)


@entry_point
def nl2sql(
    plpy, question: str, search_path: str, evidence: str | None, conversation: str | None
) -> str:
    """Back ``nl2sql(question, ...) → text``: answer with one SQL query (the trace is logged).

    Args:
        question: the natural-language question.
        search_path: the caller's search_path text.
        evidence: the caller's hint text, or None.
        conversation: the conversation key (its earlier turns go into the prompts), or None.

    Returns:
        The chosen SQL text.

    Raises:
        plpy.Error: an invalid question, key, setting or model configuration, a missing index
            or embedding model, no candidate executed (naming why), or the vote abstained; the
            hint names the call's log row (``nl2sql.query_log`` id, written by the shared
            process: the error does not undo it), or why it rolled back with the error, and
            ``nl2sql.explain``.
    """
    trace, _ = _run(plpy, question, search_path, evidence, conversation, raises=True)
    return _chosen_sql(plpy, trace)


@entry_point
def explain(
    plpy, question: str, search_path: str, evidence: str | None, conversation: str | None
) -> str:
    """Back ``nl2sql.explain(...) → jsonb``: the whole trace (logged, its id ``log_id``).

    Args:
        question, search_path, evidence, conversation: as for ``nl2sql``.

    Returns:
        The trace as JSON text, also when no SQL was chosen (``sql`` null, ``error`` why).
    """
    trace, _ = _run(plpy, question, search_path, evidence, conversation, explained=True)
    return json.dumps(trace, default=str)


@entry_point
def ask(
    plpy, question: str, search_path: str, evidence: str | None, conversation: str | None
) -> list[str]:
    """Back ``nl2sql.ask(...) → setof jsonb``: the chosen SQL's rows, those of the checked
    execution the vote saw (read-only, rolled back; no second run a concurrent DROP or RENAME
    could break).

    Args:
        question, search_path, evidence, conversation: as for ``nl2sql``.

    Returns:
        At most ``max_rows`` rows, each a ``row_to_json`` text.

    Raises:
        plpy.Error: as ``nl2sql``; or, where the rows were not kept, the chosen SQL failed when
            fetched again (a relation gone since: said so, with what to do).
    """
    trace, rows = _run(
        plpy, question, search_path, evidence, conversation, with_rows=True, raises=True
    )
    sql = _chosen_sql(plpy, trace)
    if rows is not None:
        return rows
    return _fetch_again(plpy, sql, search_path)


def _fetch_again(plpy, sql: str, search_path: str) -> list[str]:
    """The chosen SQL's rows from a second execution (its first one's rows were not kept);
    a relation, column or function gone since becomes an ``nl2sql:`` error."""
    st = get_settings(plpy)
    try:
        return fetch_rows(
            plpy, sql, search_path, st.candidate_timeout_ms, st.max_rows, st.max_result_bytes
        )
    except CandidateRefused as e:  # it took a session-level advisory lock (released)
        fail(plpy, f"nl2sql: the chosen query {e}")
    except plpy.SPIError as e:
        if getattr(e, "sqlstate", None) not in GONE_SQLSTATES:
            raise
        fail(plpy, gone_message(str(e).splitlines()[0]), GONE_HINT)


@entry_point
def narrate(
    plpy, question: str, search_path: str, evidence: str | None, conversation: str | None
) -> str:
    """Back ``nl2sql.narrate(...) → text``: answer as ``nl2sql`` does, then in words.

    Args:
        question, search_path, evidence, conversation: as for ``nl2sql``.

    Returns:
        The model's short answer (``narrate.answer_from_sql``).

    Raises:
        plpy.Error: ``send_values`` is off, or what ``nl2sql`` and the narrating model raise.
    """
    st = get_settings(plpy)
    secrets = configured_secrets(plpy)
    try:
        nr.check_allowed(st)
        trace, rows = _run(
            plpy, question, search_path, evidence, conversation, with_rows=True, raises=True
        )
        sql = _chosen_sql(plpy, trace)
        return nr.answer_from_sql(plpy, st, question, sql, search_path, rows)
    except ConfigError as e:
        fail(plpy, redact(str(e), secrets), MODELS_HINT)
    except (Nl2sqlError, RuntimeError) as e:
        fail(plpy, redact(str(e), secrets))


@entry_point
def chart(
    plpy, question: str, search_path: str, evidence: str | None, conversation: str | None
) -> str:
    """Back ``nl2sql.chart(...) → jsonb``: answer as ``nl2sql.ask`` does, then draw the rows.

    Args:
        question, search_path, evidence, conversation: as for ``nl2sql``.

    Returns:
        A Vega-Lite v5 spec as JSON text (``charts.spec.build``; ``usermeta.log_id``); when no
        SQL was chosen, a spec that says why (the trace is logged).

    Raises:
        plpy.Error: as ``nl2sql`` for an invalid question, key, setting or model configuration.
    """
    from ..charts import spec as chart_spec  # not loaded by a backend that only asks questions

    trace, rows = _run(plpy, question, search_path, evidence, conversation, with_rows=True)
    sql = trace.get("sql")
    if sql is None:
        why = trace.get("error") or "nl2sql: no SQL chosen"
        out = chart_spec.message_spec(question, f"no chart: {why}", {"sql": None})
    else:
        got = rows if rows is not None else _fetch_again(plpy, sql, search_path)
        out = chart_spec.build(question, sql, got)
    out["usermeta"]["log_id"] = trace.get("log_id")
    return json.dumps(out, default=str)


@entry_point
def retrieve(
    plpy, question: str, search_path: str, evidence: str | None, presql: str | None
) -> str:
    """Run the retrieval stages without a model call: backs ``nl2sql.retrieve(...) → jsonb``.

    Args:
        plpy, question, search_path, evidence: as for ``nl2sql``.
        presql: a PreSQL from elsewhere, or None (see ``pipeline.retrieve``).

    Returns:
        ``pipeline.retrieve``'s dict as JSON text.

    Raises:
        plpy.Error: (through ``plpy.error``) for an invalid question, a missing index or
            embedding model.
        ConfigError: a stored setting is invalid (not converted).
    """
    try:
        return json.dumps(
            pipeline.retrieve(plpy, question, search_path, evidence, presql), default=str
        )
    except QuestionError as e:
        fail(plpy, str(e))
    except EmbeddingError as e:
        fail(plpy, f"nl2sql: {e}")
    except RuntimeError as e:
        fail(plpy, str(e))


@entry_point
def explain_sql(plpy, sql: str | None, search_path: str) -> str:
    """Back ``nl2sql.explain_sql(sql, search_path) → text``: a query explained in words.

    Args:
        sql: the query text.
        search_path: the caller's search_path text.

    Returns:
        The model's explanation (``generation.explain_sql.explain``).

    Raises:
        plpy.Error: not one read-only query over indexed relations the role may SELECT; no
            model; the model failed.
    """
    secrets = configured_secrets(plpy)
    try:
        return xs.explain(plpy, get_settings(plpy), sql, search_path)
    except ConfigError as e:
        fail(plpy, redact(str(e), secrets), MODELS_HINT)
    except (Nl2sqlError, RuntimeError) as e:
        fail(plpy, redact(str(e), secrets))
