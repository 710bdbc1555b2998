"""The retrieval stages of one question, as ``pipeline.answer()`` and ``nl2sql.retrieve()``
run them: exact and trigram value retrieval → masking → example candidates → PreSQL prompt
(schema pruned to the token budget; pruning computes the question/column similarity it needs)
→ while PreSQL is out: vector value retrieval (re-masking and new example candidates when a
match is strong) and question/column similarity → after PreSQL: schema linking and DAIL
selection → FinSQL prompt.

Sources: OpenSearch-SQL (Xie et al. 2024) §3.4 (values); PET-SQL (Li et al. 2024) §3.2–3.3
(masked-question examples, PreSQL schema linking); DAIL-SQL (Gao et al. 2023) §3.3 (DAIL
selection).
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from ..core import catalog, spi
from ..core.settings import Settings, get_settings
from ..core.timing import StageTimer
from ..core.types import Example, Schema
from ..curated.business import BusinessContext, retrieve_business
from ..curated.verified import VerifiedRow, as_examples, nearest
from ..embedding.encode import embed, embed_async, to_pgvector
from ..model import prompts
from ..model.gate import Gate
from .example_selection import Selection, dail_select, presql_skeleton
from .linking import Linked, link_schema, linking_values, schema_words
from .masking import masked_question
from .pruning import column_similarities, estimate_tokens, prune_schema, table_scores
from .question import validate_question
from .values import (
    ValueMatch,
    candidate_phrases,
    match_values,
    merge_matches,
    string_matches,
    vector_phrases,
)


@dataclass
class Context:
    """What retrieval found for one question (before any model call).

    Attributes:
        question: the (validated, possibly rewritten) question.
        evidence: the caller's hint text, or None.
        values: matched cell values, merged and cut to ``value_top_k`` (exact and trigram
            first; vector matches added by ``add_vector_values``).
        masked_question: the question with schema names and strongly matched values masked.
        candidates: example candidates by masked-question similarity, best first.
        skeletons: example id -> its SQL skeleton.
        timings: stage -> milliseconds (``values_ms``, ``embed_ms``, ``examples_ms``,
            ``columns_ms``).
        column_sims: ``(schema, table, column, cosine similarity)`` for every readable indexed
            column, best first; None until ``add_columns`` has run.
        scores: table prompt name -> its best column's similarity with the question; None
            until ``add_columns`` has run.
        phrases: the candidate phrases of the question and evidence (retrieval.Phrase).
        found: the exact and trigram matches, before merging.
        vector_phrases: positions in ``phrases`` chosen for vector (embedding) lookups.
        pending_vectors: a Future of their embeddings (computed in the background), or None.
        vectors_done: True once the vector lookups are done (or none were needed).
        remasked: True when a strong vector match changed the masked question (and examples).
        presql_schema: the schema the PreSQL prompt showed (``presql_prompt`` sets it; pruned
            or whole); None before.
        business: the business terms and instructions for the question (``business.py``).
        masked_vec: the masked question's embedding (pgvector text), or None.
        verified_rows: the verified queries and templates nearest by masked question
            (``verified.nearest``), for the fast path.
        verified: the nearest verified queries as few-shot examples, shown first
            (``verified_examples``).
        turns: the conversation's earlier turns (``types.Turn``), shown in both prompts.
    """

    question: str
    evidence: str | None
    values: list[ValueMatch]
    masked_question: str
    candidates: list[Example]  # by masked-question similarity, best first
    skeletons: dict[int, str]  # example id -> SQL skeleton
    timings: dict[str, float] = field(default_factory=dict)
    # question/column similarity (add_columns): None until computed — the pipeline computes it
    # while the PreSQL call is out, unless pruning the PreSQL schema needs it first
    column_sims: list[tuple[str, str, str, float]] | None = None
    scores: dict[str, float] | None = None  # table prompt name -> similarity with the question
    # embedding (vector) value lookups, done by add_vector_values while PreSQL is out
    phrases: list = field(default_factory=list)
    found: list[ValueMatch] = field(default_factory=list)  # exact and trigram matches
    vector_phrases: list[int] = field(default_factory=list)  # positions in ``phrases``
    pending_vectors: Future | None = None  # their embeddings (background)
    vectors_done: bool = True
    remasked: bool = False  # a strong vector match changed the masked question (and examples)
    presql_schema: Schema | None = None  # what the PreSQL prompt showed (presql_prompt)
    business: BusinessContext = field(default_factory=BusinessContext)
    masked_vec: str | None = None
    verified_rows: list[VerifiedRow] = field(default_factory=list)
    verified: list[Example] = field(default_factory=list)
    turns: tuple = ()  # earlier turns of the conversation (types.Turn), oldest first


def value_triples(
    schema: Schema, values: list[ValueMatch], tables: set[str] | None = None
) -> list[tuple[str, str, str]]:
    """List matched values as ``(table prompt name, column, value)`` for the prompt.

    Args:
        schema: the schema whose prompt names are used.
        values: the matched cell values.
        tables: prompt names of the tables whose values to keep; None keeps all. Values of
            tables not in ``schema`` are always dropped.

    Returns:
        One ``(table prompt name, column, value)`` triple per kept value, in ``values`` order.
    """
    names = {(t.schema, t.table): t.name for t in schema.tables}
    out = []
    for v in values:
        name = names.get((v.schema, v.table))
        if name and (tables is None or name in tables):
            out.append((name, v.column, v.value))
    return out


def retrieve_examples(
    plpy, masked_vec: list[float], n: int
) -> tuple[list[Example], dict[int, str]]:
    """Fetch the pool examples nearest to the masked question (cosine), best first.

    Reads ``nl2sql.visible_example`` (examples with an embedding).

    Source: PET-SQL (Li et al. 2024) §3.2, examples retrieved by masked-question embedding;
    DAIL-SQL (Gao et al. 2023) §3.3, masked-question similarity.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        masked_vec: the masked question's embedding: 384 floats, all-MiniLM-L6-v2,
            L2-normalised.
        n: how many examples to fetch.

    Returns:
        ``(examples, skeletons)``: at most ``n`` ``Example`` with ``similarity`` (cosine,
        4 places), best first, and example id -> SQL skeleton (``""`` when none).
    """
    rows = spi.query(
        plpy,
        "SELECT id, db_id, question, sql, masked_question, sql_skeleton, "
        "1 - (embedding <=> $1::vector) AS sim FROM nl2sql.visible_example "
        "WHERE embedding IS NOT NULL ORDER BY embedding <=> $1::vector LIMIT $2",
        [to_pgvector(masked_vec), n],
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


def first_examples(
    verified: list[Example], examples: list[Example], k: int | None = None
) -> list[Example]:
    """The few-shot examples with the verified queries first.

    Args:
        verified: verified queries as examples (``verified.as_examples``), most similar first.
        examples: the other examples, in the order to show.
        k: how many at most; None keeps all.

    Returns:
        ``verified``, then the examples whose SQL is not one of theirs, cut to ``k``.
    """
    seen = {e.sql.strip().rstrip(";") for e in verified}
    out = list(verified) + [e for e in examples if e.sql.strip().rstrip(";") not in seen]
    return out if k is None else out[:k]


def _n_candidates(st: Settings) -> int:
    """How many example candidates to fetch: enough for the prompt and for DAIL selection."""
    return max(st.k_examples, st.dail_candidates)


def _masked(
    question: str,
    schema: Schema,
    values: list[ValueMatch],
    vmin: float,
    extra: list[str] | tuple[str, ...] = (),
) -> str:
    """The masked question (``masking.masked_question``): schema names, the phrases of matched
    values and ``extra`` phrases (business terms named in the question) masked."""
    return masked_question(question, schema, values, vmin, extra)


def retrieve_context(
    plpy, question: str, evidence: str | None, schema: Schema, st: Settings
) -> Context:
    """Retrieve what the PreSQL prompt needs: value matches, masked question, examples.

    Order: business terms and instructions (``business.retrieve_business``); exact and trigram
    value lookups (no embedding); the masked question from them and the terms the question
    names, its embedding, its examples and the nearest verified queries; then the phrases chosen for vector lookups
    (retrieval.vector_phrases) start embedding in a background thread (ONNX Runtime releases
    the GIL), for ``add_vector_values``. Embedding (vector) value matches are
    ``add_vector_values`` and question/column similarity is ``add_columns``; the pipeline runs
    both while the PreSQL call is out.

    Source: OpenSearch-SQL (Xie et al. 2024) §3.4, value retrieval; PET-SQL (Li et al. 2024)
    §3.2, masked-question example retrieval.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        question: the validated question.
        evidence: the caller's hint text, or None (its phrases are looked up too).
        schema: the schema the role may read (``catalog.load_schema``).
        st: the settings; used: ``value_top_k``, ``value_trgm_min``, ``value_vector_min``,
            ``value_vector_phrases``, ``link_value_min``, ``k_examples``, ``dail_candidates``,
            ``verified_examples``, ``term_top_k``, ``term_min_similarity``,
            ``instruction_top_k``.

    Returns:
        A ``Context`` with ``values``, ``masked_question``, ``candidates``, ``skeletons``,
        ``business``, ``masked_vec``, ``verified_rows``, ``verified`` and ``timings``
        (milliseconds: ``business_ms``, ``values_ms``, ``embed_ms``, ``examples_ms``,
        ``verified_lookup_ms``).

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    timer = StageTimer()
    trgm_min, vector_min = st.value_trgm_min, st.value_vector_min
    with timer.stage("business_ms"):
        business = retrieve_business(plpy, question, st)
    with timer.stage("values_ms"):
        phrases = candidate_phrases(question, evidence)
        found = string_matches(plpy, phrases, trgm_min)
        vec_idx = (
            vector_phrases(phrases, found, schema_words(schema), st.value_vector_phrases)
            if vector_min <= 1
            else []
        )
        values = merge_matches(found, st.value_top_k)
        masked = _masked(question, schema, values, st.link_value_min, business.mask_phrases)
    with timer.stage("embed_ms"):
        m_vec = embed([masked])[0]
    with timer.stage("examples_ms"):
        cands, skels = retrieve_examples(plpy, m_vec, _n_candidates(st))
    with timer.stage("verified_lookup_ms"):
        near = nearest(plpy, to_pgvector(m_vec), max(st.verified_examples, 3))
    pending = embed_async([phrases[i].text for i in vec_idx]) if vec_idx else None
    return Context(
        question,
        evidence,
        values,
        masked,
        cands,
        skels,
        {k: round(v, 3) for k, v in timer.timings.items()},
        phrases=phrases,
        found=found,
        vector_phrases=vec_idx,
        pending_vectors=pending,
        vectors_done=not vec_idx,
        business=business,
        masked_vec=to_pgvector(m_vec),
        verified_rows=near,
        verified=as_examples(near, st.verified_examples),
    )


def add_vector_values(plpy, ctx: Context, schema: Schema, st: Settings) -> float:
    """Add embedding (vector) value matches for the phrases ``retrieve_context`` chose.

    The phrases' embeddings (started in the background) are looked up in the value index, the
    matches are merged into ``ctx.values``, and a match strong enough to mask
    (≥ ``link_value_min``) re-masks the question and fetches its examples again
    (``ctx.remasked``). The pipeline runs this while the PreSQL call is out: the PreSQL prompt
    shows exact and trigram matches; schema linking, DAIL selection, FinSQL and value
    alignment see all. Does nothing when already done.

    Source: OpenSearch-SQL (Xie et al. 2024) §3.4, vector value retrieval (paraphrases such as
    "USA" for 'United States').

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        ctx: the question's context, changed in place.
        schema: the schema the role may read.
        st: the settings (``value_vector_min``, ``value_top_k``, ``link_value_min``,
            ``k_examples``, ``dail_candidates``).

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
        else embed([ctx.phrases[i].text for i in ctx.vector_phrases])
    )
    found = ctx.found + match_values(
        plpy,
        ctx.phrases,
        exact=False,
        vector_min=st.value_vector_min,
        vectors={i: to_pgvector(v) for i, v in zip(ctx.vector_phrases, p_vecs)},
    )
    ctx.values = merge_matches(found, st.value_top_k)
    masked = _masked(ctx.question, schema, ctx.values, st.link_value_min, ctx.business.mask_phrases)
    if masked != ctx.masked_question:
        ctx.masked_question, ctx.remasked = masked, True
        ctx.candidates, ctx.skeletons = retrieve_examples(
            plpy, embed([masked])[0], _n_candidates(st)
        )
    ctx.vectors_done, ctx.pending_vectors = True, None
    return round((time.perf_counter() - t) * 1000, 3)


def add_columns(plpy, ctx: Context, schema: Schema) -> float:
    """Compute question/column similarity and the table scores derived from it.

    Embeds the question, compares it with every indexed column the role may read
    (``linking.column_similarities``) and sets ``ctx.column_sims`` and ``ctx.scores`` (which
    also prune a PreSQL schema over budget). Does nothing when already set.

    Source: PET-SQL (Li et al. 2024) §3.3, linking by similar columns.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        ctx: the question's context, changed in place.
        schema: the schema the role may read (keys of ``ctx.scores`` are its prompt names).

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


def presql_prompt(
    plpy, ctx: Context, schema: Schema, st: Settings, gate: Gate
) -> tuple[str, Schema, dict]:
    """Build the PreSQL prompt, pruning the schema when it is over the token budget.

    The prompt shows the whole schema, or — when that prompt would exceed the setting
    ``prompt_token_budget`` (estimated tokens, see ``linking.estimate_tokens``) — a schema
    pruned to the tables most similar to the question plus their FK neighbours, tables of
    matched values first (those that would link, see ``linking.linking_values``). Pruning needs
    the question/column similarity: ``add_columns`` is then run here (its time added to
    ``ctx.timings["columns_ms"]``).

    Source: PET-SQL (Li et al. 2024) §3.1, the reference-enhanced PreSQL prompt.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        ctx: the question's context (``add_columns`` may fill it).
        schema: the schema the role may read.
        st: the settings (``sample_values``, ``k_examples``, ``link_value_min``,
            ``prompt_token_budget``).
        gate: the call's gate: the values and examples shown pass it.

    Returns:
        ``(prompt, schema used, info)``; info: ``pruned``, ``tokens_full``, ``tokens``
        (estimated tokens of the prompt), ``tables_kept``, ``tables_total``, ``budget`` and
        what pruning adds.

    Raises:
        EmbeddingError: pruning needed the question's embedding and the model is missing.
    """
    n_values = st.sample_values
    examples = gate.examples("presql", first_examples(ctx.verified, ctx.candidates, st.k_examples))
    vmin = st.link_value_min
    shown = gate.values("presql", value_triples(schema, ctx.values))
    business = ctx.business.prompt_text()

    def render(s: Schema) -> str:
        tables = {t.name for t in s.tables}
        return prompts.build_prompt(
            ctx.question,
            s,
            examples,
            n_values,
            ctx.evidence,
            [v for v in shown if v[0] in tables],
            business,
            gate.turns("presql", ctx.turns),
        )

    keep = []
    for name, _c, _v in value_triples(schema, linking_values(schema, ctx.values, vmin)):
        if name not in keep:
            keep.append(name)

    def scores() -> dict[str, float]:
        ctx.timings["columns_ms"] = ctx.timings.get("columns_ms", 0.0) + add_columns(
            plpy, ctx, schema
        )
        return ctx.scores or {}

    used, info = prune_schema(schema, scores, st.prompt_token_budget, render, keep)
    ctx.presql_schema = used
    prompt = render(used)
    info["tokens"] = estimate_tokens(prompt)
    return prompt, used, info


def finsql_context(
    ctx: Context, schema: Schema, presql: str | None, st: Settings, presql_text: str | None = None
) -> tuple[Linked, Selection]:
    """Link the schema and select the examples for FinSQL, after PreSQL.

    Source: PET-SQL (Li et al. 2024) §3.3, PreSQL-based schema linking; DAIL-SQL (Gao et al.
    2023) §3.3, DAIL selection by question and SQL-skeleton similarity.

    Args:
        ctx: the question's context; ``add_columns`` must have run.
        schema: the schema the role may read.
        presql: the PreSQL candidate's SQL, or None when there is none.
        st: the settings (``link_value_min``, ``link_column_min``, ``k_examples``,
            ``dail_tau``).
        presql_text: the PreSQL as the model wrote it (its tokens name tables when
            ``presql`` is None or does not parse); None for ``presql``.

    Returns:
        ``(Linked, Selection)``: the linked tables and columns, and the chosen examples.

    Raises:
        ValueError: ``add_columns`` has not run on ``ctx``.
    """
    if ctx.column_sims is None:
        raise ValueError("finsql_context: run add_columns(plpy, ctx, schema) first")
    cmin = st.link_column_min
    similar = [c for c in ctx.column_sims if c[3] >= cmin]
    linked = link_schema(
        schema,
        presql,
        ctx.values,
        similar,
        st.link_value_min,
        ctx.presql_schema,
        presql_text,
        ctx.question,
    )
    sel = dail_select(
        ctx.candidates, ctx.skeletons, presql_skeleton(presql), st.k_examples, st.dail_tau
    )
    return linked, sel


def finsql_prompt(
    ctx: Context, schema: Schema, linked: Linked, sel: Selection, st: Settings, gate: Gate
) -> tuple[str, Schema]:
    """Build the FinSQL prompt from the linked schema and the selected examples.

    Source: PET-SQL (Li et al. 2024) §3.3, the FinSQL prompt over the linked schema.

    Args:
        ctx: the question's context.
        schema: the schema the role may read.
        linked: the linking of ``finsql_context``.
        sel: the DAIL selection of ``finsql_context``.
        st: the settings (``sample_values``).
        gate: the call's gate: the values and examples shown pass it.

    Returns:
        ``(prompt, schema used)``: the schema holds the linked tables only (the whole schema
        when nothing linked); the prompt shows those tables' matched values and the selected
        examples.
    """
    fin_schema = schema.subset(set(linked.tables)) if linked.tables else schema
    tables = {t.name for t in fin_schema.tables}
    prompt = prompts.build_prompt(
        ctx.question,
        fin_schema,
        gate.examples("finsql", first_examples(ctx.verified, sel.examples, st.k_examples)),
        st.sample_values,
        ctx.evidence,
        gate.values("finsql", value_triples(schema, ctx.values, tables)),
        ctx.business.prompt_text(),
        gate.turns("finsql", ctx.turns),
    )
    return prompt, fin_schema


def context_trace(ctx: Context) -> dict[str, Any]:
    """Return the retrieval part of the trace.

    Args:
        ctx: the question's context.

    Returns:
        ``masked_question``, ``values`` (each ``ValueMatch.to_json()``) and, once
        ``add_columns`` has run, ``columns_similar``: the 10 most similar columns as
        ``[schema, table, column, similarity]``.
    """
    out: dict[str, Any] = {
        "masked_question": ctx.masked_question,
        "values": [v.to_json() for v in ctx.values],
    }
    if ctx.column_sims is not None:
        out["columns_similar"] = [list(c) for c in ctx.column_sims[:10]]
    return out


def linking_trace(linked: Linked, sel: Selection) -> dict[str, Any]:
    """Return the linking and example-selection part of the trace.

    Args:
        linked: the schema linking.
        sel: the DAIL selection.

    Returns:
        ``linked_tables``, ``linked_columns``, ``linking`` (why, how) and ``selection`` (how,
        passed_tau, tau, examples).
    """
    return {
        "linked_tables": linked.tables,
        "linked_columns": linked.columns,
        "linking": {
            "why": linked.why,
            "how": "linked" if linked.tables else "full schema (nothing linked)",
        },
        "selection": {
            "how": sel.how,
            "passed_tau": sel.passed,
            "tau": sel.tau,
            "examples": [e.__dict__ for e in sel.examples],
        },
    }


def retrieve(
    plpy, question: str, search_path: str, evidence: str | None, presql: str | None
) -> dict[str, Any]:
    """Run every retrieval stage of ``nl2sql()`` without calling a model.

    Backs ``nl2sql.retrieve(question, evidence, presql, search_path) → jsonb``. The PreSQL
    prompt is built, as in ``nl2sql()``, before the vector value matches and the column
    similarity, which ``nl2sql()`` computes while PreSQL is out.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        question: the question as the caller passed it.
        search_path: the caller's search_path text (which tables are bare names).
        evidence: the caller's hint text, or None.
        presql: a PreSQL from elsewhere, or None; when given, schema linking, DAIL selection
            and the FinSQL prompt are added.

    Returns:
        A JSON-able dict: ``question``, ``evidence``, ``masked_question``, ``values``,
        ``columns_similar``, ``examples`` (verified queries first), ``presql_prompt``,
        ``presql_tables``, ``pruning``, ``business_context`` (terms and instructions used),
        ``verified`` (the nearest verified queries and templates with their similarity);
        with ``presql`` also ``linked_tables``, ``linked_columns``, ``linking``,
        ``selection``, ``finsql_prompt``; and ``timings`` (milliseconds).

    Raises:
        QuestionError: the question is null, empty, too long or holds a NUL byte.
        ConfigError: a setting is invalid.
        NotIndexedError: no table the role may read is indexed.
        EmbeddingError: the embedding model is missing.
    """
    st = get_settings(plpy)
    q = validate_question(question, st.question_max_chars)
    timer = StageTimer()
    with timer.stage("schema_ms"):
        schema = catalog.load_schema(
            plpy, catalog.parse_search_path(plpy, search_path), st.sample_values
        )
    gate = Gate(schema, st.send_values)
    ctx = retrieve_context(plpy, q, evidence, schema, st)
    with timer.stage("prompt_ms"):
        pre_prompt, pre_schema, info = presql_prompt(plpy, ctx, schema, st, gate)
        timer.exclude(ctx.timings.get("columns_ms", 0.0))
    prompt_ms = timer.timings["prompt_ms"]
    examples = [
        e.__dict__
        for e in gate.examples("trace", first_examples(ctx.verified, ctx.candidates, st.k_examples))
    ]
    # what nl2sql() does while the PreSQL call is out
    ctx.timings["values_ms"] = round(
        ctx.timings["values_ms"] + add_vector_values(plpy, ctx, schema, st), 3
    )
    ctx.timings["columns_ms"] = round(
        ctx.timings.get("columns_ms", 0.0) + add_columns(plpy, ctx, schema), 3
    )
    out: dict[str, Any] = {
        "question": q,
        "evidence": evidence,
        **context_trace(ctx),
        "examples": examples,
        "presql_prompt": pre_prompt,
        "presql_tables": pre_schema.table_names(),
        "pruning": info,
        "business_context": ctx.business.to_json(),
        "verified": [
            {"id": r.id, "kind": r.kind, "question": r.question, "similarity": r.similarity}
            for r in ctx.verified_rows
        ],
    }
    if presql:
        linked, sel = finsql_context(ctx, schema, presql, st)
        out.update(linking_trace(linked, sel))
        out["selection"]["examples"] = [e.__dict__ for e in gate.examples("trace", sel.examples)]
        out["finsql_prompt"] = finsql_prompt(ctx, schema, linked, sel, st, gate)[0]
    out["values_withheld"] = gate.report()
    out["timings"] = {
        "schema_ms": round(timer.timings["schema_ms"], 3),
        **ctx.timings,
        "prompt_ms": round(prompt_ms, 3),
        "retrieval_ms": round(sum(ctx.timings.values()) + prompt_ms, 3),
    }
    return out
