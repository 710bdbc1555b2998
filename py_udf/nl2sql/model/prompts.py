"""Prompt assembly in DAIL-SQL's code representation. Sources: PET-SQL (Li et al. 2024) §3.1,
Listing 2; DAIL-SQL (Gao et al. 2023) §3.1–3.4."""

from __future__ import annotations

from ..core.errors import GateError
from ..core.spi import quote_literal
from ..core.types import Example, ForeignKey, Schema, Table, Turn


class ShownSQL(str):
    """An SQL text as the gate lets a model see it; made only in ``gate.py`` (``Gate.sql``,
    ``Gate.examples``, ``Gate.turns``, ``Gate.expression``)."""

    __slots__ = ()


def shown_sql(text: str | None) -> str:
    """Check that an SQL text about to go into a prompt came through the gate: every prompt part
    that holds SQL (examples, turns, terms, candidates, narrate's and mining's queries) passes here.

    Args:
        text: the SQL text, or None (shown as nothing).

    Returns:
        The text as a plain ``str`` (``""`` for None).

    Raises:
        GateError: ``text`` did not come through the gate's SQL path.
    """
    if text is None:
        return ""
    if not isinstance(text, ShownSQL):
        raise GateError(
            "nl2sql: an SQL text reached a prompt without passing the gate's SQL path "
            "(model.gate.Gate.sql); this is a bug in nl2sql: report it"
        )
    return str(text)


QUESTION_MARKER = "/* Answer the following: "
"""The marker before the asked question in every prompt: prompts end with it, the question and
`` */``. The scripted loopback server (``nl2sql_indexer.dev.loopback``) reads the question after it."""

SYSTEM_MESSAGE = (
    "You are a PostgreSQL expert. You answer with one PostgreSQL SELECT query and nothing else."
)
INSTRUCTION = (
    "/* Complete PostgreSQL SQL query only and with no explanation, "
    "and minimize SQL execution time while ensuring correctness. */"
)
BASIC_INSTRUCTION = (
    "-- Using valid PostgreSQL, answer the following question for the tables provided above."
)
"""The last resort's instruction (``stages.finsql.last_resort``): the prompt format of
NumbersStation's NSQL (2023) and of a user pasting CREATE TABLE statements into a chat, after
the schema without cell values (DAIL-SQL's basic representation, Gao et al. 2023 §3.1)."""


def _quote_value(v: str, data_type: str) -> str:
    numeric = data_type.split("(")[0] in {
        "integer",
        "bigint",
        "smallint",
        "numeric",
        "real",
        "double precision",
        "boolean",
    }
    if numeric:
        return v
    return quote_literal(v if len(v) <= 60 else v[:57] + "...")


def render_table(table: Table, n_values: int = 3, foreign_keys: list[ForeignKey] = ()) -> str:
    """Render one table as a commented CREATE TABLE (types, primary key, comments, cell values).
    Source: PET-SQL (Li et al. 2024) §3.1; DAIL-SQL (Gao et al. 2023) §3.1.

    Args:
        table: the table (its ``name`` is the prompt name).
        n_values: most cell values shown per column (text quoted, cut at 60 characters); 0: none.
        foreign_keys: the table's own foreign keys, each a ``FOREIGN KEY (...) REFERENCES``
            line after the primary key (a semantic model's note as its comment).

    Returns:
        The ``CREATE TABLE ... );`` text, one line per column.
    """
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
    for fk in foreign_keys:
        ref = f"{fk.ref_table}({', '.join(fk.ref_columns)})"
        note = f" -- {_one_line(fk.note)}" if fk.note else ""
        body.append((f"  FOREIGN KEY ({', '.join(fk.columns)}) REFERENCES {ref}", note))
    for i, (decl, note) in enumerate(body):
        comma = "," if i < len(body) - 1 else ""
        lines.append(decl + comma + note)
    lines.append(");")
    return "\n".join(lines)


def render_schema(schema: Schema, n_values: int = 3) -> str:
    """Render the schema in code representation, each table's foreign keys inside its CREATE
    TABLE as a DDL dump writes them. Source: PET-SQL (Li et al. 2024) §3.1 and Listing 2;
    DAIL-SQL (Gao et al. 2023) §3.1 (code representation with foreign keys).

    Args:
        schema: the tables and foreign keys to show.
        n_values: most cell values shown per column.

    Returns:
        The tables' ``CREATE TABLE`` texts; a foreign key is a ``FOREIGN KEY (c) REFERENCES
        r(rc)`` line of its table, a semantic model's relationship (``ForeignKey.note``) such a
        line with its note as a comment.
    """
    by_table: dict[str, list[ForeignKey]] = {}
    for fk in schema.foreign_keys:
        by_table.setdefault(fk.table, []).append(fk)
    return "\n".join(render_table(t, n_values, by_table.get(t.name, [])) for t in schema.tables)


def render_examples(examples: list[Example]) -> str:
    """Render the examples in DAIL organization: question/SQL pairs, no example schemas. Source:
    DAIL-SQL (Gao et al. 2023) §3.4.

    Args:
        examples: the chosen examples, in the order to show.

    Returns:
        A header line, then per example its question after ``QUESTION_MARKER`` and its SQL
        ending in one ``;``; ``""`` for no examples.
    """
    return _pairs(
        "/* Some example questions and corresponding SQL queries are provided based "
        "on similar problems: */",
        QUESTION_MARKER,
        [(ex.question, ex.sql) for ex in examples],
    )


def _pairs(header: str, marker: str, pairs: list[tuple[str, str]]) -> str:
    """A header, then per pair its question after ``marker`` and its SQL ending in one ``;``."""
    if not pairs:
        return ""
    out = [header]
    for question, sql in pairs:
        out.append(f"{marker}{question} */")
        out.append(shown_sql(sql).strip().rstrip(";") + ";")
    return "\n".join(out)


def render_values(values: list[tuple[str, str, str]]) -> str:
    """Render the cell values retrieved for the question, one line per column. Source:
    OpenSearch-SQL (Xie et al. 2024) §3.4.

    Args:
        values: ``(table prompt name, column, value)`` triples.

    Returns:
        A header line, then ``-- table.column: 'v1', 'v2'`` per column (cut at 60 characters),
        in first-seen order; ``""`` for no values.
    """
    if not values:
        return ""
    by_col: dict[tuple[str, str], list[str]] = {}
    for t, c, v in values:
        by_col.setdefault((t, c), []).append(_quote_value(v, "text"))
    lines = ["/* Cell values in the database matching words of the question: */"]
    lines += [f"-- {t}.{c}: {', '.join(vs)}" for (t, c), vs in by_col.items()]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(str(text).replace("*/", "* /").split())


def render_business(terms: list[tuple[str, str, str | None]], instructions: list[str]) -> str:
    """Render the business context: terms with their definitions, and instructions. Source: semantic
    layers (glossary, metrics, instructions in the prompt); ReBoost (Sui et al. 2023) §3.2.

    Args:
        terms: ``(term, definition, sql_expression or None)`` triples, in order.
        instructions: instruction texts, in order.

    Returns:
        A ``/* Business terms ... */`` block and a ``/* Instructions ... */`` block, newlines
        folded into spaces; ``""`` when both are empty.
    """
    parts = []
    if terms:
        lines = ["/* Business terms of this database (use these meanings): */"]
        for term, definition, sql in terms:
            line = f"-- {_one_line(term)}: {_one_line(definition)}"
            if sql:
                line += f" (SQL: {_one_line(shown_sql(sql))})"
            lines.append(line)
        parts.append("\n".join(lines))
    if instructions:
        parts.append(
            "\n".join(
                ["/* Instructions for queries on this database: */"]
                + [f"-- {_one_line(i)}" for i in instructions]
            )
        )
    return "\n\n".join(parts)


def render_semantic(objects: list[tuple[str, str, str, str, str | None, list[str]]]) -> str:
    """Render a semantic model's objects of the shown tables. Source: semantic layers (Cortex
    Analyst's semantic models: dimensions, facts, metrics, filters as named SQL expressions).

    Args:
        objects: ``(kind, table prompt name, name, SQL expression, description or None,
            synonyms)`` per object, in order; each expression ``ShownSQL`` (``Gate.expression``).

    Returns:
        A ``/* Semantic model ... */`` header and one ``-- kind table.name: SQL`` line per
        object (its description and synonyms after it), newlines folded; ``""`` for none.

    Raises:
        GateError: an expression did not come through the gate's SQL path.
    """
    if not objects:
        return ""
    lines = [
        "/* Semantic model of these tables (metrics, dimensions, filters; use these SQL "
        "expressions): */"
    ]
    for kind, table, name, sql, description, synonyms in objects:
        line = f"-- {kind} {table}.{_one_line(name)}: {_one_line(shown_sql(sql))}"
        if description:
            line += f" -- {_one_line(description)}"
        if synonyms:
            line += f" (also: {', '.join(_one_line(s) for s in synonyms)})"
        lines.append(line)
    return "\n".join(lines)


TURN_MARKER = "/* Earlier question: "
"""The marker before an earlier turn's question (follow-up questions); not ``QUESTION_MARKER``,
so the asked question stays the one after the last ``QUESTION_MARKER``."""


def render_turns(turns: list[Turn] | tuple[Turn, ...]) -> str:
    """Render a conversation's earlier turns: each question and the SQL chosen for it. Source:
    CoE-SQL (Zhang et al. 2024), multi-turn text-to-SQL.

    Args:
        turns: the earlier turns, oldest first.

    Returns:
        A header line, then per turn its question after ``TURN_MARKER`` and its SQL ending in
        one ``;``; ``""`` for no turns.
    """
    return _pairs(
        "/* This question follows up on earlier questions of the same conversation; "
        "the SQL that answered each is shown. Read the question below in their "
        "context: */",
        TURN_MARKER,
        [(t.question.strip(), t.sql) for t in turns],
    )


def build_prompt(
    question: str,
    schema: Schema,
    examples: list[Example],
    n_values: int = 3,
    evidence: str | None = None,
    values: list[tuple[str, str, str]] | None = None,
    business: str | None = None,
    turns: list[Turn] | tuple[Turn, ...] = (),
    instruction: str = INSTRUCTION,
) -> str:
    """Build the reference-enhanced prompt (the user message) for PreSQL or FinSQL.

    Source: PET-SQL (Li et al. 2024) §3.1, Listing 2; DAIL-SQL (Gao et al. 2023) §3.1–3.4.

    Args:
        question: the question (stripped here).
        schema: the schema to show.
        examples: the examples to show, in order.
        n_values: most cell values shown per column.
        evidence: the caller's hint text, or None for no hint.
        values: retrieved ``(table prompt name, column, value)`` triples, or None.
        business: the rendered business context (``render_business``), or None.
        turns: earlier turns of the question's conversation, oldest first.
        instruction: the line after the schema (``INSTRUCTION``; the last resort's
            ``BASIC_INSTRUCTION``).

    Returns:
        The user message text: the schema and the instruction first (the same for every
        question on one schema, so a server's prompt cache keeps them), then the values,
        business context, examples, turns and hint, the question line last.
    """
    parts = ["/* Given the following database schema: */", render_schema(schema, n_values)]
    parts.append(instruction)  # before all that changes with the question: a cached prefix
    if values:
        parts.append(render_values(values))
    if business:
        parts.append(business)
    ex = render_examples(examples)
    if ex:
        parts.append(ex)
    if turns:
        parts.append(render_turns(turns))
    if evidence:
        parts.append(f"/* Hint: {evidence.strip()} */")
    parts.append(f"{QUESTION_MARKER}{question.strip()} */")
    return "\n\n".join(parts)


def messages(prompt: str) -> list[dict[str, str]]:
    """Wrap a prompt as chat messages for an OpenAI-compatible endpoint.

    Args:
        prompt: the user message text (``build_prompt``).

    Returns:
        The system message (``SYSTEM_MESSAGE``) and the user message, ``{role, content}`` each.
    """
    return [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": prompt}]
