"""Query-log mining: ``nl2sql.mine_queries(limit)`` turns frequent read-only queries into
pending question/SQL pairs (docs/internals/curated.md "Mining"). Source: Guo et al. 2018."""

from __future__ import annotations

import functools
import json
from dataclasses import asdict, replace
from typing import Any

from ..core import spi
from ..core.catalog import caller_schema, known_relations
from ..core.errors import CandidateRefused, ConfigError
from ..core.settings import get_settings
from ..core.sqlcheck import referenced_tables, to_sql
from ..core.types import Schema
from ..generation.db_checks import check_candidate_in_db, statement_remaining_s
from ..model.config import get_models
from ..model.gate import Gate
from ..model.llm import call_models
from ._log_statements import HIDDEN_TEXT, LoggedStatement, MinedCandidate, as_template, classify
from ._mined_questions import SYSTEM_MESSAGE, check_question, clean_question, question_prompt
from ._parameters import dummy_literal, fill

PARALLEL_CALLS = 8
"""Questions asked of the model at once."""


def _tally(skipped: dict[str, int], reason: str) -> None:
    """Count one skipped statement under ``reason`` in ``skipped``."""
    skipped[reason] = skipped.get(reason, 0) + 1


def _stat_relation(plpy) -> str:
    """The quoted name of this database's ``pg_stat_statements`` view, checked readable;
    ConfigError saying how to install it when it is not.
    """
    how = (
        "add pg_stat_statements to shared_preload_libraries in postgresql.conf (e.g. "
        "shared_preload_libraries = 'pg_cron,pg_stat_statements'), restart the server, then "
        "run CREATE EXTENSION pg_stat_statements; in this database"
    )
    rows = spi.query(
        plpy,
        "SELECT n.nspname FROM pg_catalog.pg_extension e JOIN "
        "pg_catalog.pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pg_stat_statements'",
    )
    if not rows:
        raise ConfigError(
            f"nl2sql.mine_queries: pg_stat_statements is not installed in this database: {how}"
        )
    rel = plpy.quote_ident(rows[0]["nspname"]) + ".pg_stat_statements"
    try:
        with plpy.subtransaction():
            spi.run(plpy, f"SELECT count(*) FROM {rel}")
    except plpy.SPIError as e:
        if getattr(e, "sqlstate", None) == "57014":  # the user cancelled
            raise
        raise ConfigError(
            f"nl2sql.mine_queries: pg_stat_statements cannot be read "
            f"({str(e).splitlines()[0]}): {how}"
        ) from None
    return rel


def _own_functions(plpy) -> frozenset[str]:
    """Lower-cased names of the functions of the nl2sql extension."""
    rows = spi.query(
        plpy,
        "SELECT DISTINCT lower(p.proname) AS n FROM pg_catalog.pg_depend d "
        "JOIN pg_catalog.pg_proc p ON p.oid = d.objid "
        "JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid "
        "WHERE e.extname = 'nl2sql' AND d.deptype = 'e' "
        "AND d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass",
    )
    return frozenset(r["n"] for r in rows)


def _logged_statements(plpy, rel: str) -> list[LoggedStatement]:
    """This database's statements of ``rel``, one per queryid (hidden ones as ``HIDDEN_TEXT``),
    most calls first."""
    db = (
        "dbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = "
        "pg_catalog.current_database())"
    )
    rows = spi.run(
        plpy,
        f"SELECT queryid, query, calls FROM ("
        f"SELECT queryid, min(query) AS query, sum(calls)::int8 AS calls "
        f"FROM {rel} WHERE {db} AND queryid IS NOT NULL GROUP BY queryid "
        f"UNION ALL SELECT NULL, '{HIDDEN_TEXT}', calls FROM {rel} "
        f"WHERE {db} AND queryid IS NULL) s ORDER BY calls DESC, queryid",
    )
    return [LoggedStatement(r["queryid"], r["query"] or "", int(r["calls"])) for r in rows]


def _prepare(
    plpy, st: LoggedStatement, schema: Schema, own: frozenset[str]
) -> tuple[MinedCandidate | None, str | None, str | None]:
    """``(candidate, None, None)`` for a statement worth mining (its text and SQL without the
    logged statement's comments), else ``(None, reason, detail)``: the skip reason and, for
    ``refused``/``parameters``, the check's message.
    """
    tree, reason = classify(st.query, own)
    if reason:
        return None, reason, None
    known = known_relations(schema)
    if any(n not in known for n in referenced_tables(tree)):
        return None, "not_indexed", None
    try:
        kind, sql, slots = as_template(tree, schema)
    except CandidateRefused as e:
        return None, "parameters", str(e)
    try:
        checked = fill(sql, slots, {s.name: dummy_literal(s) for s in slots}) if slots else sql
        check_candidate_in_db(plpy, checked, schema)
    except CandidateRefused as e:
        return None, "refused", str(e)
    shown = replace(st, query=to_sql(tree))  # the statement as stored: its comments removed
    return (
        MinedCandidate(shown, kind, sql, [asdict(s) for s in slots], referenced_tables(tree)),
        None,
        None,
    )


def _known(plpy) -> tuple[set, set]:
    """(queryids, SQL texts) of mined rows not to mine again (every status but ``failed``)."""
    rows = spi.query(
        plpy, "SELECT queryid, query, sql FROM nl2sql.mined_query WHERE status <> 'failed'"
    )
    return (
        {r["queryid"] for r in rows if r["queryid"] is not None},
        {r["query"] for r in rows} | {r["sql"] for r in rows},
    )


def _store(plpy, cand: MinedCandidate, question: str | None, model: str, error: str | None) -> int:
    """Insert a mined pair (``pending``, or ``failed`` with its error) or update a failed one;
    returns its id (0 when a row of the same SQL was decided meanwhile).
    """
    rows = spi.query(
        plpy,
        "INSERT INTO nl2sql.mined_query AS m (queryid, query, kind, sql, parameters, "
        "question, calls, status, model, error) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, $8, "
        "$9, $10) ON CONFLICT ((md5(sql))) DO UPDATE SET queryid = EXCLUDED.queryid, "
        "query = EXCLUDED.query, question = EXCLUDED.question, calls = EXCLUDED.calls, "
        "status = EXCLUDED.status, model = EXCLUDED.model, error = EXCLUDED.error, "
        "mined_at = now() WHERE m.status = 'failed' RETURNING m.id",
        [
            cand.statement.queryid,
            cand.statement.query,
            cand.kind,
            cand.sql,
            json.dumps(cand.parameters),
            question,
            cand.statement.calls,
            "failed" if error else "pending",
            model,
            error,
        ],
        ["int8", "text", "text", "text", "text", "text", "int8", "text", "text", "text"],
    )
    return rows[0]["id"] if rows else 0


def _select_candidates(
    plpy,
    statements: list[LoggedStatement],
    schema: Schema,
    own: frozenset[str],
    limit: int,
    skipped: dict[str, int],
) -> tuple[list[MinedCandidate], int]:
    """Walk the statements, most calls first, until ``limit`` candidates are found; count the
    skipped in ``skipped``. Returns ``(candidates, statements considered)``.
    """
    ids, texts = _known(plpy)
    out: list[MinedCandidate] = []
    considered = 0
    for st in statements:
        if len(out) >= limit:
            break
        considered += 1
        if st.queryid in ids or st.query in texts:
            _tally(skipped, "already_mined")
            continue
        cand, reason, _ = _prepare(plpy, st, schema, own)
        if cand is None:
            _tally(skipped, reason)
        elif cand.sql in texts:
            _tally(skipped, "already_mined")
        else:
            texts.add(cand.sql)
            out.append(cand)
    return out, considered


def mine(plpy, limit: int) -> dict[str, Any]:
    """Mine the query log: backs ``nl2sql.mine_queries(limit)``.

    Args:
        limit: most statements to write a question for (1..1000).

    Returns:
        ``{"considered", "mined", "skipped": {reason: n}, "failed": [{"id", "queryid", "sql",
        "error"}], "model"}``.

    Raises:
        ConfigError: pg_stat_statements is missing, no model is configured, or ``limit`` is out
            of range.
        NotIndexedError: nothing the role may read is indexed.
    """
    if limit is None or not 1 <= int(limit) <= 1000:
        raise ConfigError(f"nl2sql.mine_queries: limit must be between 1 and 1000, not {limit}")
    rel = _stat_relation(plpy)
    st = get_settings(plpy)
    model = get_models(plpy, st)[0]
    schema = caller_schema(plpy)
    gate = Gate(schema, st.send_values)
    skipped: dict[str, int] = {}
    cands, considered = _select_candidates(
        plpy, _logged_statements(plpy, rel), schema, _own_functions(plpy), int(limit), skipped
    )
    mined, failed = 0, []
    for i in range(0, len(cands), PARALLEL_CALLS):
        batch = cands[i : i + PARALLEL_CALLS]
        calls = [
            (model, gate.seal("mining", question_prompt(gate, c, schema), SYSTEM_MESSAGE))
            for c in batch
        ]
        replies = call_models(
            calls, functools.partial(spi.cancel_point, plpy), statement_remaining_s(plpy)
        )
        for c, r in zip(batch, replies):
            q = clean_question(r.text)
            err = r.error or check_question(q, c)
            rid = _store(plpy, c, None if err else q, model.name, err)
            if err:
                failed.append(
                    {"id": rid, "queryid": c.statement.queryid, "sql": c.sql, "error": err}
                )
            else:
                mined += 1
    return {
        "considered": considered,
        "mined": mined,
        "skipped": skipped,
        "failed": failed,
        "model": model.name,
    }


def pending_row(plpy, mined_id: int) -> dict[str, Any]:
    """A mined pair by id, for approval.

    Args:
        mined_id: its id.

    Returns:
        ``{id, kind, sql, question, status}``.

    Raises:
        ConfigError: no such id, or it was approved already.
    """
    rows = spi.query(
        plpy,
        "SELECT id, kind, sql, question, status FROM nl2sql.mined_query WHERE id = $1",
        [mined_id],
        ["int8"],
    )
    if not rows:
        raise ConfigError(
            f"nl2sql.approve_mined: no mined query with id {mined_id}; see "
            f"SELECT * FROM nl2sql.mined_queries"
        )
    r = dict(rows[0])
    if r["status"] == "approved":
        raise ConfigError(f"nl2sql.approve_mined: mined query {mined_id} is approved already")
    return r


def mark_approved(
    plpy, mined_id: int, question: str, example_id: int | None, verified_id: int | None
) -> None:
    """Record a pair's approval: the question as approved, what it became.

    Args:
        mined_id: its id.
        question: the approved question.
        example_id: the example pool row it became (queries), or None.
        verified_id: the verified query or template it became.
    """
    spi.query(
        plpy,
        "UPDATE nl2sql.mined_query SET status = 'approved', question = $2, "
        "error = NULL, example_id = $3, verified_id = $4, decided_at = now(), "
        "decided_by = current_user WHERE id = $1",
        [mined_id, question, example_id, verified_id],
        ["int8", "text", "int8", "int8"],
    )
