"""What retrieval finds for one question before any model call (``Context``). Sources:
OpenSearch-SQL (Xie et al. 2024) §3.4; PET-SQL (Li et al. 2024) §3.2–3.3."""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from ..core import spi
from ..core.settings import Settings
from ..core.timing import StageTimer
from ..core.types import Example, Schema
from ..curated.business import BusinessContext, retrieve_business
from ..curated.verified import VerifiedRow, as_examples, nearest
from ..embedding.encode import embed, to_pgvector
from ..embedding.value_vectors import embed_values, embed_values_async
from ..linking.pruning import column_similarities, table_scores
from ..linking.schema_linking import schema_words
from ..model.masking import masked_question
from ..retrieval.values import (
    ValueMatch,
    candidate_phrases,
    match_values,
    merge_matches,
    string_matches,
    vector_phrases,
    visible_matches,
)
from ..semantic.model import SemanticModel
from ..semantic.model import load as load_semantic


@dataclass
class Context:
    """What retrieval found for one question (before any model call)."""

    question: str  # as the prompts show it (validated, maybe rewritten)
    evidence: str | None  # the caller's hint text
    values: list[ValueMatch]  # matched cell values, merged and cut to ``value_top_k``
    masked_question: str  # schema names and strongly matched values masked
    candidates: list[Example]  # example candidates by masked-question similarity, best first
    skeletons: dict[int, str]  # example id -> its SQL skeleton
    # lookup -> ms: business_ms, values_ms, embed_ms, examples_ms, verified_lookup_ms, columns_ms
    timings: dict[str, float] = field(default_factory=dict)
    # (schema, table, column, cosine) per readable indexed column, best first (add_columns)
    column_sims: list[tuple[str, str, str, float]] | None = None
    scores: dict[str, float] | None = None  # table prompt name -> best column's cosine
    phrases: list = field(default_factory=list)  # candidate phrases (``values.Phrase``)
    found: list[ValueMatch] = field(default_factory=list)  # exact and trigram, before merging
    vector_phrases: list[int] = field(default_factory=list)  # positions in ``phrases``
    pending_vectors: Future | None = None  # their embeddings, computed in the background
    vectors_done: bool = True  # the vector lookups are done (or none were needed)
    remasked: bool = False  # a strong vector match changed the masked question (and examples)
    presql_schema: Schema | None = None  # what the PreSQL prompt showed (whole or pruned)
    business: BusinessContext = field(default_factory=BusinessContext)  # terms, instructions
    masked_vec: str | None = None  # the masked question's embedding (pgvector text)
    verified_rows: list[VerifiedRow] = field(default_factory=list)  # nearest verified queries
    verified: list[Example] = field(default_factory=list)  # those as examples, shown first
    turns: tuple = ()  # the conversation's turns the role may still read, oldest first
    # the semantic model the role may see, and what the question names of it
    semantic: SemanticModel = field(default_factory=SemanticModel)


def nearest_examples(
    plpy, masked_vec: list[float] | str, n: int
) -> tuple[list[Example], dict[int, str]]:
    """Fetch the pool examples nearest to the masked question (cosine), best first. Source: PET-SQL
    (Li et al. 2024) §3.2; DAIL-SQL (Gao et al. 2023) §3.3.

    Args:
        masked_vec: the masked question's embedding: 384 floats (all-MiniLM-L6-v2, L2-normed),
            or their pgvector text (``to_pgvector``).
        n: how many examples to fetch.

    Returns:
        ``(examples, skeletons)``: at most ``n`` ``Example`` with ``similarity`` (cosine, 4
        places), and example id -> SQL skeleton (``""`` when none).
    """
    rows = spi.query(
        plpy,
        "SELECT id, db_id, question, sql, masked_question, sql_skeleton, "
        "1 - (embedding <=> $1::vector) AS sim FROM nl2sql.visible_example "
        "WHERE embedding IS NOT NULL ORDER BY embedding <=> $1::vector LIMIT $2",
        [masked_vec if isinstance(masked_vec, str) else to_pgvector(masked_vec), n],
        ["text", "int4"],
    )
    exs = [
        Example(
            id=r["id"],
            db_id=r["db_id"],
            question=r["question"],
            sql=r["sql"],
            masked_question=r["masked_question"],
            similarity=round(float(r["sim"]), 4),
        )
        for r in rows
    ]
    return exs, {r["id"]: r["sql_skeleton"] or "" for r in rows}


def _n_candidates(st: Settings) -> int:
    """How many example candidates to fetch: enough for the prompt and for DAIL selection."""
    return max(st.k_examples, st.dail_candidates)


def _vector_lookups(phrases, found, schema: Schema, st: Settings) -> list[int]:
    """The phrases (their indexes) to look up by embedding; none when vector matches are off
    (``value_vector_min`` above 1)."""
    if st.value_vector_min > 1:
        return []
    return vector_phrases(phrases, found, schema_words(schema), st.value_vector_phrases)


def gather(plpy, question: str, evidence: str | None, schema: Schema, st: Settings) -> Context:
    """Business terms and the semantic model (its relationships join ``schema``'s foreign keys,
    the objects the question names), exact and trigram values, the masked question and the
    nearest verified queries; the phrases for vector lookups start embedding in the background.
    The pool examples come later (``add_examples``, after the fast path).

    Source: OpenSearch-SQL (Xie et al. 2024) §3.4; PET-SQL (Li et al. 2024) §3.2.

    Args:
        question, evidence: the question as the prompts show it; the caller's hint or None.
        schema: the schema the role may read (``catalog.load_schema``).
        st: the settings (``value_*``, ``term_*``, ``verified_examples``, ...).

    Returns:
        The ``Context`` (its ``timings`` hold all but ``columns_ms``; ``examples_ms`` 0.0 until
        ``add_examples``).

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    timer = StageTimer()
    with timer.stage("business_ms"):
        business = retrieve_business(plpy, question, st)
        semantic = load_semantic(plpy, schema)
        semantic.name_in(question)
    with timer.stage("values_ms"):
        phrases = candidate_phrases(question, evidence)
        found = visible_matches(
            schema, string_matches(plpy, phrases, st.value_trgm_min, schema_words(schema))
        )
        vec_idx = _vector_lookups(phrases, found, schema, st)
        values = merge_matches(found, st.value_top_k)
        masked = masked_question(question, schema, values, st.link_value_min, business.mask_phrases)
    with timer.stage("embed_ms"):
        m_vec = embed([masked])[0]
        m_text = to_pgvector(m_vec)
    with timer.stage("verified_lookup_ms"):
        near = nearest(plpy, m_text, max(st.verified_examples, 3))
    pending = embed_values_async([phrases[i].text for i in vec_idx]) if vec_idx else None
    return Context(
        question,
        evidence,
        values,
        masked,
        [],  # the examples: add_examples, after the fast path (which needs none)
        {},
        {**{k: round(v, 3) for k, v in timer.timings.items()}, "examples_ms": 0.0},
        phrases=phrases,
        found=found,
        vector_phrases=vec_idx,
        pending_vectors=pending,
        vectors_done=not vec_idx,
        business=business,
        semantic=semantic,
        masked_vec=m_text,
        verified_rows=near,
        verified=as_examples(near, st.verified_examples),
    )


def add_examples(plpy, ctx: Context, st: Settings) -> float:
    """Set ``ctx.candidates`` and ``ctx.skeletons``: the pool examples nearest to the masked
    question (``nearest_examples``). Apart from ``gather`` so that a question a verified query
    answers (the fast path) does not look them up. Source: PET-SQL (Li et al. 2024) §3.2.

    Args:
        ctx: the question's context (``masked_vec`` set by ``gather``; changed in place).
        st: the settings (``k_examples``, ``dail_candidates``).

    Returns:
        The milliseconds spent, rounded to 3 places (also added to ``ctx.timings``'s
        ``examples_ms``).
    """
    t = time.perf_counter()
    ctx.candidates, ctx.skeletons = nearest_examples(plpy, ctx.masked_vec, _n_candidates(st))
    ms = round((time.perf_counter() - t) * 1000, 3)
    ctx.timings["examples_ms"] = round(ctx.timings.get("examples_ms", 0.0) + ms, 3)
    return ms


def add_vector_values(plpy, ctx: Context, schema: Schema, st: Settings) -> float:
    """Add vector value matches for ``gather``'s phrases, re-masking when one is strong enough.
    Source: OpenSearch-SQL (Xie et al. 2024) §3.4.

    Args:
        ctx, schema, st: the question's context (changed in place), the role's schema, the
            settings.

    Returns:
        The milliseconds spent (0.0 when already done), rounded to 3 places.

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    if ctx.vectors_done:
        return 0.0
    t = time.perf_counter()
    p_vecs = (
        ctx.pending_vectors.result()
        if ctx.pending_vectors is not None
        else embed_values([ctx.phrases[i].text for i in ctx.vector_phrases])
    )
    found = ctx.found + visible_matches(
        schema,
        match_values(
            plpy,
            ctx.phrases,
            exact=False,
            vector_min=st.value_vector_min,
            vectors={i: to_pgvector(v) for i, v in zip(ctx.vector_phrases, p_vecs)},
        ),
    )
    ctx.values = merge_matches(found, st.value_top_k)
    masked = masked_question(
        ctx.question, schema, ctx.values, st.link_value_min, ctx.business.mask_phrases
    )
    if masked != ctx.masked_question:
        ctx.masked_question, ctx.remasked = masked, True
        ctx.candidates, ctx.skeletons = nearest_examples(
            plpy, embed([masked])[0], _n_candidates(st)
        )
    ctx.vectors_done, ctx.pending_vectors = True, None
    return round((time.perf_counter() - t) * 1000, 3)


def add_columns(plpy, ctx: Context, schema: Schema) -> float:
    """Set ``ctx.column_sims`` (question/column similarity) and ``ctx.scores`` (per table). Source:
    PET-SQL (Li et al. 2024) §3.3, similar columns.

    Args:
        ctx, schema: the question's context (changed in place); the role's schema.

    Returns:
        The milliseconds spent (0.0 when already set), rounded to 3 places.

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    if ctx.column_sims is not None:
        return 0.0
    t = time.perf_counter()
    q_vec = embed([ctx.question])[0]
    ctx.column_sims = column_similarities(plpy, q_vec)
    ctx.scores = table_scores(schema, ctx.column_sims)
    return round((time.perf_counter() - t) * 1000, 3)
