"""The entry points of administration."""

from __future__ import annotations

import json
from typing import Any

from ..core import query_log, spi
from ..core.errors import (
    CandidateRefused,
    ConfigError,
    EmbeddingError,
    EvaluationError,
    NotIndexedError,
)
from ..core.redaction import configured_secrets, redact, redact_obj
from ..core.settings import get_settings, validate_setting
from ..curated import business, verified
from ..rules import rules_off
from ._door import MODELS_HINT, as_sql_errors, entry_point, fail, install_cancel_point

STORE_SETTING = (
    "INSERT INTO nl2sql.setting (key, value) VALUES ($1, $2) "
    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
)
REMOVE_TERM = "DELETE FROM nl2sql.term WHERE lower(term) = lower($1) RETURNING id"


def write_log(plpy, sd: dict, token: str | None, *row: Any) -> int:
    """Back ``nl2sql._log_query`` (SECURITY DEFINER): ``query_log.write_log``. Not an
    ``entry_point``: it runs inside a question's call, whose embedder record that would reset.

    Args:
        sd: the SQL function's static dictionary (``SD``).
        token: the one-time token ``query_log.log_query`` issued.
        *row: role_name, question, sql, confidence, error, trace (JSON text), conversation.

    Returns:
        The new row's id.
    """
    return query_log.write_log(plpy, sd, token, *row)


@entry_point
def prune_query_log(plpy) -> str:
    """Back ``nl2sql.prune_query_log() → jsonb``: ``query_log.prune`` with setting
    ``query_log_retention_days``.

    Args:
        plpy: PL/Python's module.

    Returns:
        ``{"deleted", "retention_days", "statements"}`` as JSON text.
    """
    return json.dumps(query_log.prune(plpy, get_settings(plpy).query_log_retention_days))


@entry_point
def set_setting(plpy, key: str, value: str) -> str:
    """Back ``nl2sql.set_setting(key, value) → text``: validate and store one setting.

    Args:
        key: the setting's name.
        value: its new value, as text.

    Returns:
        The stored (normalised) value text.
    """
    try:
        v = validate_setting(key, value)
        if key == "rules_off":  # rule names: the rules' floor knows them, not core's
            rules_off(v)
    except ConfigError as e:
        fail(plpy, str(e))
    spi.query(plpy, STORE_SETTING, [key, v], ["text", "text"])
    return v


@entry_point
def add_example(plpy, question: str, sql: str, db_id: str | None, dialect: str) -> int:
    """Back ``nl2sql.add_example(question, sql, db_id, dialect) → bigint``.

    Args:
        question, sql, db_id, dialect: as for ``example_store.add_example``.

    Returns:
        The example's id.
    """
    from ..ops import example_store  # not loaded by a backend that only asks questions

    try:
        return example_store.add_example(plpy, question, sql, db_id, dialect)
    except (CandidateRefused, ValueError) as e:
        fail(plpy, f"nl2sql.add_example: {e}", "pass one read-only SELECT over known tables")


@entry_point
def load_examples(plpy, data: str, dialect: str, tables: str | None) -> str:
    """Back ``nl2sql.load_examples(data, dialect, tables) → jsonb``.

    Args:
        data, dialect, tables: as for ``example_store.load_examples``.

    Returns:
        JSON text ``{"loaded", "duplicates", "failed": [{"index", "question", "error"}]}``.
    """
    from ..ops import example_store  # not loaded by a backend that only asks questions

    try:
        return json.dumps(example_store.load_examples(plpy, data, dialect, tables))
    except ConfigError as e:
        hint = "pass a JSON array (or JSON lines) of {question, query|SQL, db_id}"
        fail(plpy, f"nl2sql.load_examples: {e}", hint)


@entry_point
def add_verified_query(plpy, question: str, sql: str, dialect: str) -> int:
    """Back ``nl2sql.add_verified_query(question, sql, dialect) → bigint``.

    Args:
        question, sql, dialect: as for ``verified.add_verified`` (kind ``query``).

    Returns:
        The id in ``nl2sql.verified_query`` (the same id when added again).
    """
    add = verified.add_verified
    return as_sql_errors(
        plpy, "add_verified_query", add, question, sql, "query", dialect or "postgres"
    )


@entry_point
def add_template(plpy, question: str, sql: str) -> int:
    """Back ``nl2sql.add_template(question, sql) → bigint``: a parameterised verified query.

    Args:
        question, sql: as for ``verified.add_verified`` (kind ``template``).

    Returns:
        The id in ``nl2sql.verified_query``.
    """
    return as_sql_errors(plpy, "add_template", verified.add_verified, question, sql, "template")


@entry_point
def add_term(plpy, term: str, definition: str, sql_expression: str | None) -> int:
    """Back ``nl2sql.add_term(term, definition, sql_expression) → bigint``.

    The verified questions naming the term are masked again (``verified.refresh_for_term``).

    Args:
        term, definition, sql_expression: as for ``business.add_term``.

    Returns:
        The term's id.
    """
    tid = as_sql_errors(plpy, "add_term", business.add_term, term, definition, sql_expression)
    verified.refresh_for_term(plpy, term)
    return tid


@entry_point
def remove_term(plpy, term: str) -> bool:
    """Back ``nl2sql.remove_term(term) → boolean`` (case-insensitive).

    Args:
        term: the term.

    Returns:
        True when a term was removed (its verified questions masked again).
    """
    gone = spi.query(plpy, REMOVE_TERM, [term or ""], ["text"])
    if gone:
        as_sql_errors(plpy, "remove_term", verified.refresh_for_term, term)
    return bool(gone)


@entry_point
def add_instruction(plpy, text: str) -> int:
    """Back ``nl2sql.add_instruction(text) → bigint``: ``business.add_instruction``.

    Args:
        text: the instruction.

    Returns:
        The instruction's id (the same id for the same text).
    """
    return as_sql_errors(plpy, "add_instruction", business.add_instruction, text)


@entry_point
def feedback(plpy, log_id: int, correct: bool, sql: str | None, verify: bool) -> int | None:
    """Back ``nl2sql.feedback(log_id, correct, sql, verify) → bigint``.

    Args:
        log_id, correct, sql, verify: as for ``feedback.from_feedback``.

    Returns:
        The example's id; None when incorrect and no correction was given.
    """
    from ..curated import feedback as fb  # not loaded by a backend that only asks questions

    return as_sql_errors(plpy, "feedback", fb.from_feedback, log_id, correct, sql, verify)


@entry_point
def approve_mined(plpy, mined_id: int, question: str | None) -> int:
    """Back ``nl2sql.approve_mined(id, question) → bigint``: ``feedback.approve_mined``.

    Args:
        mined_id, question: as for ``feedback.approve_mined``.

    Returns:
        The id of the verified query or template it became.
    """
    from ..curated import feedback as fb  # not loaded by a backend that only asks questions

    return as_sql_errors(plpy, "approve_mined", fb.approve_mined, mined_id, question)


@entry_point
def mine_queries(plpy, limit: int) -> str:
    """Back ``nl2sql.mine_queries(limit) → jsonb``: ``mining.mine``.

    Args:
        limit: most statements to write a question for.

    Returns:
        JSON text ``{considered, mined, skipped: {reason: n}, failed: [...], model}``.
    """
    from ..curated import mining  # not loaded by a backend that only asks questions

    secrets = configured_secrets(plpy)
    try:
        return json.dumps(redact_obj(mining.mine(plpy, limit), secrets))
    except ConfigError as e:
        hint = "see docs/curated.md, 'Mining the query log', and README.md, 'Models'"
        fail(plpy, redact(str(e), secrets), hint)
    except NotIndexedError as e:
        fail(plpy, str(e))


@entry_point
def calibrate(plpy, judged: str | None) -> str:
    """Back ``nl2sql.calibrate(judged) → jsonb``: ``reliability.calibrate``.

    Args:
        judged: JSON text of judged questions (``reliability.parse_judged``), or None.

    Returns:
        JSON text of the summary.
    """
    from ..selection import reliability  # not loaded by a backend that only asks questions

    try:
        st = get_settings(plpy)
        out = reliability.calibrate(
            plpy, judged, st.candidate_timeout_ms, st.max_rows, st.max_result_bytes
        )
    except ConfigError as e:
        hint = 'judged: a JSON array of {"level", "candidates": [{"model", "group", "right"}]}'
        fail(plpy, str(e), hint + ", or NULL")
    return json.dumps(out)


@entry_point
def evaluate(plpy, max_questions: int | None, note: str | None, search_path: str) -> str:
    """Back ``nl2sql.evaluate(max_questions, note) → jsonb``: ``evaluate.evaluate``.

    Args:
        max_questions, note: as for ``evaluate.evaluate``.
        search_path: the caller's search_path text.

    Returns:
        JSON text of the summary.
    """
    from .. import evaluation as ev  # not loaded by a backend that only asks questions

    secrets = configured_secrets(plpy)
    try:
        return json.dumps(ev.evaluate(plpy, max_questions, note, search_path), default=str)
    except EvaluationError as e:
        fail(plpy, str(e), ev.NO_QUESTIONS_HINT if str(e) == ev.NO_QUESTIONS else None)
    except ConfigError as e:
        fail(plpy, redact(str(e), secrets), MODELS_HINT)
    except EmbeddingError as e:
        fail(plpy, redact(f"nl2sql: {e}", secrets))


def doctor(plpy) -> list[tuple[str, str, str, str]]:
    """Back ``nl2sql._doctor()`` (called by ``nl2sql.doctor()``): ``ops.doctor.doctor``. Not an
    ``entry_point``: a version mismatch is one of its rows, not an error.

    Args:
        plpy: PL/Python's module.

    Returns:
        ``(check, status, detail, fix)`` rows.

    Raises:
        plpy.Error: the current role may not EXECUTE ``nl2sql.doctor()``.
    """
    from ..ops import doctor as checks  # not loaded by a backend that only asks questions

    install_cancel_point(plpy)
    if not checks.may_run(plpy):
        fail(
            plpy,
            "nl2sql.doctor: permission denied: this role may not execute nl2sql.doctor()",
            "a superuser or the extension's owner runs it, or grants it: "
            "GRANT EXECUTE ON FUNCTION nl2sql.doctor() TO dba_role",
        )
    return checks.doctor(plpy)


SEMANTIC_HINT = "see docs/semantic-model.md"


@entry_point
def import_semantic_model(plpy, model: str | None) -> str:
    """Back ``nl2sql.import_semantic_model(model) → jsonb``: ``cortex.import_model``.

    Args:
        model: the semantic model's YAML text.

    Returns:
        JSON text ``{model, added, updated, skipped, counts}``.
    """
    from ..semantic import cortex  # yaml is not loaded by a backend that only asks questions

    try:
        return json.dumps(cortex.import_model(plpy, model))
    except CandidateRefused as e:
        fail(plpy, f"nl2sql.import_semantic_model: {e}", SEMANTIC_HINT)
    except (ValueError, NotIndexedError, EmbeddingError) as e:
        fail(plpy, f"nl2sql.import_semantic_model: {e}", getattr(e, "hint", None) or SEMANTIC_HINT)


@entry_point
def export_semantic_model(plpy) -> str:
    """Back ``nl2sql.export_semantic_model() → text``: ``cortex.export_model``.

    Args:
        plpy: PL/Python's module.

    Returns:
        The semantic model as Cortex Analyst YAML.
    """
    from ..semantic import cortex  # yaml is not loaded by a backend that only asks questions

    return cortex.export_model(plpy)
