"""SQL explained in words: ``nl2sql.explain_sql(sql)`` (docs/internals/generation.md "SQL
explained in words"). Sources: AlloyDB AI's ``explain_sql``, Oracle Select AI's ``explainsql``."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlglot import exp

from ..core import catalog, spi
from ..core.errors import CandidateRefused, ModelError
from ..core.settings import Settings
from ..core.sqlcheck import to_sql
from ..core.types import LLMReply, Schema
from ..model import prompts, quota
from ..model.config import get_models
from ..model.gate import Gate
from ..model.llm import call_models, pick_model
from . import _session_state as session_state
from ._statement_kinds import TOO_MANY, write_kinds
from .db_checks import check_candidate_in_db, relation_targets, statement_remaining_s
from .execute import plan_checked

SYSTEM_MESSAGE = (
    "You explain a PostgreSQL query to a person who does not read SQL: in two to five plain "
    "sentences say which data it reads, how it filters, joins, groups and orders it, and what "
    "each row of its result means. Use the schema given; do not invent tables or columns."
)
STAGE = "explain_sql"
ASK = "Explain in words what this query does."
"""The last line of every explain_sql request (the loopback tests match it)."""

SQL_MAX_CHARS = 100_000
"""Longest SQL text explained; a longer one is refused before it is parsed."""
EXPLANATION_MAX_CHARS = 4000
"""Longest explanation returned; a longer reply is cut (with an ellipsis)."""


@dataclass(frozen=True)
class Checked:
    """A query that may be explained: its text, the caller's schema of what it reads, the gate."""

    sql: str  # the query re-written from its parse, without comments
    schema: Schema  # the relations it reads, as the calling role may see them
    gate: Gate


def check_query(
    plpy, sql: str | None, search_path: str, send_values: bool, timeout_ms: int
) -> Checked:
    """Check that ``sql`` is one read-only query over relations the calling role may read.

    The checks of a candidate (``db_checks.check_candidate_in_db``: one statement, a query,
    no write or locking clause, no volatile or refused function, only indexed relations the
    role may SELECT), after the statement-kind scan of model replies (``write_kinds``), so that
    ``DELETE ...; SELECT 1`` is refused naming DELETE.

    Args:
        sql: the query text.
        search_path: the caller's search_path text (names resolve as the caller's).
        send_values: setting ``send_values`` (the gate's rule).
        timeout_ms: the time limit of its planning (setting ``candidate_timeout_ms``).

    Returns:
        ``Checked``.

    Raises:
        CandidateRefused: empty, too long, not one read-only query, or reading a relation that
            is not indexed or that the role may not SELECT, or its planning failed, ran out of
            time or took an advisory lock (the message names why).
        plpy.SPIError: the user's cancel while it was planned.
        NotIndexedError: no table the role may SELECT is indexed.
    """
    text = one_query_text(sql, "nl2sql.explain_sql: refused: ")
    schema = catalog.load_schema(plpy, catalog.parse_search_path(plpy, search_path), 0)
    try:
        tree = check_candidate_in_db(plpy, text.rstrip().rstrip(";"), schema)
    except CandidateRefused as e:
        raise CandidateRefused(
            f"nl2sql.explain_sql: refused: only a single read-only query over indexed relations "
            f"the calling role may SELECT is explained; this one: {e}"
        ) from None
    planned(plpy, to_sql(tree), search_path, timeout_ms)
    read = {f"{s}.{t}".lower() for s, t in relation_targets(tree, schema)}
    names = {t.name for t in schema.tables if f"{t.schema}.{t.table}".lower() in read}
    shown = schema.subset(names)
    return Checked(to_sql(without_comments(tree)), shown, Gate(shown, send_values))


def one_query_text(sql: str | None, prefix: str = "") -> str:
    """The text of what should be one read-only query, before it is parsed: not empty, at most
    ``SQL_MAX_CHARS``, no statement that writes or controls the transaction or session after a
    semicolon (``write_kinds``, so that ``DELETE ...; SELECT 1`` is refused naming DELETE).

    Args:
        sql: the text.
        prefix: put before each refusal's reason (``nl2sql.explain_sql: refused: ``).

    Returns:
        The text, stripped.

    Raises:
        CandidateRefused: empty, too long, or holding such a statement (the reason says which).
    """
    text = (sql or "").strip()
    if not text:
        raise CandidateRefused(f"{prefix}the SQL text is empty")
    if len(text) > SQL_MAX_CHARS:
        raise CandidateRefused(
            f"{prefix}the SQL text has {len(text):,} characters, more than {SQL_MAX_CHARS:,}"
        )
    kinds = write_kinds(text)
    if kinds:
        what = "too many statements to check" if kinds == [TOO_MANY] else ", ".join(kinds)
        raise CandidateRefused(
            f"{prefix}only a single read-only query is run or explained; the text holds a "
            f"statement that writes or controls the transaction or session ({what})"
        )
    return text


def planned(plpy, sql: str, search_path: str, timeout_ms: int) -> None:
    """Have PostgreSQL plan the query as the caller (``EXPLAIN``, never run) under the guards of
    a candidate's execution (``execute.plan_checked``: read-only, rolled back, the time limit,
    advisory locks released): every privilege it needs, column privileges included, and every
    name resolve as they would if the caller ran it; the planner runs the stable and immutable
    functions of constants it estimates with, so planning is bounded and checked as running is.

    Args:
        sql: the checked query (``check_candidate_in_db`` passed).
        search_path: the caller's search_path text.
        timeout_ms: the time limit, in milliseconds.

    Raises:
        CandidateRefused: planning took an advisory lock, ran out of time, or PostgreSQL refused
            to plan it (its message: permission denied for table t, column c does not exist, ...).
        plpy.SPIError: the user's cancel.
    """
    p = plan_checked(plpy, sql, search_path, timeout_ms)
    if p.locks:
        why = "planning it " + session_state.refusal(p.locks)
    elif p.timed_out:
        why = (
            f"planning it took longer than candidate_timeout_ms ({timeout_ms} ms): the planner "
            "evaluates the stable and immutable functions of constants it estimates with"
        )
    elif p.error is not None:
        why = f"PostgreSQL does not plan it as the calling role: {p.error[:300]}"
    else:
        return
    raise CandidateRefused(f"nl2sql.explain_sql: refused: {why}")


def without_comments(tree: exp.Expression) -> exp.Expression:
    """A copy of a parsed query with no comment: a comment may quote any value, and the gate's
    SQL path replaces literals, not comments.

    Args:
        tree: the parsed query (not changed: it may be ``parse_shared``'s shared tree).

    Returns:
        A new tree, no node of it holding a comment (``to_sql`` then writes none).
    """
    out = tree.copy()
    for node in out.walk():
        node.comments = None
    return out


def explain_prompt(checked: Checked) -> str:
    """Build the request's user message: the schema of the relations read, the gated SQL.

    Args:
        checked: ``check_query``'s result.

    Returns:
        The message text: the relations' ``CREATE TABLE`` (no cell values), the SQL as the
        gate's SQL path shows it (``Gate.sql``), and ``ASK``.
    """
    shown = prompts.shown_sql(checked.gate.sql(STAGE, checked.sql))
    return "\n\n".join(
        [
            "/* The relations the query reads: */\n" + prompts.render_schema(checked.schema, 0),
            "/* The query: */\n" + shown,
            ASK,
        ]
    )


def explain(plpy, st: Settings, sql: str | None, search_path: str) -> str:
    """Explain one read-only query in words, as the calling role (``nl2sql.explain_sql``).

    Args:
        st: the settings (``narrate_model`` picks the model, ``send_values`` the gate's rule).
        sql: the query text.
        search_path: the caller's search_path text.

    Returns:
        The model's explanation, stripped, at most ``EXPLANATION_MAX_CHARS`` characters.

    Raises:
        CandidateRefused: as ``check_query``.
        NotIndexedError: nothing the role may read is indexed.
        ConfigError: no model is configured, or ``narrate_model`` names no enabled model.
        ModelError: the model failed or answered nothing.
        QuotaExceeded: the role is over its quota (nothing sent).
    """
    checked = check_query(plpy, sql, search_path, st.send_values, st.candidate_timeout_ms)
    model = pick_model(get_models(plpy, st), "narrate_model", st.narrate_model)
    msgs = checked.gate.seal(STAGE, explain_prompt(checked), SYSTEM_MESSAGE)
    taken = quota.take(plpy, quota.QUESTION)  # a question of the role's quota, with its tokens
    if taken.get("limited"):
        quota.take(plpy, quota.TOKENS)
    on_wait = functools.partial(spi.cancel_point, plpy)
    reply: LLMReply = call_models([(model, msgs)], on_wait, statement_remaining_s(plpy))[0]
    quota.record(plpy, 0 if taken.get("counted") else 1, quota.usage_of([reply]))
    text = (reply.text or "").replace("\x00", "").strip()
    if reply.error or not text:
        raise ModelError(
            f"nl2sql.explain_sql: model {model.name} gave no explanation: "
            f"{reply.error or 'empty reply'}"
        )
    if len(text) > EXPLANATION_MAX_CHARS:
        text = text[: EXPLANATION_MAX_CHARS - 1] + "…"
    return text
