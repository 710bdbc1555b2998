"""Answers in words: ``nl2sql.narrate(question)`` — a model writes a short answer from the chosen
SQL's first rows.

The question is answered as ``nl2sql()`` answers it; the chosen SQL's first ``narrate_rows``
rows are fetched read-only as the calling role; they pass the value policy
(``value_policy.rows_for_model``: output columns computed from withheld cell values are left
out) and go, with the question and the SQL, to one model (setting ``narrate_model``, else the
first configured model). With ``send_values = off`` no row may reach a model, so narrate is
refused before anything runs.

Source: Oracle Select AI's ``narrate`` action; answer generation from retrieved table rows
(table question answering, e.g. TAPAS-style verbalisation) with the rows given as context.
"""
from __future__ import annotations

import json

from . import catalog
from .errors import ConfigError, ModelError, ValuesRefused
from .llm import call_models
from .settings import Settings
from .types import LLMReply, ModelConfig, Schema
from .value_policy import GatedRows, rows_for_model

SYSTEM_MESSAGE = (
    "You answer a question about a database in one to three plain sentences, using only the "
    "query result given. Do not invent numbers or names; say so when the result is empty or "
    "does not answer the question.")

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
            "nl2sql.ask(question) for the rows themselves")


def pick_model(models: list[ModelConfig], name: str) -> ModelConfig:
    """Pick the model that writes the answer.

    Args:
        models: the enabled models, PreSQL writer first.
        name: setting ``narrate_model`` ('' for the first model).

    Returns:
        The model.

    Raises:
        ConfigError: the named model is not enabled.
    """
    if not name:
        return models[0]
    for m in models:
        if m.name == name:
            return m
    raise ConfigError(f"nl2sql: setting 'narrate_model' names {name!r}, which is not an "
                      f"enabled model ({', '.join(m.name for m in models)}); fix it with "
                      f"SELECT nl2sql.set_setting('narrate_model', '<name>') or '' for the "
                      f"first model")


def gated_rows(plpy, search_path: str, sql: str, rows: list[str]) -> GatedRows:
    """The rows narrate may send: the value policy applied for the calling role.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        search_path: the caller's search_path text (the role's schema as the pipeline saw it).
        sql: the chosen SQL.
        rows: its first rows, ``row_to_json`` texts.

    Returns:
        ``value_policy.rows_for_model``'s result.
    """
    schema: Schema = catalog.load_schema(plpy, catalog.parse_search_path(plpy, search_path), 0)
    return rows_for_model(schema, sql, rows)


def narrate_prompt(question: str, sql: str, gated: GatedRows, more: bool) -> str:
    """Build the narrate request's user message: question, SQL, the gated rows.

    Args:
        question: the question as asked.
        sql: the chosen SQL.
        gated: the rows after the value policy.
        more: whether the result has more rows than shown.

    Returns:
        The message text.
    """
    parts = [f"Question: {question.strip()}", f"SQL that answered it:\n{sql.strip()}"]
    if gated.withheld:
        parts.append("Columns left out (their values may not be shown): "
                     + ", ".join(gated.withheld))
    lines = [json.dumps(r, default=str, ensure_ascii=False) if isinstance(r, dict) else str(r)
             for r in gated.rows]
    n = f"first {len(lines)} rows" if more else f"{len(lines)} row(s)"
    parts.append(f"Result ({n}, one JSON object per line):\n" + ("\n".join(lines) or "(no rows)"))
    parts.append("Answer the question in words from this result.")
    return "\n\n".join(parts)


def write_answer(model: ModelConfig, prompt: str, on_wait, budget_s) -> str:
    """Ask the model for the answer in words.

    Args:
        model: the narrating model.
        prompt: ``narrate_prompt``'s text.
        on_wait: the cancel point between wait slices.
        budget_s: seconds left before the caller's statement_timeout, or None.

    Returns:
        The answer, stripped, at most ``ANSWER_MAX_CHARS`` characters.

    Raises:
        ModelError: the model failed or answered nothing.
    """
    msgs = [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": prompt}]
    reply: LLMReply = call_models([(model, msgs)], on_wait, budget_s)[0]
    text = (reply.text or "").replace("\x00", "").strip()
    if reply.error or not text:
        raise ModelError(f"nl2sql.narrate: model {model.name} gave no answer: "
                         f"{reply.error or 'empty reply'}")
    return text if len(text) <= ANSWER_MAX_CHARS else text[:ANSWER_MAX_CHARS - 1] + "…"

