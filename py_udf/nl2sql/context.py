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

from . import catalog, prompts, spi
from .embed import embed, embed_async, to_pgvector
from .linking import Linked, column_similarities, estimate_tokens, link_schema, \
    linking_values, prune_schema, schema_words, table_scores
from .masking import mask_question
from .retrieval import ValueMatch, candidate_phrases, fuzzy_phrases, match_values, \
    merge_matches, vector_phrases
from .example_selection import Selection, dail_select, presql_skeleton
from .question import validate_question
from .settings import Settings, get_settings
from .timing import StageTimer
from .types import Example, Schema


@dataclass
class Context:
    """What retrieval found for one question (before any model call)."""

    question: str
    evidence: str | None
    values: list[ValueMatch]
    masked_question: str
    candidates: list[Example]            # by masked-question similarity, best first
    skeletons: dict[int, str]            # example id -> SQL skeleton
    timings: dict[str, float] = field(default_factory=dict)
    # question/column similarity (add_columns): None until computed — the pipeline computes it
    # while the PreSQL call is out, unless pruning the PreSQL schema needs it first
    column_sims: list[tuple[str, str, str, float]] | None = None
    scores: dict[str, float] | None = None  # table prompt name -> similarity with the question
    # embedding (vector) value lookups, done by add_vector_values while PreSQL is out
    phrases: list = field(default_factory=list)
    found: list[ValueMatch] = field(default_factory=list)   # exact and trigram matches
    vector_phrases: list[int] = field(default_factory=list)  # positions in ``phrases``
    pending_vectors: Future | None = None                     # their embeddings (background)
    vectors_done: bool = True
    remasked: bool = False   # a strong vector match changed the masked question (and examples)


def value_triples(schema: Schema, values: list[ValueMatch],
                   tables: set[str] | None = None) -> list[tuple[str, str, str]]:
    """(table prompt name, column, value) for values of ``tables`` (all when None)."""
    names = {(t.schema, t.table): t.name for t in schema.tables}
    out = []
    for v in values:
        name = names.get((v.schema, v.table))
        if name and (tables is None or name in tables):
            out.append((name, v.column, v.value))
    return out


def retrieve_examples(plpy, masked_vec: list[float], n: int) -> tuple[list[Example], dict[int, str]]:
    """The ``n`` pool examples nearest to the masked question's embedding ``masked_vec``
    (cosine), best first, and their SQL skeletons by id (PET-SQL §3.2, DAIL-SQL §3.3)."""
    rows = spi.query(plpy, "SELECT id, db_id, question, sql, masked_question, sql_skeleton, "
                           "1 - (embedding <=> $1::vector) AS sim FROM nl2sql.visible_example "
                           "WHERE embedding IS NOT NULL ORDER BY embedding <=> $1::vector LIMIT $2",
                     [to_pgvector(masked_vec), n], ["text", "int4"])
    exs = [Example(id=r["id"], db_id=r["db_id"], question=r["question"], sql=r["sql"],
                   masked_question=r["masked_question"], similarity=round(float(r["sim"]), 4))
           for r in rows]
    return exs, {r["id"]: r["sql_skeleton"] or "" for r in rows}


def _n_candidates(st: Settings) -> int:
    """How many example candidates to fetch: enough for the prompt and for DAIL selection."""
    return max(st.k_examples, st.dail_candidates)


def _masked(question: str, schema: Schema, values: list[ValueMatch], vmin: float) -> str:
    """The masked question: schema names and the phrases of matched values masked. Exact and
    trigram matches (misspellings) mask their phrase; embedding matches only when strong
    (≥ ``vmin``: a paraphrase like "USA" for 'United States')."""
    names = [tb.table for tb in schema.tables] + [c.name for tb in schema.tables for c in tb.columns]
    strong = [v.phrase for v in values if v.source in ("question", "quoted") and
              (v.how in ("exact", "trigram") or v.score >= vmin)]
    return mask_question(question, names=names, values=strong)


def retrieve_context(plpy, question: str, evidence: str | None, schema: Schema,
                     st: Settings) -> Context:
    """Exact and trigram value matches, masked question and example candidates for
    ``question``: what the PreSQL prompt needs. Embedding (vector) value matches are
    ``add_vector_values`` and question/column similarity is ``add_columns``; the pipeline runs
    both while the PreSQL call is out.

    Order: exact and trigram value lookups (no embedding); the masked question from them, its
    embedding and its examples; then the phrases chosen for vector lookups
    (retrieval.vector_phrases) start embedding in a background thread (ONNX Runtime releases
    the GIL), for add_vector_values. Settings used: value_top_k, value_trgm_min,
    value_vector_min, value_vector_phrases, link_value_min, k_examples, dail_candidates.
    Timings (ms): ``values_ms``, ``embed_ms``, ``examples_ms``. Raises embed.EmbeddingError
    when the embedding model is missing."""
    timer = StageTimer()
    trgm_min, vector_min = st.value_trgm_min, st.value_vector_min
    with timer.stage("values_ms"):
        phrases = candidate_phrases(question, evidence)
        found = match_values(plpy, phrases, trgm_min=trgm_min,
                             fuzzy=fuzzy_phrases(phrases) if trgm_min <= 1 else [])
        vec_idx = vector_phrases(phrases, found, schema_words(schema),
                                 st.value_vector_phrases) if vector_min <= 1 else []
        values = merge_matches(found, st.value_top_k)
        masked = _masked(question, schema, values, st.link_value_min)
    with timer.stage("embed_ms"):
        m_vec = embed([masked])[0]
    with timer.stage("examples_ms"):
        cands, skels = retrieve_examples(plpy, m_vec, _n_candidates(st))
    pending = embed_async([phrases[i].text for i in vec_idx]) if vec_idx else None
    return Context(question, evidence, values, masked, cands, skels,
                   {k: round(v, 3) for k, v in timer.timings.items()},
                   phrases=phrases, found=found, vector_phrases=vec_idx,
                   pending_vectors=pending, vectors_done=not vec_idx)


def add_vector_values(plpy, ctx: Context, schema: Schema, st: Settings) -> float:
    """Embedding (vector) value matches for the phrases retrieve_context chose (OpenSearch-SQL
    §3.4 vector value retrieval: paraphrases such as "USA" for 'United States'): the phrases'
    embeddings (started in the background) are looked up in the value index, the matches are
    merged into ``ctx.values``, and a match strong enough to mask (≥ link_value_min) re-masks
    the question and fetches its examples again (``ctx.remasked``). The pipeline runs this
    while the PreSQL call is out: the PreSQL prompt shows exact and trigram matches; schema
    linking, DAIL selection, FinSQL and value alignment see all. Does nothing when already
    done. Returns the milliseconds spent. Settings as retrieve_context."""
    if ctx.vectors_done:
        return 0.0
    t = time.perf_counter()
    p_vecs = ctx.pending_vectors.result() if ctx.pending_vectors is not None else \
        embed([ctx.phrases[i].text for i in ctx.vector_phrases])
    found = ctx.found + match_values(
        plpy, ctx.phrases, exact=False, vector_min=st.value_vector_min,
        vectors={i: to_pgvector(v) for i, v in zip(ctx.vector_phrases, p_vecs)})
    ctx.values = merge_matches(found, st.value_top_k)
    masked = _masked(ctx.question, schema, ctx.values, st.link_value_min)
    if masked != ctx.masked_question:
        ctx.masked_question, ctx.remasked = masked, True
        ctx.candidates, ctx.skeletons = retrieve_examples(
            plpy, embed([masked])[0], _n_candidates(st))
    ctx.vectors_done, ctx.pending_vectors = True, None
    return round((time.perf_counter() - t) * 1000, 3)


def add_columns(plpy, ctx: Context, schema: Schema) -> float:
    """Question/column similarity (PET-SQL §3.3 linking by similar columns; the table scores
    that prune a PreSQL schema over budget): embeds the question, compares it with every
    indexed column the role may read (linking.column_similarities) and sets
    ``ctx.column_sims`` and ``ctx.scores``. Does nothing when already set. Returns the
    milliseconds spent (0.0 when already set)."""
    if ctx.column_sims is not None:
        return 0.0
    t = time.perf_counter()
    q_vec = embed([ctx.question])[0]
    ctx.column_sims = column_similarities(plpy, q_vec)
    ctx.scores = table_scores(schema, ctx.column_sims)
    return round((time.perf_counter() - t) * 1000, 3)


def presql_prompt(plpy, ctx: Context, schema: Schema, st: Settings
                  ) -> tuple[str, Schema, dict]:
    """The PreSQL prompt: the whole schema, or — when that prompt would exceed the setting
    ``prompt_token_budget`` (estimated tokens, see linking.estimate_tokens) — a schema pruned
    to the tables most similar to the question plus their FK neighbours, tables of matched
    values first (those that would link, see linking.linking_values). Pruning needs the
    question/column similarity: ``add_columns`` is then run here (its time added to
    ``ctx.timings["columns_ms"]``). Returns (prompt, schema used, pruning info)."""
    n_values = st.sample_values
    examples = ctx.candidates[:st.k_examples]
    vmin = st.link_value_min

    def render(s: Schema) -> str:
        tables = {t.name for t in s.tables}
        return prompts.build_prompt(ctx.question, s, examples, n_values, ctx.evidence,
                                    value_triples(schema, ctx.values, tables))

    keep = []
    for name, _c, _v in value_triples(schema, linking_values(schema, ctx.values, vmin)):
        if name not in keep:
            keep.append(name)

    def scores() -> dict[str, float]:
        ctx.timings["columns_ms"] = ctx.timings.get("columns_ms", 0.0) + add_columns(plpy, ctx, schema)
        return ctx.scores or {}

    used, info = prune_schema(schema, scores, st.prompt_token_budget, render, keep)
    prompt = render(used)
    info["tokens"] = estimate_tokens(prompt)
    return prompt, used, info


def finsql_context(ctx: Context, schema: Schema, presql: str | None, st: Settings
                   ) -> tuple[Linked, Selection]:
    """Schema linking (linking.link_schema with the settings link_value_min and
    link_column_min) and DAIL selection (settings k_examples, dail_tau) after PreSQL.
    Needs ``add_columns`` run first (raises ValueError otherwise)."""
    if ctx.column_sims is None:
        raise ValueError("finsql_context: run add_columns(plpy, ctx, schema) first")
    cmin = st.link_column_min
    similar = [c for c in ctx.column_sims if c[3] >= cmin]
    linked = link_schema(schema, presql, ctx.values, similar, st.link_value_min)
    sel = dail_select(ctx.candidates, ctx.skeletons, presql_skeleton(presql),
                      st.k_examples, st.dail_tau)
    return linked, sel


def finsql_prompt(ctx: Context, schema: Schema, linked: Linked, sel: Selection,
                  st: Settings) -> tuple[str, Schema]:
    """The FinSQL prompt: the linked tables only (the whole schema when nothing linked), the
    matched values of those tables, the DAIL-selected examples."""
    fin_schema = schema.subset(set(linked.tables)) if linked.tables else schema
    tables = {t.name for t in fin_schema.tables}
    prompt = prompts.build_prompt(ctx.question, fin_schema, sel.examples,
                                  st.sample_values, ctx.evidence,
                                  value_triples(schema, ctx.values, tables))
    return prompt, fin_schema


def context_trace(ctx: Context) -> dict[str, Any]:
    """The retrieval part of the trace: masked question, matched values, and the most similar
    columns once ``add_columns`` has run."""
    out: dict[str, Any] = {"masked_question": ctx.masked_question,
                           "values": [v.to_json() for v in ctx.values]}
    if ctx.column_sims is not None:
        out["columns_similar"] = [list(c) for c in ctx.column_sims[:10]]
    return out


def linking_trace(linked: Linked, sel: Selection) -> dict[str, Any]:
    """The linking/selection part of the trace."""
    return {"linked_tables": linked.tables, "linked_columns": linked.columns,
            "linking": {"why": linked.why, "how": "linked" if linked.tables else
                        "full schema (nothing linked)"},
            "selection": {"how": sel.how, "passed_tau": sel.passed, "tau": sel.tau,
                          "examples": [e.__dict__ for e in sel.examples]}}


def retrieve(plpy, question: str, search_path: str, evidence: str | None,
             presql: str | None) -> dict[str, Any]:
    """``nl2sql.retrieve(question, evidence, presql) → jsonb``: every retrieval stage of
    ``nl2sql()`` without calling a model — masked question, matched values, examples, the
    PreSQL prompt (built, as in nl2sql(), before the vector value matches and the column
    similarity, which nl2sql() computes while PreSQL is out) with its pruning/token figures
    and, when ``presql`` is given (a PreSQL from
    elsewhere), the schema linking, DAIL selection and FinSQL prompt it leads to. Timings in ms.
    Raises RuntimeError when nothing is indexed."""
    st = get_settings(plpy)
    q = validate_question(question, st.question_max_chars)
    timer = StageTimer()
    with timer.stage("schema_ms"):
        schema = catalog.load_schema(plpy, catalog.parse_search_path(plpy, search_path),
                                     st.sample_values)
    ctx = retrieve_context(plpy, q, evidence, schema, st)
    with timer.stage("prompt_ms"):
        pre_prompt, pre_schema, info = presql_prompt(plpy, ctx, schema, st)
        timer.exclude(ctx.timings.get("columns_ms", 0.0))
    prompt_ms = timer.timings["prompt_ms"]
    examples = [e.__dict__ for e in ctx.candidates[:st.k_examples]]
    # what nl2sql() does while the PreSQL call is out
    ctx.timings["values_ms"] = round(ctx.timings["values_ms"]
                                     + add_vector_values(plpy, ctx, schema, st), 3)
    ctx.timings["columns_ms"] = round(ctx.timings.get("columns_ms", 0.0)
                                      + add_columns(plpy, ctx, schema), 3)
    out: dict[str, Any] = {"question": q, "evidence": evidence, **context_trace(ctx),
                           "examples": examples, "presql_prompt": pre_prompt,
                           "presql_tables": pre_schema.table_names(), "pruning": info}
    if presql:
        linked, sel = finsql_context(ctx, schema, presql, st)
        out.update(linking_trace(linked, sel))
        out["finsql_prompt"] = finsql_prompt(ctx, schema, linked, sel, st)[0]
    out["timings"] = {"schema_ms": round(timer.timings["schema_ms"], 3), **ctx.timings,
                      "prompt_ms": round(prompt_ms, 3),
                      "retrieval_ms": round(sum(ctx.timings.values()) + prompt_ms, 3)}
    return out
