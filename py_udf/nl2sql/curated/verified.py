"""Verified queries and templates: adding, reading the nearest, re-masking on a term change
(docs/internals/curated.md). Source: DAIL-SQL (Gao et al. 2023) §3.3."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from sqlglot import exp

from ..core import spi
from ..core.catalog import caller_schema
from ..core.errors import CandidateRefused, QuestionError
from ..core.settings import get_settings
from ..core.sqlcheck import parse_one, to_sql, transpile
from ..core.types import Example, Schema
from ..embedding.encode import embed, to_pgvector
from ..generation.db_checks import check_candidate_in_db, relation_targets
from ..linking.schema_linking import schema_words
from ..model.gate import VERIFIED_DB
from ..model.masking import masked_question
from ..retrieval.values import (
    candidate_phrases,
    merge_matches,
    string_matches,
    visible_matches,
)
from ._parameters import (
    MARKER,
    Slot,
    dummy_literal,
    fill,
    query_slots,
    quote_markers,
    template_numbers,
    template_slots,
)
from ._question_words import question_numbers, strong_values
from .business import named_terms


@dataclass
class VerifiedRow:
    """A verified query or template as the fast path reads it.

    Attributes:
        id: its id in ``nl2sql.verified_query``.
        kind: ``query`` or ``template``.
        question: the verified question (a template's with ``:name`` markers).
        sql: the SQL as added.
        template_sql: the SQL with every parameter a named placeholder.
        slots: its parameters, value parameters in the order the question names them.
        info: ``value_phrases`` (its named values' phrases), ``constants`` (per named value that
            is no parameter, its ``[schema, table, column, value]`` matches), ``numbers`` (its
            numbers in order, a number parameter's position as ``:name``).
        masked_question: the verified question masked.
        similarity: cosine similarity of its masked question with the asked one's (4 places).
    """

    id: int
    kind: str
    question: str
    sql: str
    template_sql: str
    slots: list[Slot]
    info: dict[str, Any]
    masked_question: str
    similarity: float


def nearest(plpy, masked_vec: str, n: int) -> list[VerifiedRow]:
    """The verified queries and templates the role may use, nearest by masked question
    (view ``nl2sql.visible_verified_query``).

    Args:
        masked_vec: the asked question's masked-question embedding (pgvector text).
        n: how many at most.

    Returns:
        ``VerifiedRow`` list, most similar first.
    """
    if n <= 0:
        return []
    rows = spi.query(
        plpy,
        "SELECT id, kind, question, sql, template_sql, parameters::text AS p, "
        "question_info::text AS i, masked_question, "
        "1 - (embedding <=> $1::vector) AS sim "
        "FROM nl2sql.visible_verified_query ORDER BY embedding <=> $1::vector "
        "LIMIT $2",
        [masked_vec, n],
        ["text", "int4"],
    )
    return [
        VerifiedRow(
            r["id"],
            r["kind"],
            r["question"],
            r["sql"],
            r["template_sql"],
            [Slot(**s) for s in json.loads(r["p"])],
            json.loads(r["i"]),
            r["masked_question"],
            round(float(r["sim"]), 4),
        )
        for r in rows
    ]


def as_examples(rows: list[VerifiedRow], k: int) -> list[Example]:
    """The verified queries (not templates) among ``rows`` as few-shot examples.

    Args:
        rows: from ``nearest``, most similar first.
        k: how many at most.

    Returns:
        ``Example`` list (``db_id`` ``gate.VERIFIED_DB``, so the gate masks them as this
        database's examples), most similar first.
    """
    return [
        Example(
            id=r.id,
            db_id=VERIFIED_DB,
            question=r.question,
            sql=r.sql,
            masked_question=r.masked_question,
            similarity=r.similarity,
        )
        for r in rows
        if r.kind == "query"
    ][:k]


def _question_values(plpy, question: str, schema: Schema, st) -> list:
    """The cell values a question names as ``nl2sql()`` finds them before PreSQL: exact and
    trigram matches, merged, at most ``st.value_top_k``, as the calling role may see them.
    """
    phrases = candidate_phrases(question)
    found = string_matches(plpy, phrases, st.value_trgm_min, schema_words(schema))
    return merge_matches(visible_matches(schema, found), st.value_top_k)


def add_verified(
    plpy,
    question: str,
    sql: str,
    kind: str = "query",
    dialect: str = "postgres",
    source: str = "user",
) -> int:
    """Add (or update) a verified query or template: backs ``nl2sql.add_verified_query`` and
    ``nl2sql.add_template`` (steps: docs/internals/curated.md, "Adding").

    Args:
        question: the verified question (a template's showing each parameter as ``:name``).
        sql: the SQL (a template's with ``:name`` parameters).
        kind: ``query`` or ``template``.
        dialect: the sqlglot dialect of a query's SQL (transpiled to PostgreSQL).
        source: ``user`` or ``feedback``.

    Returns:
        The id in ``nl2sql.verified_query``.

    Raises:
        CandidateRefused: the SQL does not parse, is not one read-only query over relations the
            caller may read, or a template's parameters are wrong; the message says which.
        QuestionError: the question is empty.
        NotIndexedError: nothing is indexed.
        EmbeddingError: the embedding model is missing.
    """
    question = (question or "").strip()
    if not question:
        raise QuestionError("the question is empty")
    st = get_settings(plpy)
    schema = caller_schema(plpy)
    plain = quote_markers(question) if kind == "template" else question
    named = _named_in(plpy, question, schema, st)
    if kind == "template":
        stored = _template_to_store(sql, schema, question, named)
    else:
        stored = _query_to_store(plpy, sql, dialect, schema, question, named)
    checked = check_candidate_in_db(
        plpy,
        fill(stored.template_sql, stored.slots, {s.name: dummy_literal(s) for s in stored.slots}),
        schema,
    )
    masked = masked_question(plain, schema, named.values, st.link_value_min, named.term_phrases)
    vid = _upsert_verified(plpy, kind, question, stored, named, masked, source)
    _record_relations(plpy, vid, relation_targets(checked, schema))
    return vid


class _Named(NamedTuple):
    """What a verified question names: its cell values, the strong ones by phrase
    (``strong_values``) and its named terms as ``(term id, phrase)``."""

    values: list
    strong: dict[str, list]
    terms: list[tuple]

    @property
    def term_phrases(self) -> list[str]:
        """The phrases of the named terms."""
        return [p for _, p in self.terms]


@dataclass
class _ToStore:
    """A verified query's or template's SQL as stored, with its parameters and the question's
    constants and numbers (``question_info``)."""

    sql: str  # a template's as given; a query's as PostgreSQL
    template_sql: str  # with ``:name`` parameters
    slots: list[Slot]
    constants: list
    numbers: list[str]


def _named_in(plpy, question: str, schema: Schema, st) -> _Named:
    """The cell values and terms a verified question names (template markers left out)."""
    values = _question_values(plpy, MARKER.sub(" ", question), schema, st)
    strong = strong_values(values, schema, st.link_value_min)
    terms = named_terms(
        MARKER.sub(" ", question),
        [(r["id"], r["term"]) for r in spi.query(plpy, "SELECT id, term FROM nl2sql.visible_term")],
    )
    return _Named(values, strong, terms)


def _template_to_store(sql: str, schema: Schema, question: str, named: _Named) -> _ToStore:
    """A template as stored: its ``:name`` parameters typed by their columns."""
    tree = parse_one(sql)
    slots = template_slots(tree, schema, question)
    constants = [
        [[v.schema, v.table, v.column, v.value] for v in vs] for vs in named.strong.values()
    ]
    numbers = template_numbers(question, slots)
    return _ToStore(sql.strip(), to_sql(tree), slots, constants, numbers)


def _query_to_store(
    plpy, sql: str, dialect: str, schema: Schema, question: str, named: _Named
) -> _ToStore:
    """A verified query as stored: transpiled to PostgreSQL, checked as the adding role, its
    bindable literals made parameters (``query_slots``)."""
    stored = sql if dialect == "postgres" else transpile(sql, dialect)
    tree = parse_one(stored)
    if tree.find(exp.Placeholder):
        raise CandidateRefused("the SQL has parameters: add it with nl2sql.add_template")
    check_candidate_in_db(plpy, stored, schema)
    numbers = question_numbers(question, list(named.strong) + named.term_phrases)
    slots, constants, numbers = query_slots(tree, schema, question, named.strong, numbers)
    return _ToStore(stored, to_sql(tree), slots, constants, numbers)


def _upsert_verified(
    plpy, kind: str, question: str, stored: _ToStore, named: _Named, masked: str, source: str
) -> int:
    """Embed the masked question and insert or update the ``nl2sql.verified_query`` row;
    returns its id."""
    vec = to_pgvector(embed([masked])[0])
    info = {
        "value_phrases": list(named.strong),
        "constants": stored.constants,
        "numbers": stored.numbers,
    }
    return spi.query(
        plpy,
        "INSERT INTO nl2sql.verified_query AS v (kind, question, sql, template_sql, "
        "parameters, question_info, masked_question, embedding, source) VALUES ($1, $2, $3, $4, "
        "$5::jsonb, $6::jsonb, $7, $8::vector, $9) ON CONFLICT (kind, question, sql) DO UPDATE "
        "SET template_sql = EXCLUDED.template_sql, parameters = EXCLUDED.parameters, "
        "question_info = EXCLUDED.question_info, masked_question = EXCLUDED.masked_question, "
        "embedding = EXCLUDED.embedding, source = EXCLUDED.source, added_at = now() "
        "RETURNING v.id",
        [
            kind,
            question,
            stored.sql,
            stored.template_sql,
            json.dumps([asdict(s) for s in stored.slots]),
            json.dumps(info),
            masked,
            vec,
            source,
        ],
        ["text", "text", "text", "text", "text", "text", "text", "text", "text"],
    )[0]["id"]


def _record_relations(plpy, vid: int, targets) -> None:
    """Make the relations recorded for verified query ``vid`` equal ``targets``
    ((schema, table) pairs; only roles that may read them all see it)."""
    spi.query(
        plpy, "DELETE FROM nl2sql.verified_query_relation WHERE query_id = $1", [vid], ["int8"]
    )
    for s, t in sorted(set(targets)):
        spi.query(
            plpy,
            "INSERT INTO nl2sql.verified_query_relation (query_id, schema_name, "
            "table_name) VALUES ($1, $2, $3)",
            [vid, s, t],
            ["int8", "name", "name"],
        )


def refresh_for_term(plpy, term: str) -> int:
    """Mask and embed again the verified questions that name a term (added or removed).

    Args:
        term: the term.

    Returns:
        How many were refreshed (those whose SQL no longer passes the check are left as they are).

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    n = 0
    for r in spi.query(
        plpy, "SELECT kind, question, sql, source FROM nl2sql.verified_query ORDER BY id"
    ):
        if named_terms(MARKER.sub(" ", r["question"]), [(0, term)]):
            try:
                add_verified(plpy, r["question"], r["sql"], r["kind"], source=r["source"])
                n += 1
            except (CandidateRefused, ValueError):
                continue
    return n
