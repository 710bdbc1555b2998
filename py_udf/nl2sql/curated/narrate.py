"""Answers in words: ``nl2sql.narrate(question)`` (docs/internals/curated.md "Narrate").
Source: Oracle Select AI's ``narrate`` action."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..core import catalog, spi
from ..core.errors import ModelError, ValuesRefused
from ..core.settings import Settings
from ..core.types import LLMReply, ModelConfig, Schema
from ..generation.db_checks import statement_remaining_s
from ..generation.execute import fetch_rows
from ..model import quota
from ..model.config import get_models
from ..model.gate import Gate
from ..model.llm import call_models, pick_model
from ..model.prompts import shown_sql

SYSTEM_MESSAGE = (
    "You answer a question about a database in one to three plain sentences, using only the "
    "query result given. Do not invent numbers or names; say so when the result is empty or "
    "does not answer the question."
)

ANSWER_MAX_CHARS = 2000
"""Longest answer returned; a longer reply is cut (with an ellipsis)."""


def check_allowed(st: Settings) -> None:
    """Refuse narrate when no cell value may reach a model (setting ``send_values`` off).

    Args:
        st: the effective settings.

    Raises:
        ValuesRefused: ``send_values`` is off.
    """
    if not st.send_values:
        raise ValuesRefused(
            "nl2sql.narrate: refused: setting send_values is off, so no cell value may reach a "
            "model, and an answer in words is written by a model from the result rows; use "
            "nl2sql.ask(question) for the rows themselves"
        )


@dataclass(frozen=True)
class NarrateRows:
    """The rows narrate may send (withheld columns dropped), the ``gate`` and its ``note``."""

    gate: Gate
    rows: list[str]
    note: str | None


def gated_rows(plpy, search_path: str, sql: str, rows: list[str], send_values: bool) -> NarrateRows:
    """The rows narrate may send: the asking role's value rules applied by the gate.

    Args:
        search_path: the caller's search_path text.
        sql: the chosen SQL.
        rows: its first rows, ``row_to_json`` texts.
        send_values: setting ``send_values``.

    Returns:
        ``NarrateRows``.
    """
    schema: Schema = catalog.load_schema(plpy, catalog.parse_search_path(plpy, search_path), 0)
    gate = Gate(schema, send_values)
    kept, note = gate.rows("narrate", sql, rows)
    return NarrateRows(gate, kept, note)


def narrate_prompt(question: str, sql: str, gated: NarrateRows, more: bool) -> str:
    """Build the narrate request's user message: question, the gated SQL, the gated rows.

    Args:
        question: the question as asked.
        sql: the chosen SQL (shown as the gate's SQL path lets it: ``Gate.sql``).
        gated: the rows after the gate.
        more: whether the result has more rows than shown.

    Returns:
        The message text.
    """
    shown = gated.gate.sql("narrate", sql.strip())
    parts = [f"Question: {question.strip()}", f"SQL that answered it:\n{shown_sql(shown)}"]
    if gated.note:
        parts.append(f"Left out of the result (their values may not be shown): {gated.note}")
    n = f"first {len(gated.rows)} rows" if more else f"{len(gated.rows)} row(s)"
    parts.append(
        f"Result ({n}, one JSON object per line):\n" + ("\n".join(gated.rows) or "(no rows)")
    )
    parts.append("Answer the question in words from this result.")
    return "\n\n".join(parts)


def write_answer(
    model: ModelConfig, gate: Gate, prompt: str, on_wait, budget_s, replies: list | None = None
) -> str:
    """Ask the model for the answer in words.

    Args:
        model: the narrating model.
        gate: the call's gate, which seals the request (``Gate.seal``).
        prompt: ``narrate_prompt``'s text.
        on_wait: the cancel point between wait slices.
        budget_s: seconds left before the caller's statement_timeout, or None.
        replies: the model's reply is appended to it (for the usage), or None.

    Returns:
        The answer, stripped, at most ``ANSWER_MAX_CHARS`` characters.

    Raises:
        ModelError: the model failed or answered nothing.
    """
    msgs = gate.seal("narrate", prompt, SYSTEM_MESSAGE)
    reply: LLMReply = call_models([(model, msgs)], on_wait, budget_s)[0]
    if replies is not None:
        replies.append(reply)
    text = (reply.text or "").replace("\x00", "").strip()
    if reply.error or not text:
        raise ModelError(
            f"nl2sql.narrate: model {model.name} gave no answer: {reply.error or 'empty reply'}"
        )
    return text if len(text) <= ANSWER_MAX_CHARS else text[: ANSWER_MAX_CHARS - 1] + "…"


def answer_from_sql(
    plpy, st: Settings, question: str, sql: str, search_path: str, rows: list[str] | None = None
) -> str:
    """Take the chosen SQL's first ``narrate_rows`` rows (those of its checked execution, or
    fetched read-only as the calling role) and have the model of ``narrate_model`` answer in
    words from what passes the gate.

    Args:
        st: the settings.
        question: the question as asked.
        sql: the chosen SQL.
        search_path: the caller's search_path text.
        rows: the rows of the chosen SQL's checked execution (``row_to_json`` texts), or None
            to fetch them.

    Returns:
        The model's answer text (``write_answer``).

    Raises:
        ConfigError: ``narrate_model`` names no enabled model, or no model is configured.
        ModelError: the model failed or answered nothing.
        CandidateRefused: the SQL took a session-level advisory lock when fetched.
        plpy.SPIError: the SQL failed when fetched.
    """
    if rows is None:
        rows = fetch_rows(
            plpy,
            sql,
            search_path,
            st.candidate_timeout_ms,
            st.narrate_rows + 1,
            st.max_result_bytes,
        )
    gated = gated_rows(plpy, search_path, sql, rows[: st.narrate_rows], st.send_values)
    model = pick_model(get_models(plpy, st), "narrate_model", st.narrate_model)
    replies: list[LLMReply] = []
    answer = write_answer(
        model,
        gated.gate,
        narrate_prompt(question, sql, gated, len(rows) > st.narrate_rows),
        functools.partial(spi.cancel_point, plpy),
        statement_remaining_s(plpy),
        replies,
    )
    quota.record(plpy, 0, quota.usage_of(replies))  # its tokens, on the question's role
    return answer
