"""The door from SQL into Python: every PL/Python body of ``sql/idempotent`` calls one function
here (``nl2sql._boot`` aside; ``tests/unit/test_one_door.py`` checks it).

Each entry point backs one SQL function (docs/sql-reference.md: arguments, errors, privileges).
Its first argument is ``plpy``, PL/Python's module (SPI access), the others are the SQL
function's. It calls one function of a subpackage and turns that function's errors into
``plpy.error`` (``plpy.Error`` for the caller) with a message saying what went wrong and a hint
saying what to do. Modules only administration needs are imported inside their entry points,
so a backend that only asks questions does not load them.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from . import pipeline, version
from .core import query_log, spi
from .core.errors import (
    CandidateRefused,
    ConfigError,
    EmbeddingError,
    EvaluationError,
    Nl2sqlError,
    NotIndexedError,
    QuestionError,
    VersionMismatch,
)
from .core.redaction import configured_secrets, redact, redact_obj
from .core.settings import get_settings, lookup, validate_setting
from .curated import business, verified
from .curated import narrate as nr
from .embedding import client as embed_client
from .generation.execute import fetch_rows
from .ops import value_policy
from .pipeline import log_trace

MODELS_HINT = "see README.md, section 'Models'"
STORE_SETTING = (
    "INSERT INTO nl2sql.setting (key, value) VALUES ($1, $2) "
    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
)
REMOVE_TERM = "DELETE FROM nl2sql.term WHERE lower(term) = lower($1) RETURNING id"
CURATED_HINT = (
    "pass one read-only SELECT (or, for a term, an SQL expression) over indexed tables the "
    "caller may read; see README, 'Verified queries, templates and business context'"
)


def _fail(plpy, msg: str, hint: str | None = None):
    if hint:
        plpy.error(msg, hint=hint)
    plpy.error(msg)


def _names(schemas: list[str] | None) -> list[str] | None:
    return list(schemas) if schemas else None


def entry_point(fn):
    """Decorate an entry point: ``version.check`` (until it once succeeds in a backend), then
    the embedder of setting ``embedder`` (which also starts the call's record of it).

    Args:
        fn: the entry point; its first parameter is ``plpy``.

    Returns:
        The wrapped function, same signature.

    Raises:
        plpy.Error: (from the wrapper) the versions differ; the hint says what to run.
    """

    @functools.wraps(fn)
    def wrapper(plpy, *args, **kwargs):
        try:
            version.check(plpy)
        except VersionMismatch as e:
            _fail(plpy, str(e), getattr(e, "hint", None))
        _configure_embedder(plpy)
        return fn(plpy, *args, **kwargs)

    return wrapper


def _configure_embedder(plpy) -> str:
    """Point this backend's embeddings at the shared process or in-process per ``embedder`` (a
    stored value that does not parse counts as the default, so ``set_setting`` can repair it)."""
    decl = lookup("embedder")
    rows = spi.query(plpy, "SELECT value FROM nl2sql.setting WHERE key = 'embedder'")
    try:
        mode = decl.parse(rows[0]["value"]) if rows else decl.default
    except ConfigError:
        mode = decl.default
    embed_client.configure(mode)
    return mode


def _admin(plpy, what: str, fn, *args):
    """``fn(plpy, *args)``, its input errors turned into one SQL error naming ``nl2sql.<what>``
    (kept as is when the message names its function already), with the error's ``hint``."""
    try:
        return fn(plpy, *args)
    except CandidateRefused as e:
        _fail(plpy, f"nl2sql.{what}: {e}", CURATED_HINT)
    except (ValueError, NotIndexedError) as e:
        msg = str(e) if str(e).startswith("nl2sql") else f"nl2sql.{what}: {e}"
        _fail(plpy, msg, getattr(e, "hint", None))
    except EmbeddingError as e:
        _fail(plpy, f"nl2sql: {e}")


def _run(
    plpy, question: str, search_path: str, evidence: str | None, conversation: str | None = None
) -> dict[str, Any]:
    # every error message raised here and the whole trace (logged, returned by explain, its
    # ``error`` raised by nl2sql/ask) are redacted: no configured key, no key-like token
    secrets = configured_secrets(plpy)
    try:
        trace = pipeline.explain(plpy, question, search_path, evidence, conversation)
    except QuestionError as e:
        _fail(plpy, redact(str(e), secrets))
    except ConfigError as e:
        _fail(plpy, redact(str(e), secrets), "see README.md, section 'Models'")
    except EmbeddingError as e:
        _fail(plpy, redact(f"nl2sql: {e}", secrets))
    except (RuntimeError, Nl2sqlError) as e:
        _fail(plpy, redact(str(e), secrets))
    trace = redact_obj(trace, secrets)
    trace["log_id"] = log_trace(plpy, trace)
    return trace


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
            hint names ``nl2sql.explain`` and the log id.
    """
    trace = _run(plpy, question, search_path, evidence, conversation)
    if trace.get("sql") is None:
        hint = f"SELECT nl2sql.explain(...) shows the whole trace (log id {trace.get('log_id')})"
        _fail(plpy, trace.get("error") or "nl2sql: no SQL chosen", hint)
    return trace["sql"]


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
    return json.dumps(_run(plpy, question, search_path, evidence, conversation), default=str)


@entry_point
def ask(
    plpy, question: str, search_path: str, evidence: str | None, conversation: str | None
) -> list[str]:
    """Back ``nl2sql.ask(...) → setof jsonb``: the chosen SQL's rows, fetched read-only.

    Args:
        question, search_path, evidence, conversation: as for ``nl2sql``.

    Returns:
        At most ``max_rows`` rows, each a ``row_to_json`` text.

    Raises:
        plpy.SPIError: the chosen SQL failed or timed out when fetched.
    """
    sql = nl2sql(plpy, question, search_path, evidence, conversation)
    st = get_settings(plpy)
    try:
        return fetch_rows(
            plpy, sql, search_path, st.candidate_timeout_ms, st.max_rows, st.max_result_bytes
        )
    except CandidateRefused as e:  # it took a session-level advisory lock (released)
        _fail(plpy, f"nl2sql: the chosen query {e}")


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
        sql = nl2sql(plpy, question, search_path, evidence, conversation)
        return nr.answer_from_sql(plpy, st, question, sql, search_path)
    except ConfigError as e:
        _fail(plpy, redact(str(e), secrets), MODELS_HINT)
    except (Nl2sqlError, RuntimeError) as e:
        _fail(plpy, redact(str(e), secrets))


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
        _fail(plpy, str(e))
    except EmbeddingError as e:
        _fail(plpy, f"nl2sql: {e}")
    except RuntimeError as e:
        _fail(plpy, str(e))


@entry_point
def reindex(plpy, schemas: list[str] | None, force: bool) -> str:
    """Back ``nl2sql.reindex(schemas, force) → jsonb``: ``indexer.reindex``.

    Args:
        schemas: schema names, or None for setting ``schemas``.
        force: rewrite every table even when unchanged.

    Returns:
        The counts as JSON text.
    """
    from .ops import indexer  # not loaded by a backend that only asks questions

    return json.dumps(_admin(plpy, "reindex", indexer.reindex, _names(schemas), force))


@entry_point
def reindex_plan(plpy, schemas: list[str] | None) -> list[tuple[str, str]]:
    """Back ``nl2sql._reindex_plan(schemas)``: ``table_state.plan``.

    Args:
        schemas: schema names, or None for setting ``schemas``.

    Returns:
        The covered tables as ``(schema, table)`` pairs.
    """
    from .ops import table_state  # not loaded by a backend that only asks questions

    return table_state.plan(plpy, _names(schemas))


@entry_point
def reindex_changed(plpy, schemas: list[str] | None, force: bool) -> list[tuple[str, str, bool]]:
    """Back ``nl2sql._reindex_changed(schemas, force)``: ``indexer.changed_tables``.

    Args:
        schemas: schema names, or None for setting ``schemas``.
        force: count every table as changed.

    Returns:
        ``(schema, table, changed)`` triples.
    """
    from .ops import indexer  # not loaded by a backend that only asks questions

    return indexer.changed_tables(plpy, _names(schemas), force)


@entry_point
def reindex_begin(plpy) -> bool:
    """Back ``nl2sql._reindex_begin() → boolean``: ``index_maintenance.begin_bulk``.

    Args:
        plpy: PL/Python's module.

    Returns:
        Whether the value index's HNSW index was dropped (``reindex_finish`` builds it).
    """
    from .ops import index_maintenance  # not loaded by a backend that only asks questions

    return index_maintenance.begin_bulk(plpy)


@entry_point
def reindex_table(plpy, schema_name: str, table_name: str, force: bool) -> str:
    """Back ``nl2sql._reindex_table(schema_name, table_name, force) → jsonb``.

    Args:
        schema_name, table_name: the table.
        force: rewrite it even when unchanged.

    Returns:
        ``table_index.index_table``'s counts as JSON text.
    """
    from .ops import table_index  # not loaded by a backend that only asks questions

    index_table = table_index.index_table
    return json.dumps(_admin(plpy, "_reindex_table", index_table, schema_name, table_name, force))


@entry_point
def reindex_finish(plpy, schemas: list[str] | None, kept: list[str] | None, changed: bool) -> str:
    """Back ``nl2sql._reindex_finish(schemas, kept, tables_changed) → jsonb``.

    Args:
        schemas: the covered schema names, or None for setting ``schemas``.
        kept: the covered tables as ``schema.table`` texts, or None.
        changed: whether any table was re-indexed.

    Returns:
        ``indexer.finish``'s counts as JSON text.
    """
    from .ops import indexer  # not loaded by a backend that only asks questions

    keep = [tuple(k.split(".", 1)) for k in (kept or [])]
    return json.dumps(
        _admin(plpy, "_reindex_finish", indexer.finish, _names(schemas), keep, changed)
    )


@entry_point
def set_value_policy(plpy, tbl: str, send_values: bool, column_name: str | None) -> str:
    """Back ``nl2sql.set_value_policy(tbl, send_values, column_name) → jsonb``.

    Args:
        tbl: the table, as ``regclass`` text.
        send_values: true opts the values in, false keeps them out.
        column_name: one column of ``tbl``, or None for the whole table.

    Returns:
        ``value_policy.set_value_policy``'s dict as JSON text (the table re-indexed).
    """
    from .ops import table_index  # not loaded by a backend that only asks questions

    one = functools.partial(table_index.index_table, plpy, force=True)
    return json.dumps(value_policy.set_value_policy(plpy, tbl, send_values, column_name, one))


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
    except ConfigError as e:
        _fail(plpy, str(e))
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
    from .ops import example_store  # not loaded by a backend that only asks questions

    try:
        return example_store.add_example(plpy, question, sql, db_id, dialect)
    except (CandidateRefused, ValueError) as e:
        _fail(plpy, f"nl2sql.add_example: {e}", "pass one read-only SELECT over known tables")


@entry_point
def load_examples(plpy, data: str, dialect: str, tables: str | None) -> str:
    """Back ``nl2sql.load_examples(data, dialect, tables) → jsonb``.

    Args:
        data, dialect, tables: as for ``example_store.load_examples``.

    Returns:
        JSON text ``{"loaded", "duplicates", "failed": [{"index", "question", "error"}]}``.
    """
    from .ops import example_store  # not loaded by a backend that only asks questions

    try:
        return json.dumps(example_store.load_examples(plpy, data, dialect, tables))
    except json.JSONDecodeError as e:
        hint = "pass a JSON array (or JSON lines) of {question, query|SQL, db_id}"
        _fail(plpy, f"nl2sql.load_examples: not JSON: {e}", hint)


@entry_point
def add_verified_query(plpy, question: str, sql: str, dialect: str) -> int:
    """Back ``nl2sql.add_verified_query(question, sql, dialect) → bigint``.

    Args:
        question, sql, dialect: as for ``verified.add_verified`` (kind ``query``).

    Returns:
        The id in ``nl2sql.verified_query`` (the same id when added again).
    """
    add = verified.add_verified
    return _admin(plpy, "add_verified_query", add, question, sql, "query", dialect or "postgres")


@entry_point
def add_template(plpy, question: str, sql: str) -> int:
    """Back ``nl2sql.add_template(question, sql) → bigint``: a parameterised verified query.

    Args:
        question, sql: as for ``verified.add_verified`` (kind ``template``).

    Returns:
        The id in ``nl2sql.verified_query``.
    """
    return _admin(plpy, "add_template", verified.add_verified, question, sql, "template")


@entry_point
def add_term(plpy, term: str, definition: str, sql_expression: str | None) -> int:
    """Back ``nl2sql.add_term(term, definition, sql_expression) → bigint``.

    The verified questions naming the term are masked again (``verified.refresh_for_term``).

    Args:
        term, definition, sql_expression: as for ``business.add_term``.

    Returns:
        The term's id.
    """
    tid = _admin(plpy, "add_term", business.add_term, term, definition, sql_expression)
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
        _admin(plpy, "remove_term", verified.refresh_for_term, term)
    return bool(gone)


@entry_point
def add_instruction(plpy, text: str) -> int:
    """Back ``nl2sql.add_instruction(text) → bigint``: ``business.add_instruction``.

    Args:
        text: the instruction.

    Returns:
        The instruction's id (the same id for the same text).
    """
    return _admin(plpy, "add_instruction", business.add_instruction, text)


@entry_point
def feedback(plpy, log_id: int, correct: bool, sql: str | None, verify: bool) -> int | None:
    """Back ``nl2sql.feedback(log_id, correct, sql, verify) → bigint``.

    Args:
        log_id, correct, sql, verify: as for ``feedback.from_feedback``.

    Returns:
        The example's id; None when incorrect and no correction was given.
    """
    from .curated import feedback as fb  # not loaded by a backend that only asks questions

    return _admin(plpy, "feedback", fb.from_feedback, log_id, correct, sql, verify)


@entry_point
def approve_mined(plpy, mined_id: int, question: str | None) -> int:
    """Back ``nl2sql.approve_mined(id, question) → bigint``: ``feedback.approve_mined``.

    Args:
        mined_id, question: as for ``feedback.approve_mined``.

    Returns:
        The id of the verified query or template it became.
    """
    from .curated import feedback as fb  # not loaded by a backend that only asks questions

    return _admin(plpy, "approve_mined", fb.approve_mined, mined_id, question)


@entry_point
def mine_queries(plpy, limit: int) -> str:
    """Back ``nl2sql.mine_queries(limit) → jsonb``: ``mining.mine``.

    Args:
        limit: most statements to write a question for.

    Returns:
        JSON text ``{considered, mined, skipped: {reason: n}, failed: [...], model}``.
    """
    from .curated import mining  # not loaded by a backend that only asks questions

    secrets = configured_secrets(plpy)
    try:
        return json.dumps(redact_obj(mining.mine(plpy, limit), secrets))
    except ConfigError as e:
        hint = "see README.md, sections 'Mining the query log' and 'Models'"
        _fail(plpy, redact(str(e), secrets), hint)
    except NotIndexedError as e:
        _fail(plpy, str(e))


@entry_point
def calibrate(plpy, judged: str | None) -> str:
    """Back ``nl2sql.calibrate(judged) → jsonb``: ``reliability.calibrate``.

    Args:
        judged: JSON text of judged questions (``reliability.parse_judged``), or None.

    Returns:
        JSON text of the summary.
    """
    from .selection import reliability  # not loaded by a backend that only asks questions

    try:
        st = get_settings(plpy)
        out = reliability.calibrate(
            plpy, judged, st.candidate_timeout_ms, st.max_rows, st.max_result_bytes
        )
    except ConfigError as e:
        hint = 'judged: a JSON array of {"level", "candidates": [{"model", "group", "right"}]}'
        _fail(plpy, str(e), hint + ", or NULL")
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
    from .curated import evaluate as ev  # not loaded by a backend that only asks questions

    secrets = configured_secrets(plpy)
    try:
        return json.dumps(ev.evaluate(plpy, max_questions, note, search_path), default=str)
    except EvaluationError as e:
        _fail(plpy, str(e), ev.NO_QUESTIONS_HINT if str(e) == ev.NO_QUESTIONS else None)
    except ConfigError as e:
        _fail(plpy, redact(str(e), secrets), MODELS_HINT)
    except EmbeddingError as e:
        _fail(plpy, redact(f"nl2sql: {e}", secrets))
