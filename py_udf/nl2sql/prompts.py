"""Prompt assembly: PET-SQL's reference-enhanced prompt (PreSQL) and the linked-schema prompt
(FinSQL), both in DAIL-SQL's code representation with DAIL organization of examples.

Sources: PET-SQL (Li et al. 2024) §3.1 and Listing 2 — instruction "minimize SQL execution time
while ensuring correctness", schema as CREATE TABLE, 3 cell values per column, foreign keys;
DAIL-SQL (Gao et al. 2023) §3.1–3.4 — code representation, "no explanation" rule, examples as
question/SQL pairs without their schemas.
"""
from __future__ import annotations

from .spi import quote_literal
from .types import Example, Schema, Table

QUESTION_MARKER = "/* Answer the following: "
"""The marker before the asked question in every prompt: prompts end with it, the question and
`` */``. The scripted loopback server (``nl2sql_indexer.loopback``) reads the question after it."""

SYSTEM_MESSAGE = (
    "You are a PostgreSQL expert. You answer with one PostgreSQL SELECT query and nothing else."
)
INSTRUCTION = (
    "/* Complete PostgreSQL SQL query only and with no explanation, "
    "and minimize SQL execution time while ensuring correctness. */"
)


def _quote_value(v: str, data_type: str) -> str:
    numeric = data_type.split("(")[0] in {
        "integer", "bigint", "smallint", "numeric", "real", "double precision", "boolean",
    }
    if numeric:
        return v
    return quote_literal(v if len(v) <= 60 else v[:57] + "...")


def render_table(table: Table, n_values: int = 3) -> str:
    """One table as a commented CREATE TABLE: column types, primary key, comments and up to
    ``n_values`` cell values per column (PET-SQL's cell-value references)."""
    lines = []
    header = f"CREATE TABLE {table.name} ("
    if table.comment:
        header += f"  -- {table.comment}"
    lines.append(header)
    pks = [c.name for c in table.columns if c.is_primary_key]
    body = []
    for c in table.columns:
        notes = []
        if c.comment:
            notes.append(c.comment)
        if c.sample_values and n_values > 0:
            vals = ", ".join(_quote_value(v, c.data_type) for v in c.sample_values[:n_values])
            notes.append(f"values: {vals}")
        body.append((f"  {c.name} {c.data_type}", " -- " + "; ".join(notes) if notes else ""))
    if pks:
        body.append((f"  PRIMARY KEY ({', '.join(pks)})", ""))
    for i, (decl, note) in enumerate(body):
        comma = "," if i < len(body) - 1 else ""
        lines.append(decl + comma + note)
    lines.append(");")
    return "\n".join(lines)


def render_schema(schema: Schema, n_values: int = 3) -> str:
    """The schema in code representation followed by foreign-key lines (PET-SQL Listing 2)."""
    parts = [render_table(t, n_values) for t in schema.tables]
    if schema.foreign_keys:
        parts.append("/* Foreign keys: */")
        for fk in schema.foreign_keys:
            parts.append(
                f"-- {fk.table}({', '.join(fk.columns)}) REFERENCES "
                f"{fk.ref_table}({', '.join(fk.ref_columns)})"
            )
    return "\n".join(parts)


def render_examples(examples: list[Example]) -> str:
    """DAIL organization: question/SQL pairs only, no example schemas."""
    if not examples:
        return ""
    out = ["/* Some example questions and corresponding SQL queries are provided based on "
           "similar problems: */"]
    for ex in examples:
        out.append(f"{QUESTION_MARKER}{ex.question} */")
        out.append(ex.sql.strip().rstrip(";") + ";")
    return "\n".join(out)


def render_values(values: list[tuple[str, str, str]]) -> str:
    """Cell values retrieved for the question (OpenSearch-SQL §3.4), one line per column:
    ``-- table.column: 'v1', 'v2'``; ``values`` are (table, column, value) triples."""
    if not values:
        return ""
    by_col: dict[tuple[str, str], list[str]] = {}
    for t, c, v in values:
        by_col.setdefault((t, c), []).append(_quote_value(v, "text"))
    lines = ["/* Cell values in the database matching words of the question: */"]
    lines += [f"-- {t}.{c}: {', '.join(vs)}" for (t, c), vs in by_col.items()]
    return "\n".join(lines)


def build_prompt(question: str, schema: Schema, examples: list[Example], n_values: int = 3,
                 evidence: str | None = None,
                 values: list[tuple[str, str, str]] | None = None) -> str:
    """The reference-enhanced prompt: schema with values and FKs, retrieved cell values
    (``values``: (table, column, value) triples), examples, instruction, question.

    Returns the user message text. The question always comes last, after ``QUESTION_MARKER``.
    Used for PreSQL (full or pruned schema) and FinSQL (linked schema only).
    """
    parts = ["/* Given the following database schema: */", render_schema(schema, n_values)]
    if values:
        parts.append(render_values(values))
    ex = render_examples(examples)
    if ex:
        parts.append(ex)
    if evidence:
        parts.append(f"/* Hint: {evidence.strip()} */")
    parts.append(INSTRUCTION)
    parts.append(f"{QUESTION_MARKER}{question.strip()} */")
    return "\n\n".join(parts)


def messages(prompt: str) -> list[dict[str, str]]:
    """Chat messages for an OpenAI-compatible endpoint."""
    return [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": prompt}]
