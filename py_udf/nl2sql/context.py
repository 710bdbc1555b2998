"""The retrieval stages of one question, as ``pipeline.answer()`` and ``nl2sql.retrieve()``
run them: value retrieval → masking → example candidates → question/column similarity →
PreSQL prompt (schema pruned to the token budget) → after PreSQL: schema linking and DAIL
selection → FinSQL prompt.

Sources: OpenSearch-SQL (Xie et al. 2024) §3.4 (values); PET-SQL (Li et al. 2024) §3.2–3.3
(masked-question examples, PreSQL schema linking); DAIL-SQL (Gao et al. 2023) §3.3 (DAIL
selection).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from . import prompts, spi
from .embed import embed, embed_async, to_pgvector
from .linking import Linked, column_similarities, estimate_tokens, link_schema, \
    linking_values, prune_schema, schema_words, table_scores
from .masking import mask_question
from .retrieval import ValueMatch, candidate_phrases, fuzzy_phrases, match_values, \
    merge_matches, vector_phrases
from .example_selection import Selection, dail_select, presql_skeleton
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


def retrieve_context(plpy, question: str, evidence: str | None, schema: Schema,
                     st: dict[str, str]) -> Context:
    """Values, masked question and example candidates for ``question`` (question/column
    similarity is ``add_columns``, run later).

    Order (so that the backend embeds each text once per question): exact and trigram value
    lookups (no embedding); the masked question from them; the phrases chosen for vector
    lookups (retrieval.vector_phrases) embedded in a background thread while this one embeds
    the masked question and fetches its examples; vector value lookups. A vector match strong
    enough to mask (≥ link_value_min) re-masks, re-embeds and fetches the examples again.
    Settings used: value_top_k, value_trgm_min, value_vector_min, value_vector_phrases,
    link_value_min, k_examples, dail_candidates. Timings (ms): ``values_ms`` (lookups),
    ``embed_ms`` (this thread's embedding and its wait for the phrases'), ``examples_ms``.
    Raises embed.EmbeddingError when the embedding model is missing."""
    timings = {"values_ms": 0.0, "embed_ms": 0.0, "examples_ms": 0.0}

    def timed(key: str, fn, *a, **kw):
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            timings[key] += (time.perf_counter() - t0) * 1000

    trgm_min, vector_min = float(st["value_trgm_min"]), float(st["value_vector_min"])
    vmin = float(st["link_value_min"])
    n_examples = max(int(st["k_examples"]), int(st["dail_candidates"]))
    phrases = candidate_phrases(question, evidence)
    found = timed("values_ms", match_values, plpy, phrases,
                  fuzzy=fuzzy_phrases(phrases) if trgm_min <= 1 else [], trgm_min=trgm_min)
    vec_idx = vector_phrases(phrases, found, schema_words(schema),
                             int(st["value_vector_phrases"])) if vector_min <= 1 else []
    names = [tb.table for tb in schema.tables] + [c.name for tb in schema.tables for c in tb.columns]

    def masked_with(values: list[ValueMatch]) -> str:
        # exact and trigram matches (misspellings) mask their phrase; embedding matches only
        # when strong (a paraphrase like "USA" for 'United States')
        strong = [v.phrase for v in values if v.source in ("question", "quoted") and
                  (v.how in ("exact", "trigram") or v.score >= vmin)]
        return mask_question(question, names=names, values=strong)

    masked = masked_with(merge_matches(found, int(st["value_top_k"])))
    # the phrases go apart from the masked question (a batch is padded to its longest text)
    # and on the other core: ONNX Runtime releases the GIL
    pending = embed_async([phrases[i].text for i in vec_idx])
    m_vec = timed("embed_ms", embed, [masked])[0]
    cands, skels = timed("examples_ms", retrieve_examples, plpy, m_vec, n_examples)
    p_vecs = timed("embed_ms", pending.result)
    if vec_idx:
        found += timed("values_ms", match_values, plpy, phrases, exact=False,
                       vector_min=vector_min,
                       vectors={i: to_pgvector(v) for i, v in zip(vec_idx, p_vecs)})
    values = merge_matches(found, int(st["value_top_k"]))
    remasked = masked_with(values)
    if remasked != masked:
        masked = remasked
        m_vec = timed("embed_ms", embed, [remasked])[0]
        cands, skels = timed("examples_ms", retrieve_examples, plpy, m_vec, n_examples)
    return Context(question, evidence, values, masked, cands, skels,
                   {k: round(v, 3) for k, v in timings.items()})


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


def presql_prompt(plpy, ctx: Context, schema: Schema, st: dict[str, str]
                  ) -> tuple[str, Schema, dict]:
    """The PreSQL prompt: the whole schema, or — when that prompt would exceed the setting
    ``prompt_token_budget`` (estimated tokens, see linking.estimate_tokens) — a schema pruned
    to the tables most similar to the question plus their FK neighbours, tables of matched
    values first (those that would link, see linking.linking_values). Pruning needs the
    question/column similarity: ``add_columns`` is then run here (its time added to
    ``ctx.timings["columns_ms"]``). Returns (prompt, schema used, pruning info)."""
    n_values = int(st["sample_values"])
    examples = ctx.candidates[:int(st["k_examples"])]
    vmin = float(st["link_value_min"])

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

    used, info = prune_schema(schema, scores, int(st["prompt_token_budget"]), render, keep)
    prompt = render(used)
    info["tokens"] = estimate_tokens(prompt)
    return prompt, used, info


def finsql_context(ctx: Context, schema: Schema, presql: str | None, st: dict[str, str]
                   ) -> tuple[Linked, Selection]:
    """Schema linking (linking.link_schema with the settings link_value_min and
    link_column_min) and DAIL selection (settings k_examples, dail_tau) after PreSQL.
    Needs ``add_columns`` run first (raises ValueError otherwise)."""
    if ctx.column_sims is None:
        raise ValueError("finsql_context: run add_columns(plpy, ctx, schema) first")
    cmin = float(st["link_column_min"])
    similar = [c for c in ctx.column_sims if c[3] >= cmin]
    linked = link_schema(schema, presql, ctx.values, similar, float(st["link_value_min"]))
    sel = dail_select(ctx.candidates, ctx.skeletons, presql_skeleton(presql),
                      int(st["k_examples"]), float(st["dail_tau"]))
    return linked, sel


def finsql_prompt(ctx: Context, schema: Schema, linked: Linked, sel: Selection,
                  st: dict[str, str]) -> tuple[str, Schema]:
    """The FinSQL prompt: the linked tables only (the whole schema when nothing linked), the
    matched values of those tables, the DAIL-selected examples."""
    fin_schema = schema.subset(set(linked.tables)) if linked.tables else schema
    tables = {t.name for t in fin_schema.tables}
    prompt = prompts.build_prompt(ctx.question, fin_schema, sel.examples,
                                  int(st["sample_values"]), ctx.evidence,
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
    PreSQL prompt with its pruning/token figures and, when ``presql`` is given (a PreSQL from
    elsewhere), the schema linking, DAIL selection and FinSQL prompt it leads to. Timings in ms.
    Raises RuntimeError when nothing is indexed."""
    from . import catalog
    from .pipeline import validate_question
    from .settings import get_settings

    st = get_settings(plpy)
    q = validate_question(question, int(st["question_max_chars"]))
    t0 = time.perf_counter()
    schema = catalog.load_schema(plpy, catalog.parse_search_path(plpy, search_path),
                                 int(st["sample_values"]))
    t_schema = (time.perf_counter() - t0) * 1000
    ctx = retrieve_context(plpy, q, evidence, schema, st)
    ctx.timings["columns_ms"] = add_columns(plpy, ctx, schema)
    t = time.perf_counter()
    pre_prompt, pre_schema, info = presql_prompt(plpy, ctx, schema, st)
    prompt_ms = (time.perf_counter() - t) * 1000
    out: dict[str, Any] = {"question": q, "evidence": evidence, **context_trace(ctx),
                           "examples": [e.__dict__ for e in ctx.candidates[:int(st["k_examples"])]],
                           "presql_prompt": pre_prompt, "presql_tables": pre_schema.table_names(),
                           "pruning": info}
    if presql:
        linked, sel = finsql_context(ctx, schema, presql, st)
        out.update(linking_trace(linked, sel))
        out["finsql_prompt"] = finsql_prompt(ctx, schema, linked, sel, st)[0]
    out["timings"] = {"schema_ms": round(t_schema, 3), **ctx.timings,
                      "prompt_ms": round(prompt_ms, 3),
                      "retrieval_ms": round(sum(ctx.timings.values()) + prompt_ms, 3)}
    return out
