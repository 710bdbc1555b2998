"""Entry points of the SQL functions: each SQL function is a few lines of PL/Python that call
one function here (the SQL layer is thin). Every function takes PL/Python's
``plpy`` module; errors are raised with ``plpy.error`` carrying a message that says what went
wrong and a hint that says what to do.
"""
from __future__ import annotations

import functools
import json
from typing import Any

from . import examples as ex_mod
from . import indexer, spi
from . import version
from .errors import (CandidateRefused, ConfigError, EmbeddingError, Nl2sqlError, QuestionError,
                     VersionMismatch)
from .pipeline import answer, log_trace
from .redaction import configured_secrets, redact, redact_obj
from .settings import get_settings, validate_setting
from .sqlcheck import parse_one


def _fail(plpy, msg: str, hint: str | None = None):
    if hint:
        plpy.error(msg, hint=hint)
    plpy.error(msg)


def entry_point(fn):
    """Decorate an SQL entry point with the version check.

    The wrapped function first checks, until it once succeeds in a backend, that this
    database's extension is the package's version (``version.check``).

    Args:
        fn: the entry point; its first parameter is ``plpy``.

    Returns:
        The wrapped function, same signature.

    Raises:
        plpy.Error: (through ``plpy.error``, from the wrapper) the versions differ; the SQL
            error's hint says what to run.
    """
    @functools.wraps(fn)
    def wrapper(plpy, *args, **kwargs):
        try:
            version.check(plpy)
        except VersionMismatch as e:
            _fail(plpy, str(e), getattr(e, "hint", None))
        return fn(plpy, *args, **kwargs)
    return wrapper


def _run(plpy, question: str, search_path: str, evidence: str | None,
         conversation: str | None = None) -> dict[str, Any]:
    # every error message raised here and the whole trace (logged, returned by explain, its
    # ``error`` raised by nl2sql/ask) are redacted: no configured key, no key-like token
    secrets = configured_secrets(plpy)
    try:
        trace = answer(plpy, question, search_path, evidence, conversation)
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
def nl2sql(plpy, question: str, search_path: str, evidence: str | None = None,
           conversation: str | None = None) -> str:
    """Answer a question with one SQL query: backs ``nl2sql(question, ...) → text``.

    Logs the trace to ``nl2sql.query_log``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        question: the natural-language question.
        search_path: the caller's search_path text.
        evidence: the caller's hint text, or None.
        conversation: the conversation key (its earlier turns go into the prompts), or None.

    Returns:
        The chosen SQL text.

    Raises:
        plpy.Error: (through ``plpy.error``) for an invalid question, conversation key,
            setting or model configuration, a missing index or embedding model, when no
            candidate could be executed (every model failed, or every candidate was refused or
            failed), naming why, or when the vote abstained (confidence below
            ``abstain_below``: the message lists the readings); the hint points to
            ``nl2sql.explain`` and the log id.
    """
    trace = _run(plpy, question, search_path, evidence, conversation)
    if trace.get("sql") is None:
        _fail(plpy, trace.get("error") or "nl2sql: no SQL chosen",
              f"SELECT nl2sql.explain(...) shows the whole trace (log id {trace.get('log_id')})")
    return trace["sql"]


@entry_point
def explain(plpy, question: str, search_path: str, evidence: str | None = None,
            conversation: str | None = None) -> str:
    """Return the whole trace of answering a question: backs ``nl2sql.explain(...) → jsonb``.

    Logs the trace to ``nl2sql.query_log`` (its id is the trace's ``log_id``).

    Args:
        plpy, question, search_path, evidence, conversation: as for ``nl2sql``.

    Returns:
        The trace as JSON text; also when no SQL was chosen (then ``sql`` is null and
        ``error`` says why; an abstention's readings are in ``abstained``).

    Raises:
        plpy.Error: (through ``plpy.error``) for an invalid question, setting or model
            configuration, a missing index or embedding model.
    """
    return json.dumps(_run(plpy, question, search_path, evidence, conversation), default=str)


@entry_point
def ask(plpy, question: str, search_path: str, evidence: str | None = None,
        conversation: str | None = None) -> list[str]:
    """Answer a question with the rows of the chosen SQL: backs ``nl2sql.ask(...) → setof jsonb``.

    The rows are fetched read-only under the settings ``candidate_timeout_ms`` and
    ``max_rows``.

    Args:
        plpy, question, search_path, evidence, conversation: as for ``nl2sql``.

    Returns:
        At most ``max_rows`` rows, each a ``row_to_json`` text.

    Raises:
        plpy.Error: (through ``plpy.error``) as ``nl2sql``.
        plpy.SPIError: the chosen SQL failed or timed out when fetched.
    """
    from .execute import fetch_rows

    sql = nl2sql(plpy, question, search_path, evidence, conversation)
    st = get_settings(plpy)
    try:
        return fetch_rows(plpy, sql, search_path, st.candidate_timeout_ms, st.max_rows,
                          st.max_result_bytes)
    except CandidateRefused as e:  # it took a session-level advisory lock (released)
        _fail(plpy, f"nl2sql: the chosen query {e}")


@entry_point
def narrate(plpy, question: str, search_path: str, evidence: str | None = None,
            conversation: str | None = None) -> str:
    """Answer a question in words: backs ``nl2sql.narrate(...) → text``.

    Refused first when setting ``send_values`` is off. Otherwise the question is answered as
    ``nl2sql`` answers it (logged), the chosen SQL's first ``narrate_rows`` rows are fetched
    read-only, pass the value policy (``narrate.gated_rows``) and go with the question and
    the SQL to the model of setting ``narrate_model`` (else the first model).

    Args:
        plpy, question, search_path, evidence, conversation: as for ``nl2sql``.

    Returns:
        The model's short answer text.

    Raises:
        plpy.Error: (through ``plpy.error``) ``send_values`` is off; everything ``nl2sql``
            raises; the chosen SQL failed when fetched; ``narrate_model`` names no enabled
            model; the narrating model failed.
    """
    from . import narrate as nr
    from .execute import fetch_rows
    from .safety import statement_remaining_s
    from .settings import get_models

    st = get_settings(plpy)
    secrets = configured_secrets(plpy)
    try:
        nr.check_allowed(st)
        sql = nl2sql(plpy, question, search_path, evidence, conversation)
        rows = fetch_rows(plpy, sql, search_path, st.candidate_timeout_ms, st.narrate_rows + 1,
                          st.max_result_bytes)
        gated = nr.gated_rows(plpy, search_path, sql, rows[:st.narrate_rows])
        models = get_models(plpy, st)
        model = nr.pick_model(models, st.narrate_model)
        return nr.write_answer(model, nr.narrate_prompt(question, sql, gated,
                                                        len(rows) > st.narrate_rows),
                               functools.partial(spi.cancel_point, plpy),
                               statement_remaining_s(plpy))
    except ConfigError as e:
        _fail(plpy, redact(str(e), secrets), "see README.md, section 'Models'")
    except (Nl2sqlError, RuntimeError) as e:
        _fail(plpy, redact(str(e), secrets))


@entry_point
def retrieve(plpy, question: str, search_path: str, evidence: str | None,
             presql: str | None) -> str:
    """Run the retrieval stages without a model call: backs ``nl2sql.retrieve(...) → jsonb``.

    Args:
        plpy, question, search_path, evidence: as for ``nl2sql``.
        presql: a PreSQL from elsewhere, or None (see ``context.retrieve``).

    Returns:
        ``context.retrieve``'s dict as JSON text.

    Raises:
        plpy.Error: (through ``plpy.error``) for an invalid question, a missing index or
            embedding model.
        ConfigError: a stored setting is invalid (not converted).
    """
    from .context import retrieve as run_retrieval

    try:
        return json.dumps(run_retrieval(plpy, question, search_path, evidence, presql), default=str)
    except QuestionError as e:
        _fail(plpy, str(e))
    except EmbeddingError as e:
        _fail(plpy, f"nl2sql: {e}")
    except RuntimeError as e:
        _fail(plpy, str(e))


@entry_point
def reindex(plpy, schemas: list[str] | None, force: bool) -> str:
    """Index the catalog, cell values and example pool: backs ``nl2sql.reindex(...) → jsonb``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        schemas: schema names (a SQL ``text[]``), or None for setting ``schemas``.
        force: rewrite every table even when unchanged.

    Returns:
        ``indexer.reindex``'s counts as JSON text.

    Raises:
        plpy.Error: (through ``plpy.error``) the embedding model is missing.
        ConfigError: a stored setting is invalid (not converted).
    """
    try:
        return json.dumps(indexer.reindex(plpy, list(schemas) if schemas else None, force))
    except EmbeddingError as e:
        _fail(plpy, f"nl2sql: {e}")


@entry_point
def set_setting(plpy, key: str, value: str) -> str:
    """Validate and store one setting: backs ``nl2sql.set_setting(key, value) → text``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        key: the setting's name.
        value: its new value, as text.

    Returns:
        The stored (normalised) value text.

    Raises:
        plpy.Error: (through ``plpy.error``) the key is unknown or the value invalid.
    """
    try:
        v = validate_setting(key, value)
    except ConfigError as e:
        _fail(plpy, str(e))
    spi.query(plpy, "INSERT INTO nl2sql.setting (key, value) VALUES ($1, $2) "
                    "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", [key, v],
              ["text", "text"])
    return v


@entry_point
def add_example(plpy, question: str, sql: str, db_id: str | None, dialect: str,
                source: str = "user") -> int:
    """Add one question/SQL pair to the pool: backs ``nl2sql.add_example(...) → bigint``.

    The pair is transpiled to PostgreSQL, masked and embedded. A pair for the current database
    (``db_id`` null) is checked against the indexed catalog (as a candidate is), masked with
    its tables' names, and shown only to roles that may read its relations. An existing pair
    (same db_id, question, SQL) gets the new ``source``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        question: the pair's question.
        sql: the pair's SQL, in ``dialect``.
        db_id: the database it was written for; None for this database.
        dialect: the sqlglot dialect of ``sql`` (``postgres``, ``sqlite``, ``mysql``).
        source: the pool row's source (``user``; ``feedback`` from ``feedback``).

    Returns:
        The example's id.

    Raises:
        plpy.Error: (through ``plpy.error``) the question is empty or the SQL does not parse
            or fails the check.
        NotIndexedError: ``db_id`` is None and nothing is indexed (not converted).
        EmbeddingError: the embedding model is missing (not converted).
    """
    tree = schema = None
    try:
        entry = ex_mod.make_entry(db_id or "local", question, sql, None, dialect=dialect)
        if db_id is None:
            from .catalog import load_schema, parse_search_path
            from .safety import check_candidate_in_db

            path = parse_search_path(plpy, spi.query(
                plpy, "SELECT current_setting('search_path') AS p")[0]["p"])
            schema = load_schema(plpy, path)
            tree = check_candidate_in_db(plpy, entry.sql, schema)
            entry.schema = {t.table: [c.name for c in t.columns] for t in schema.tables}
            entry = ex_mod.make_entry("local", question, entry.sql, entry.schema)
    except (CandidateRefused, ValueError) as e:
        _fail(plpy, f"nl2sql.add_example: {e}", "pass one read-only SELECT over known tables")
    from .embed import embed, to_pgvector

    vec = to_pgvector(embed([entry.masked_question])[0])
    res = spi.query(
        plpy, "INSERT INTO nl2sql.example (db_id, question, sql, masked_question, sql_skeleton, "
        "schema, source, embedding) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8::vector) "
        "ON CONFLICT (db_id, question, sql) DO UPDATE SET source = EXCLUDED.source RETURNING id",
        [entry.db_id, entry.question, entry.sql, entry.masked_question, entry.sql_skeleton,
         json.dumps(entry.schema), source, vec],
        ["text", "text", "text", "text", "text", "text", "text", "text"])
    if tree is not None:  # an example of this database: shown only to roles that may read it
        from .safety import record_example_relations

        record_example_relations(plpy, res[0]["id"], tree, schema)
    return res[0]["id"]


@entry_point
def load_examples(plpy, data: str, dialect: str, tables: str | None) -> str:
    """Bulk-load Spider/BIRD-format pairs: backs ``nl2sql.load_examples(...) → jsonb``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        data: a JSON array (or JSON lines) of ``{question, query|SQL, db_id}`` objects.
        dialect: the sqlglot dialect of the SQL (transpiled to PostgreSQL).
        tables: Spider ``tables.json`` text giving each db_id's schema for masking, or None.

    Returns:
        JSON text ``{"loaded", "duplicates", "failed": [{"index", "question", "error"}]}``:
        pairs inserted, pairs already in the pool, pairs that failed.

    Raises:
        plpy.Error: (through ``plpy.error``) ``data`` or ``tables`` is not JSON.
        EmbeddingError: the embedding model is missing (not converted).
    """
    try:
        entries, failures = ex_mod.parse_benchmark_json(
            data, dialect=dialect, tables=json.loads(tables) if tables else None)
    except json.JSONDecodeError as e:
        _fail(plpy, f"nl2sql.load_examples: not JSON: {e}",
              "pass a JSON array (or JSON lines) of {question, query|SQL, db_id}")
    from .embed import embed, to_pgvector

    vecs = embed([e.masked_question for e in entries], cache=False)
    ins = spi.plan(
        plpy, "INSERT INTO nl2sql.example (db_id, question, sql, masked_question, sql_skeleton, "
        "schema, source, embedding) VALUES ($1, $2, $3, $4, $5, $6::jsonb, 'load', $7::vector) "
        "ON CONFLICT DO NOTHING RETURNING id",
        ["text", "text", "text", "text", "text", "text", "text"])
    loaded = 0
    for e, v in zip(entries, vecs):
        loaded += len(spi.execute(plpy, ins, [e.db_id, e.question, e.sql, e.masked_question,
                                              e.sql_skeleton, json.dumps(e.schema),
                                              to_pgvector(v)]))
    return json.dumps({"loaded": loaded, "duplicates": len(entries) - loaded,
                       "failed": failures})


@entry_point
def feedback(plpy, log_id: int, correct: bool, sql: str | None) -> int | None:
    """Turn a judged answer into a verified example: backs ``nl2sql.feedback(...) → bigint``.

    The logged SQL is used when ``correct``, else the corrected ``sql`` when given; it is
    added as ``add_example`` does for this database (source ``feedback``).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        log_id: the ``nl2sql.query_log`` id (the trace's ``log_id``).
        correct: whether the logged SQL was right.
        sql: the corrected SQL, or None.

    Returns:
        The example's id; None when incorrect and no correction was given.

    Raises:
        plpy.Error: (through ``plpy.error``) no log row has that id, or the SQL does not
            parse or fails the check.
    """
    rows = spi.query(plpy, "SELECT question, sql FROM nl2sql.query_log WHERE id = $1", [log_id],
                     ["int8"])
    if not rows:
        _fail(plpy, f"nl2sql.feedback: no query_log row with id {log_id}")
    use = rows[0]["sql"] if correct else sql
    if not use:
        return None
    try:
        parse_one(use)
    except CandidateRefused as e:
        _fail(plpy, f"nl2sql.feedback: {e}")
    return add_example(plpy, rows[0]["question"], use, None, "postgres", source="feedback")
