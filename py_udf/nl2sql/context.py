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

from . import prompts
from .embed import embed, to_pgvector
from .linking import Linked, column_similarities, estimate_tokens, link_schema, \
    linking_values, prune_schema, table_scores
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
    column_sims: list[tuple[str, str, str, float]]
    scores: dict[str, float]             # table prompt name -> similarity with the question
    timings: dict[str, float] = field(default_factory=dict)


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
    if "examples" not in _PLANS:
        _PLANS["examples"] = plpy.prepare(
            "SELECT id, db_id, question, sql, masked_question, sql_skeleton, "
            "1 - (embedding <=> $1::vector) AS sim FROM nl2sql.visible_example "
            "WHERE embedding IS NOT NULL ORDER BY embedding <=> $1::vector LIMIT $2",
            ["text", "int4"])
    rows = plpy.execute(_PLANS["examples"], [to_pgvector(masked_vec), n])
    exs = [Example(id=r["id"], db_id=r["db_id"], question=r["question"], sql=r["sql"],
                   masked_question=r["masked_question"], similarity=round(float(r["sim"]), 4))
           for r in rows]
    return exs, {r["id"]: r["sql_skeleton"] or "" for r in rows}


_PLANS: dict[str, Any] = {}


def schema_words(schema: Schema) -> set[str]:
    """Lower-case parts of the schema's table and column names (split on ``_``)."""
    out: set[str] = set()
    for t in schema.tables:
        for name in [t.table] + [c.name for c in t.columns]:
            out.update(w for w in name.lower().split("_") if w)
    return out


def retrieve_context(plpy, question: str, evidence: str | None, schema: Schema,
                     st: dict[str, str]) -> Context:
    """Values, masked question, example candidates and column similarities for ``question``.

    Order (so that the backend embeds each text once per question): exact and trigram value
    lookups (no embedding); the masked question from them; embedding of the question and the
    masked question, then of the phrases chosen for vector lookups (retrieval.vector_phrases);
    vector value lookups; examples by the masked question; column similarities by the question.
    A vector match strong enough to mask (≥ link_value_min) re-masks and re-embeds the masked
    question. Settings used: value_top_k, value_trgm_min, value_vector_min,
    value_vector_phrases, link_value_min, k_examples, dail_candidates. Raises
    embed.EmbeddingError when the embedding model is missing."""
    timings: dict[str, float] = {}
    t = time.perf_counter()
    trgm_min, vector_min = float(st["value_trgm_min"]), float(st["value_vector_min"])
    vmin = float(st["link_value_min"])
    phrases = candidate_phrases(question, evidence)
    found = match_values(plpy, phrases, fuzzy=fuzzy_phrases(phrases) if trgm_min <= 1 else [],
                         trgm_min=trgm_min)
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
    # two batches: a batch is padded to its longest text, so short phrases go apart from the
    # question (measured: 10 texts in one batch 110 ms, in these two 67 ms on one core)
    te = time.perf_counter()
    q_vec, m_vec = embed([question, masked])
    p_vecs = embed([phrases[i].text for i in vec_idx])
    timings["embed_ms"] = round((time.perf_counter() - te) * 1000, 3)
    if vec_idx:
        found += match_values(plpy, phrases, exact=False, vector_min=vector_min,
                              vectors={i: to_pgvector(v) for i, v in zip(vec_idx, p_vecs)})
    values = merge_matches(found, int(st["value_top_k"]))
    remasked = masked_with(values)
    if remasked != masked:
        masked, m_vec = remasked, embed([remasked])[0]
    timings["values_ms"] = round((time.perf_counter() - t) * 1000 - timings["embed_ms"], 3)
    t = time.perf_counter()
    k = int(st["k_examples"])
    cands, skels = retrieve_examples(plpy, m_vec, max(k, int(st["dail_candidates"])))
    timings["examples_ms"] = round((time.perf_counter() - t) * 1000, 3)
    t = time.perf_counter()
    col_sims = column_similarities(plpy, q_vec)
    scores = table_scores(schema, col_sims)
    timings["columns_ms"] = round((time.perf_counter() - t) * 1000, 3)
    return Context(question, evidence, values, masked, cands, skels, col_sims, scores, timings)


def presql_prompt(ctx: Context, schema: Schema, st: dict[str, str]) -> tuple[str, Schema, dict]:
    """The PreSQL prompt: the whole schema, or — when that prompt would exceed the setting
    ``prompt_token_budget`` (estimated tokens, see linking.estimate_tokens) — a schema pruned
    to the tables most similar to the question plus their FK neighbours, tables of matched
    values first (those that would link, see linking.linking_values). Returns (prompt, schema
    used, pruning info)."""
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
    used, info = prune_schema(schema, ctx.scores, int(st["prompt_token_budget"]), render, keep)
    prompt = render(used)
    info["tokens"] = estimate_tokens(prompt)
    return prompt, used, info


def finsql_context(ctx: Context, schema: Schema, presql: str | None, st: dict[str, str]
                   ) -> tuple[Linked, Selection]:
    """Schema linking (linking.link_schema with the settings link_value_min and
    link_column_min) and DAIL selection (settings k_examples, dail_tau) after PreSQL."""
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
    """The retrieval part of the trace: masked question, matched values, example candidates."""
    return {"masked_question": ctx.masked_question,
            "values": [v.to_json() for v in ctx.values],
            "columns_similar": [list(c) for c in ctx.column_sims[:10]]}


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
    t = time.perf_counter()
    pre_prompt, pre_schema, info = presql_prompt(ctx, schema, st)
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
