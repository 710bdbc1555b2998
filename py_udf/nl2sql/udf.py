"""Entry points of the SQL functions: each SQL function is a few lines of PL/Python that call
one function here (the SQL layer is thin). Every function takes PL/Python's
``plpy`` module; errors are raised with ``plpy.error`` carrying a message that says what went
wrong and a hint that says what to do.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from . import pipeline, version
from .core import spi
from .core.errors import (
    CandidateRefused,
    ConfigError,
    EmbeddingError,
    Nl2sqlError,
    QuestionError,
    VersionMismatch,
)
from .core.redaction import configured_secrets, redact, redact_obj
from .core.settings import get_settings, lookup, validate_setting
from .core.sqlcheck import parse_one
from .embedding import client as embed_client
from .model.llm import pick_model
from .pipeline import log_trace
from .retrieval import example_pool as ex_mod


def _fail(plpy, msg: str, hint: str | None = None):
    if hint:
        plpy.error(msg, hint=hint)
    plpy.error(msg)


def entry_point(fn):
    """Decorate an SQL entry point with the version check and the embedder choice.

    The wrapped function first checks, until it once succeeds in a backend, that this
    database's extension is the package's version (``version.check``), then reads the setting
    ``embedder`` (``configure_embedder``).

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
        configure_embedder(plpy)
        return fn(plpy, *args, **kwargs)

    return wrapper


def configure_embedder(plpy) -> str:
    """Point this backend's embeddings at the shared process or in-process, per ``embedder``.

    Only that one setting is read (a stored value that does not parse counts as the default,
    so that ``set_setting`` can still repair it); ``embed_client.configure`` also starts the
    call's record of what served its embeddings (the trace's ``embedder``).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        The mode in force: ``'shared'`` or ``'local'``.
    """
    decl = lookup("embedder")
    rows = spi.query(plpy, "SELECT value FROM nl2sql.setting WHERE key = 'embedder'")
    try:
        mode = decl.parse(rows[0]["value"]) if rows else decl.default
    except ConfigError:
        mode = decl.default
    embed_client.configure(mode)
    return mode


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
    plpy,
    question: str,
    search_path: str,
    evidence: str | None = None,
    conversation: str | None = None,
) -> str:
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
        _fail(
            plpy,
            trace.get("error") or "nl2sql: no SQL chosen",
            f"SELECT nl2sql.explain(...) shows the whole trace (log id {trace.get('log_id')})",
        )
    return trace["sql"]


@entry_point
def explain(
    plpy,
    question: str,
    search_path: str,
    evidence: str | None = None,
    conversation: str | None = None,
) -> str:
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
def ask(
    plpy,
    question: str,
    search_path: str,
    evidence: str | None = None,
    conversation: str | None = None,
) -> list[str]:
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
    from .generation.execute import fetch_rows

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
    plpy,
    question: str,
    search_path: str,
    evidence: str | None = None,
    conversation: str | None = None,
) -> str:
    """Answer a question in words: backs ``nl2sql.narrate(...) → text``.

    Refused first when setting ``send_values`` is off. Otherwise the question is answered as
    ``nl2sql`` answers it (logged), the chosen SQL's first ``narrate_rows`` rows are fetched
    read-only, pass the gate (``narrate.gated_rows``) and go with the question and
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
    from .curated import narrate as nr
    from .generation.execute import fetch_rows
    from .generation.safety import statement_remaining_s
    from .model.config import get_models

    st = get_settings(plpy)
    secrets = configured_secrets(plpy)
    try:
        nr.check_allowed(st)
        sql = nl2sql(plpy, question, search_path, evidence, conversation)
        rows = fetch_rows(
            plpy,
            sql,
            search_path,
            st.candidate_timeout_ms,
            st.narrate_rows + 1,
            st.max_result_bytes,
        )
        gated = nr.gated_rows(plpy, search_path, sql, rows[: st.narrate_rows], st.send_values)
        models = get_models(plpy, st)
        model = pick_model(models, "narrate_model", st.narrate_model)
        return nr.write_answer(
            model,
            gated.gate,
            nr.narrate_prompt(question, sql, gated, len(rows) > st.narrate_rows),
            functools.partial(spi.cancel_point, plpy),
            statement_remaining_s(plpy),
        )
    except ConfigError as e:
        _fail(plpy, redact(str(e), secrets), "see README.md, section 'Models'")
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
        from .ops import indexer  # not imported by a backend that only asks questions

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
    spi.query(
        plpy,
        "INSERT INTO nl2sql.setting (key, value) VALUES ($1, $2) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        [key, v],
        ["text", "text"],
    )
    return v


@entry_point
def add_example(
    plpy, question: str, sql: str, db_id: str | None, dialect: str, source: str = "user"
) -> int:
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
            from .core.catalog import load_schema, parse_search_path
            from .generation.safety import check_candidate_in_db

            path = parse_search_path(
                plpy, spi.query(plpy, "SELECT current_setting('search_path') AS p")[0]["p"]
            )
            schema = load_schema(plpy, path)
            tree = check_candidate_in_db(plpy, entry.sql, schema)
            entry.schema = {t.table: [c.name for c in t.columns] for t in schema.tables}
            entry = ex_mod.make_entry("local", question, entry.sql, entry.schema)
    except (CandidateRefused, ValueError) as e:
        _fail(plpy, f"nl2sql.add_example: {e}", "pass one read-only SELECT over known tables")
    from .embedding.encode import embed, to_pgvector

    vec = to_pgvector(embed([entry.masked_question])[0])
    res = spi.query(
        plpy,
        "INSERT INTO nl2sql.example (db_id, question, sql, masked_question, sql_skeleton, "
        "schema, source, embedding) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8::vector) "
        "ON CONFLICT (db_id, question, sql) DO UPDATE SET source = EXCLUDED.source RETURNING id",
        [
            entry.db_id,
            entry.question,
            entry.sql,
            entry.masked_question,
            entry.sql_skeleton,
            json.dumps(entry.schema),
            source,
            vec,
        ],
        ["text", "text", "text", "text", "text", "text", "text", "text"],
    )
    if tree is not None:  # an example of this database: shown only to roles that may read it
        from .generation.safety import record_example_relations

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
            data, dialect=dialect, tables=json.loads(tables) if tables else None
        )
    except json.JSONDecodeError as e:
        _fail(
            plpy,
            f"nl2sql.load_examples: not JSON: {e}",
            "pass a JSON array (or JSON lines) of {question, query|SQL, db_id}",
        )
    from .embedding.encode import embed, to_pgvector

    vecs = embed([e.masked_question for e in entries], cache=False)
    ins = spi.plan(
        plpy,
        "INSERT INTO nl2sql.example (db_id, question, sql, masked_question, sql_skeleton, "
        "schema, source, embedding) VALUES ($1, $2, $3, $4, $5, $6::jsonb, 'load', $7::vector) "
        "ON CONFLICT DO NOTHING RETURNING id",
        ["text", "text", "text", "text", "text", "text", "text"],
    )
    loaded = 0
    for e, v in zip(entries, vecs):
        loaded += len(
            spi.execute(
                plpy,
                ins,
                [
                    e.db_id,
                    e.question,
                    e.sql,
                    e.masked_question,
                    e.sql_skeleton,
                    json.dumps(e.schema),
                    to_pgvector(v),
                ],
            )
        )
    return json.dumps({"loaded": loaded, "duplicates": len(entries) - loaded, "failed": failures})


def _curated(plpy, what: str, fn, *args):
    """Run an administrative function of curated knowledge; its input errors become one SQL
    error naming the function, with a hint."""
    from .core.errors import NotIndexedError

    try:
        return fn(plpy, *args)
    except CandidateRefused as e:
        _fail(
            plpy,
            f"nl2sql.{what}: {e}",
            "pass one read-only SELECT (or, for a term, an SQL expression) over indexed tables "
            "the caller may read; see README, 'Verified queries, templates and business "
            "context'",
        )
    except (ValueError, NotIndexedError) as e:
        _fail(plpy, f"nl2sql.{what}: {e}")
    except EmbeddingError as e:
        _fail(plpy, f"nl2sql: {e}")


@entry_point
def add_verified_query(plpy, question: str, sql: str, dialect: str) -> int:
    """Add a verified question/SQL pair: backs ``nl2sql.add_verified_query(...) → bigint``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        question: the question the SQL answers.
        sql: one read-only query, in ``dialect``.
        dialect: the sqlglot dialect of ``sql`` (``postgres``, ``sqlite``, ``mysql``).

    Returns:
        The id in ``nl2sql.verified_query`` (the same id when the pair is added again).

    Raises:
        plpy.Error: (through ``plpy.error``) the question is empty, the SQL is not one read-only
            query over indexed relations the caller may read (DML is refused), nothing is
            indexed, or the embedding model is missing.
    """
    from .curated.verified import add_verified

    return _curated(
        plpy, "add_verified_query", add_verified, question, sql, "query", dialect or "postgres"
    )


@entry_point
def add_template(plpy, question: str, sql: str) -> int:
    """Add a parameterised template: backs ``nl2sql.add_template(question, sql) → bigint``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        question: the question, showing each parameter as ``:name``.
        sql: one read-only query whose parameters ``:name`` are compared with text or numeric
            columns (or are a LIMIT/OFFSET count).

    Returns:
        The id in ``nl2sql.verified_query`` (kind ``template``).

    Raises:
        plpy.Error: (through ``plpy.error``) as ``add_verified_query``, or a parameter is not
            compared with a text or numeric column, or the question does not show it.
    """
    from .curated.verified import add_verified

    return _curated(plpy, "add_template", add_verified, question, sql, "template")


@entry_point
def add_term(plpy, term: str, definition: str, sql_expression: str | None) -> int:
    """Add or update a business term: backs ``nl2sql.add_term(...) → bigint``.

    The verified questions that name the term are masked again (``verified.refresh_for_term``).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        term: the term (glossary entry, synonym or metric).
        definition: what it means, in words.
        sql_expression: what it means in SQL, or None.

    Returns:
        The term's id.

    Raises:
        plpy.Error: (through ``plpy.error``) the term or definition is empty, or the expression
            does not parse as one read-only SQL expression over indexed tables the caller may
            read (an unqualified column in several tables must be qualified).
    """
    from .curated.business import add_term as add
    from .curated.verified import refresh_for_term

    tid = _curated(plpy, "add_term", add, term, definition, sql_expression)
    refresh_for_term(plpy, term)
    return tid


@entry_point
def remove_term(plpy, term: str) -> bool:
    """Remove a business term (case-insensitive): backs ``nl2sql.remove_term(term) → boolean``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        term: the term.

    Returns:
        True when a term was removed.

    Raises:
        plpy.Error: (through ``plpy.error``) the embedding model is missing (verified
            questions naming it are masked again).
    """
    from .curated.verified import refresh_for_term

    gone = spi.query(
        plpy,
        "DELETE FROM nl2sql.term WHERE lower(term) = lower($1) RETURNING id",
        [term or ""],
        ["text"],
    )
    if gone:
        _curated(plpy, "remove_term", refresh_for_term, term)
    return bool(gone)


@entry_point
def add_instruction(plpy, text: str) -> int:
    """Add a database-wide instruction: backs ``nl2sql.add_instruction(text) → bigint``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        text: the instruction.

    Returns:
        The instruction's id (the same id for the same text).

    Raises:
        plpy.Error: (through ``plpy.error``) the text is empty or the embedding model is missing.
    """
    from .curated.business import add_instruction as add

    return _curated(plpy, "add_instruction", add, text)


@entry_point
def feedback(plpy, log_id: int, correct: bool, sql: str | None, verify: bool = True) -> int | None:
    """Turn a judged answer into a verified example: backs ``nl2sql.feedback(...) → bigint``.

    The logged SQL is used when ``correct``, else the corrected ``sql`` when given; it is
    added as ``add_example`` does for this database (source ``feedback``) and, with
    ``verify``, as a verified query too (``add_verified_query``, source ``feedback``): a
    question matching it is then answered without a model call.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        log_id: the ``nl2sql.query_log`` id (the trace's ``log_id``).
        correct: whether the logged SQL was right.
        sql: the corrected SQL, or None.
        verify: also add the pair as a verified query.

    Returns:
        The example's id; None when incorrect and no correction was given.

    Raises:
        plpy.Error: (through ``plpy.error``) no log row has that id, or the SQL does not
            parse or fails the check.
    """
    rows = spi.query(
        plpy, "SELECT question, sql FROM nl2sql.query_log WHERE id = $1", [log_id], ["int8"]
    )
    if not rows:
        _fail(plpy, f"nl2sql.feedback: no query_log row with id {log_id}")
    use = rows[0]["sql"] if correct else sql
    if not use:
        return None
    try:
        parse_one(use)
    except CandidateRefused as e:
        _fail(plpy, f"nl2sql.feedback: {e}")
    eid = add_example(plpy, rows[0]["question"], use, None, "postgres", source="feedback")
    if verify:
        from .curated.verified import add_verified

        _curated(
            plpy,
            "feedback",
            add_verified,
            rows[0]["question"],
            use,
            "query",
            "postgres",
            "feedback",
        )
    return eid


@entry_point
def mine_queries(plpy, limit: int) -> str:
    """Mine pg_stat_statements for question/SQL pairs: backs ``nl2sql.mine_queries(limit)``.

    See ``mining``: the most frequent read-only statements over indexed relations the caller
    may read get a question written by the first model (through the gate) and are stored as
    pending in ``nl2sql.mined_query``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        limit: most statements to write a question for.

    Returns:
        JSON text ``{considered, mined, skipped: {reason: n}, failed: [...], model}``.

    Raises:
        plpy.Error: (through ``plpy.error``) pg_stat_statements is not installed or not
            preloaded (the hint says how), no model is configured, ``limit`` is out of range,
            nothing is indexed.
    """
    from .core.errors import NotIndexedError
    from .curated.mining import mine

    secrets = configured_secrets(plpy)
    try:
        return json.dumps(redact_obj(mine(plpy, limit), secrets))
    except ConfigError as e:
        _fail(
            plpy,
            redact(str(e), secrets),
            "see README.md, sections 'Mining the query log' and 'Models'",
        )
    except NotIndexedError as e:
        _fail(plpy, str(e))


@entry_point
def approve_mined(plpy, mined_id: int, question: str | None) -> int:
    """Approve a mined pair into the pool: backs ``nl2sql.approve_mined(id, question)``.

    A query is added as ``add_example`` does for this database and as a verified query
    (both source ``mined``); a template as ``add_template`` does (source ``mined``). Both are
    checked again as the approving role.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        mined_id: the ``nl2sql.mined_query`` id.
        question: the question to keep instead of the model's, or None.

    Returns:
        The id of the verified query or template it became.

    Raises:
        plpy.Error: (through ``plpy.error``) no such id, approved already, no question (the
            model wrote none and none was given), or the pair fails the checks of
            ``add_example`` / ``add_verified_query`` / ``add_template``.
    """
    from .curated.mining import mark_approved, pending_row
    from .curated.verified import add_verified

    try:
        row = pending_row(plpy, mined_id)
    except ConfigError as e:
        _fail(plpy, str(e))
    q = (question or row["question"] or "").strip()
    if not q:
        _fail(
            plpy,
            f"nl2sql.approve_mined: mined query {mined_id} has no question (the model wrote none)",
            "pass one: SELECT nl2sql.approve_mined(id, 'question')",
        )
    eid = None
    if row["kind"] == "query":
        eid = add_example(plpy, q, row["sql"], None, "postgres", source="mined")
    vid = _curated(
        plpy, "approve_mined", add_verified, q, row["sql"], row["kind"], "postgres", "mined"
    )
    mark_approved(plpy, mined_id, q, eid, vid)
    return vid


@entry_point
def calibrate(plpy, judged: str | None) -> str:
    """Recompute the per-model reliability: backs ``nl2sql.calibrate(judged jsonb) → jsonb``.

    Source: PET-SQL (Li et al. 2024) §3.4, fine-grained voting; see ``reliability``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        judged: JSON text of judged questions from elsewhere (``reliability.parse_judged``),
            or None.

    Returns:
        JSON text of ``reliability.calibrate``'s summary.

    Raises:
        plpy.Error: (through ``plpy.error``) ``judged`` is malformed or a setting is invalid.
    """
    from .selection import reliability

    try:
        st = get_settings(plpy)
        out = reliability.calibrate(
            plpy, judged, st.candidate_timeout_ms, st.max_rows, st.max_result_bytes
        )
    except ConfigError as e:
        _fail(
            plpy,
            str(e),
            'judged: a JSON array of {"level", "candidates": '
            '[{"model", "group", "right"}]}, or NULL',
        )
    return json.dumps(out)


@entry_point
def evaluate(plpy, max_questions: int | None, note: str | None, search_path: str) -> str:
    """Evaluate the models on the verified questions: backs ``nl2sql.evaluate(...) → jsonb``.

    Source: execution accuracy (EX) of Spider (Yu et al. 2018); see ``evaluate``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        max_questions: at most this many verified queries, or None for all.
        note: a note kept with the run, or None.
        search_path: the caller's search_path text.

    Returns:
        JSON text of ``evaluate.evaluate``'s summary.

    Raises:
        plpy.Error: (through ``plpy.error``) there is no verified query the caller may use (the
            hint says how to add some), ``max_questions`` is below 1, no model is enabled, a
            setting is invalid, or the embedding model is missing.
    """
    from .core.errors import EvaluationError
    from .curated import evaluate as ev

    secrets = configured_secrets(plpy)
    try:
        return json.dumps(ev.evaluate(plpy, max_questions, note, search_path), default=str)
    except EvaluationError as e:
        _fail(plpy, str(e), ev.NO_QUESTIONS_HINT if str(e) == ev.NO_QUESTIONS else None)
    except ConfigError as e:
        _fail(plpy, redact(str(e), secrets), "see README.md, section 'Models'")
    except EmbeddingError as e:
        _fail(plpy, redact(f"nl2sql: {e}", secrets))
