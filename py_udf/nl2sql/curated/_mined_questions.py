"""The question a mined query answers, written by a model. Source: SQL-to-question generation
(Guo et al. 2018)."""

from __future__ import annotations

from ..core.sqlcheck import parse_single
from ..core.types import Schema
from ..model.prompts import render_schema, shown_sql
from ._log_statements import MinedCandidate, template_text
from ._parameters import MARKER

MAX_QUESTION_CHARS = 500
"""Longest question kept from a model's reply."""

SYSTEM_MESSAGE = (
    "You write the natural-language question that an SQL query answers, for the example pool "
    "of a text-to-SQL system. Reply with the question only, on one line, in plain English, "
    "without SQL."
)


def clean_question(reply: str | None) -> str:
    """The question in a model's reply: its first non-empty line without a ``Question:``
    label, quotes or markup, at most ``MAX_QUESTION_CHARS`` characters.

    Args:
        reply: the model's text.

    Returns:
        The question, or ``''`` when there is none.
    """
    for line in (reply or "").replace("\x00", "").splitlines():
        line = line.strip().strip("`*# ").strip()
        if line.lower().startswith("question:"):
            line = line[len("question:") :].strip()
        line = line.strip("\"'“”").strip()
        if line:
            return line[:MAX_QUESTION_CHARS]
    return ""


def check_question(question: str, cand: MinedCandidate) -> str | None:
    """Say what is wrong with a written question, if anything.

    Args:
        question: the cleaned question.
        cand: the candidate it was written for.

    Returns:
        None when usable; else why not (empty, or a template's question that does not show each
        parameter exactly once as ``:name``).
    """
    if not question:
        return "the model wrote no question"
    if cand.kind == "template":
        names = [p["name"] for p in cand.parameters]
        shown = MARKER.findall(question)
        missing = [n for n in names if n not in shown]
        extra = sorted(set(shown) - set(names))
        if missing or extra:
            return (
                "the question must show each parameter as :name"
                + (f"; missing {', '.join(':' + n for n in missing)}" if missing else "")
                + (f"; not a parameter {', '.join(':' + n for n in extra)}" if extra else "")
            )
    return None


def _relevant_schema(schema: Schema, tables: list[str]) -> Schema:
    """The tables of ``schema`` a mined query reads (``tables``) and the foreign keys between them."""
    want = {n.lower() for n in tables}
    keep = [
        t
        for t in schema.tables
        if t.name.lower() in want or f"{t.schema}.{t.table}".lower() in want
    ]
    names = {t.name for t in keep}
    fks = [f for f in schema.foreign_keys if f.table in names and f.ref_table in names]
    return Schema(tables=keep, foreign_keys=fks)


def question_prompt(gate, cand: MinedCandidate, schema: Schema) -> str:
    """The user message asking for the question a mined query answers, every part gated.

    Args:
        gate: the call's ``gate.Gate``.
        cand: the candidate.
        schema: the role's schema (the gate's).

    Returns:
        The prompt text.
    """
    as_template = cand.kind == "template"  # masked: parameters as :name again
    shown = gate.sql(
        "mining", cand.sql, (lambda t: template_text(parse_single(t))) if as_template else None
    )
    parts = [
        "/* Tables the query reads: */",
        render_schema(_relevant_schema(schema, cand.tables)),
        "/* SQL query from this database's query log: */",
        shown_sql(shown),
    ]
    if cand.kind == "template":
        names = ", ".join(f":{p['name']}" for p in cand.parameters)
        parts.append(
            f"/* {names} are parameters: values a user gives. Show each one in the "
            f"question exactly as written, where its value goes (e.g. 'Which singers "
            f"from :country are older than :age?'). */"
        )
    parts.append(
        "/* Write the one question a user of this database would ask that this query "
        "answers exactly. Reply with the question only. */"
    )
    return "\n".join(parts)
