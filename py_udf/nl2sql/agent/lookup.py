"""What an agent looks up before it writes SQL: which columns hold a value like a literal
(``search_values``: the value index, exact, trigram and vector, as the role may see it), one
table's description (``describe_table``: columns, keys, join paths, row estimate, the sample
values the gate allows) and what the DBA curated (``semantic_context``: the semantic model,
the verified queries nearest to a question). Sources: the value lookup of OpenSearch-SQL (Xie et al. 2024) §3.4;
dbt-mcp's and postgres-mcp's table tools (docs/mcp.md)."""

from __future__ import annotations

from typing import Any

from ..core import spi
from ..core.errors import QuestionError
from ..core.settings import get_settings
from ..curated.verified import as_examples, nearest
from ..embedding.encode import embed, to_pgvector
from ..embedding.value_vectors import embed_values
from ..linking.schema_linking import schema_words
from ..model.masking import masked_question
from ..retrieval.values import (
    Phrase,
    candidate_phrases,
    match_values,
    merge_matches,
    string_matches,
    visible_matches,
)
from ..semantic.model import load as load_semantic
from .view import DATA_NOTICE, STAGE, AgentView

MAX_TEXT_CHARS = 200
"""Longest literal ``search_values`` looks up (as long as a value phrase of a question)."""
MAX_K = 100
"""Most matches ``search_values`` returns."""
MAX_QUESTION_CHARS = 4000
"""Longest question ``semantic_context`` embeds (setting ``question_max_chars``' default)."""


def search_values(plpy, text: str | None, k: int, search_path: str) -> dict[str, Any]:
    """The indexed cell values most like ``text``, with the column holding each. Only columns
    whose values the role may SELECT and the value policy lets reach a model are searched
    (``nl2sql._match_values``), and a row-security table's value only when a row the role reads
    holds it: a search is never a membership oracle for a withheld or unreadable column.

    Args:
        text: the literal, at most ``MAX_TEXT_CHARS`` characters.
        k: most matches, 1..``MAX_K``.
        search_path: the caller's search_path text.

    Returns:
        ``{"matches": [{"schema", "table", "column", "value", "score", "how"}], "data_notice"}``
        best first; no match when setting ``send_values`` is off (``values_withheld`` says so).

    Raises:
        QuestionError: empty or too long a text, ``k`` out of range.
        NotIndexedError: nothing the role may read is indexed.
        EmbeddingError: the embedding model is missing.
    """
    text = (text or "").strip()
    if not text or len(text) > MAX_TEXT_CHARS:
        raise QuestionError(f"search_values: give a text of 1 to {MAX_TEXT_CHARS} characters")
    k = 10 if k is None else int(k)  # SQL NULL: the default
    if not 1 <= k <= MAX_K:
        raise QuestionError(f"search_values: k must be between 1 and {MAX_K}")
    view, st = AgentView(plpy, search_path, mode="gated"), get_settings(plpy)
    if not st.send_values:
        return {"matches": [], "values_withheld": "setting send_values is off"}
    phrases = [Phrase(text, "quoted")]
    found = string_matches(plpy, phrases, st.value_trgm_min)
    if st.value_vector_min <= 1:
        vec = {0: to_pgvector(embed_values([text])[0])}
        found += match_values(
            plpy, phrases, exact=False, vectors=vec, vector_min=st.value_vector_min, per_phrase=k
        )
    best = merge_matches(visible_matches(view.schema, found), int(k))
    keys = ("schema", "table", "column", "value", "score", "how")
    return {
        "matches": [{key: getattr(m, key) for key in keys} for m in best],
        "data_notice": DATA_NOTICE,
    }


def _table_of(view: AgentView, name: str):
    """The role's indexed table called ``name`` (as its SQL names it, or ``schema.table``)."""
    low = name.strip().lower()
    for t in view.schema.tables:
        if low in (t.name.lower(), f"{t.schema}.{t.table}".lower()):
            return t
    known = ", ".join(t.name for t in view.schema.tables[:50])
    raise QuestionError(
        f"describe_table: no indexed table {name!r} this role may read; its tables: {known}"
    )


def _joins(view: AgentView, name: str) -> list[dict[str, Any]]:
    """The foreign keys from and to table ``name`` (prompt names): the join paths."""
    out = []
    for fk in view.schema.foreign_keys:
        if name in (fk.table, fk.ref_table):
            out.append(
                {
                    "from": fk.table,
                    "columns": fk.columns,
                    "to": fk.ref_table,
                    "ref_columns": fk.ref_columns,
                    "note": fk.note,
                }
            )
    return out


def describe_table(plpy, name: str | None, search_path: str, for_model: bool) -> dict[str, Any]:
    """One table as the role may see it: columns (type, comment, key, sample values the gate
    allows), foreign keys to and from it, the row estimate.

    Args:
        name: the table, as the role's SQL names it or ``schema.table``.
        search_path: the caller's search_path text.
        for_model: the reader is a model (the gate applies unless ``agent_values = role``).

    Returns:
        ``{"schema", "table", "name", "comment", "rows", "columns": [{"name", "type",
        "comment", "primary_key", "sample_values", "values_withheld"}], "foreign_keys",
        "data_notice"}``.

    Raises:
        QuestionError: no such indexed table the role may read.
        NotIndexedError: nothing the role may read is indexed.
    """
    view = AgentView(plpy, search_path, mode=None if for_model else "role", n_values=5)
    t = _table_of(view, name or "")
    rows = spi.query(
        plpy,
        "SELECT n_rows FROM nl2sql.visible_table WHERE schema_name = $1 AND table_name = $2",
        [t.schema, t.table],
        ["text", "text"],
    )
    withheld = set(view.report()["columns"]) if view.gate is not None else set()
    cols = [
        {
            "name": c.name,
            "type": c.data_type,
            "comment": c.comment,
            "primary_key": c.is_primary_key,
            "sample_values": view.samples(c.sample_values),
            "values_withheld": f"{t.schema}.{t.table}.{c.name}" in withheld,
        }
        for c in t.columns
    ]
    return {
        "schema": t.schema,
        "table": t.table,
        "name": t.name,
        "comment": t.comment,
        "rows": rows[0]["n_rows"] if rows else None,
        "columns": cols,
        "foreign_keys": _joins(view, t.name),
        "data_notice": DATA_NOTICE,
    }


def _semantic_part(view: AgentView, plpy) -> dict[str, Any]:
    """The semantic model's objects and relationships over the role's tables, expressions
    through the gate's SQL path (``SemanticModel.gated``) when values are gated."""
    sm = load_semantic(plpy, view.schema)
    shown = sm.gated(view.gate, STAGE) if view.gate is not None else {}
    objects = [
        {
            "kind": o.kind,
            "name": o.name,
            "table": o.table,
            "expression": str(shown.get(o.id, o.sql)),
            "description": o.description,
            "synonyms": o.synonyms,
        }
        for o in sm.objects
    ]
    rels = [
        {"name": n, "from": fk.table, "columns": fk.columns, "to": fk.ref_table,
         "ref_columns": fk.ref_columns, "note": fk.note}
        for n, fk in sm.relationships
    ]  # fmt: skip
    return {"objects": objects, "relationships": rels}


def _verified_part(plpy, view: AgentView, question: str, k: int) -> list[dict[str, Any]]:
    """The verified queries nearest to ``question`` by masked question (the fast path's
    lookup), shown as examples are shown to a model (``Gate.examples``) when values are gated."""
    st = get_settings(plpy)
    phrases = candidate_phrases(question, None)
    found = string_matches(plpy, phrases, st.value_trgm_min, schema_words(view.schema))
    values = merge_matches(found, st.value_top_k)
    masked = masked_question(question, view.schema, values, st.link_value_min)
    rows = nearest(plpy, to_pgvector(embed([masked])[0]), k)
    examples = as_examples(rows, k)
    if view.gate is not None:
        examples = view.gate.examples(STAGE, examples)
    return [
        {"id": e.id, "question": e.question, "sql": str(e.sql), "similarity": e.similarity}
        for e in examples
    ]


def semantic_context(
    plpy, question: str | None, k: int, search_path: str, for_model: bool
) -> dict[str, Any]:
    """What the DBA curated that an agent writing its own SQL should know: the semantic model's
    metrics, dimensions, facts, filters and relationships over the tables the role may read,
    and, given a question, the verified queries nearest to it with their SQL.

    Args:
        question: the question, or None for the semantic model alone.
        k: most verified queries, 1..20.
        search_path: the caller's search_path text.
        for_model: the reader is a model: expressions and verified SQL pass the gate (a
            verified query that reads a withheld column is shown with its masked question and
            its SQL's literals replaced), unless setting ``agent_values`` is ``role``.

    Returns:
        ``{"semantic_model": {"objects", "relationships"}, "verified_queries": [{"id",
        "question", "sql", "similarity"}]}``.

    Raises:
        QuestionError: ``k`` out of range, a question over ``MAX_QUESTION_CHARS``.
        NotIndexedError: nothing the role may read is indexed.
        EmbeddingError: a question given and no embedding model.
    """
    k = 5 if k is None else int(k)  # SQL NULL: the default
    if not 1 <= k <= 20:
        raise QuestionError("semantic_context: k must be between 1 and 20")
    if question is not None and len(question) > MAX_QUESTION_CHARS:
        raise QuestionError(
            f"semantic_context: the question has over {MAX_QUESTION_CHARS} characters"
        )
    view = AgentView(plpy, search_path, mode=None if for_model else "role")
    out = {"semantic_model": _semantic_part(view, plpy), "verified_queries": []}
    if question and question.strip():
        out["verified_queries"] = _verified_part(plpy, view, question.strip(), int(k))
    return out
