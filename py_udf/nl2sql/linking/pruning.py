"""Schema pruning for the PreSQL prompt to ``prompt_token_budget`` (docs/internals/retrieval.md
"Pruning"). Source: PET-SQL (Li et al. 2024) §3.3; MCS-SQL (Lee et al. 2024) §3.1."""

from __future__ import annotations

from collections.abc import Callable

from ..core import spi
from ..core.types import Schema
from ..embedding.encode import to_pgvector
from ..model import tokens as model_tokens
from ..model.prompts import render_table
from ._schema_graph import fk_graph, table_lookup

CHARS_PER_TOKEN = model_tokens.CHARS_PER_TOKEN
FITS_IN_BYTES = "estimate (the prompt has no more bytes than the budget: it fits)"


def estimate_tokens(text: str, model: str = "") -> int:
    """The tokens of ``text`` as the model's calls are counted (``model.tokens.count``): a real
    tokenizer for OpenAI-style models, else ``ceil(len(text) / 3.5)``.

    Args:
        text: the prompt text (may be empty).
        model: the model id the prompt is for ('' for the estimate).

    Returns:
        int: the token count; 0 for empty text.
    """
    return model_tokens.count(text, model)[0]


def _neighbour_scores(schema: Schema, scores: dict[str, float], step: float) -> dict[str, float]:
    """Table -> the higher of its score and its best FK neighbour's score less ``step``."""
    g = fk_graph(schema)
    out = {}
    for t in schema.tables:
        own = scores.get(t.name, 0.0)
        near = max((scores.get(n, 0.0) - step for n in g.get(t.name, ())), default=0.0)
        out[t.name] = max(own, near)
    return out


def prune_schema(
    schema: Schema,
    scores: dict[str, float] | Callable[[], dict[str, float]],
    budget: int,
    render,
    keep: list[str] = (),
    neighbour_step: float = 0.05,
    model: str = "",
) -> tuple[Schema, dict]:
    """Prune the schema so that the prompt stays within ``budget`` estimated tokens.

    Args:
        schema: the schema the calling role may see (``catalog.load_schema``).
        scores: table prompt name -> similarity with the question (0..1), or a function returning
            it, called only when the schema must be pruned.
        budget: int, the most estimated tokens (``estimate_tokens``) the prompt may take.
        render: callable taking a Schema and returning the whole prompt text for it.
        keep: table prompt names that go first (tables of matched values).
        neighbour_step: float, how far below its neighbour an FK neighbour ranks.
        model: the model id the prompt is for: tokens are counted as its calls are
            (``estimate_tokens``); '' for the estimate.

    Returns:
        (schema, info): the pruned Schema, or ``schema`` itself when it fits; info ``{"pruned",
        "tokens_full", "tokens", "tables_kept", "tables_total", "budget"}`` (estimated tokens).
    """
    full_text = render(schema)
    if len(full_text.encode()) <= budget:
        # a token is at least one byte: it fits without a tokenizer (which costs a backend
        # ~170 ms and ~50 MB the first time); the figure shown is then the estimate
        full_tokens, counted_by = model_tokens.count(full_text, "")[0], FITS_IN_BYTES
    else:
        full_tokens, counted_by = model_tokens.count(full_text, model)
    info = {
        "counted_by": counted_by,
        "pruned": False,
        "tokens_full": full_tokens,
        "tokens": full_tokens,
        "tables_kept": len(schema.tables),
        "tables_total": len(schema.tables),
        "budget": budget,
    }
    if full_tokens <= budget:
        return schema, info
    if callable(scores):
        scores = scores()
    order = _pruning_order(schema, scores, keep, neighbour_step)
    base = estimate_tokens(render(Schema(tables=[], foreign_keys=[])), model)
    chosen = _choose_within_budget(schema, order, budget, base, model)
    sub, tokens = _drop_worst_until_fits(schema, chosen, budget, render, model)
    info.update({"pruned": True, "tokens": tokens, "tables_kept": len(sub.tables)})
    return sub, info


def _pruning_order(
    schema: Schema, scores: dict[str, float], keep: list[str], neighbour_step: float
) -> list[str]:
    """Table prompt names best first: ``keep`` (those in the schema), then by
    ``_neighbour_scores`` descending, ties by name."""
    rank = _neighbour_scores(schema, scores, neighbour_step)
    keep_set = [t for t in keep if t in rank]
    return keep_set + sorted((t for t in rank if t not in keep_set), key=lambda t: (-rank[t], t))


def _choose_within_budget(
    schema: Schema, order: list[str], budget: int, base: int, model: str = ""
) -> list[str]:
    """Add tables in ``order`` while their estimated cost keeps ``base`` plus the chosen within
    ``budget``; a table that does not fit is skipped, and the loop ends once fewer than 25
    tokens are left."""
    by_name = {t.name: t for t in schema.tables}
    chosen: list[str] = []
    used = base
    for name in order:
        if used + 25 > budget:
            break  # no table fits in what is left
        # a table's cost: its CREATE TABLE plus FK lines to tables already chosen
        cost = estimate_tokens(render_table(by_name[name]), model) + 1
        cost += sum(
            12
            for fk in schema.foreign_keys
            if (fk.table == name and fk.ref_table in chosen)
            or (fk.ref_table == name and fk.table in chosen)
        )
        if used + cost > budget:
            continue
        chosen.append(name)
        used += cost
    return chosen


def _drop_worst_until_fits(
    schema: Schema, chosen: list[str], budget: int, render, model: str = ""
) -> tuple[Schema, int]:
    """The subset of the ``chosen`` tables, dropping the last chosen while the rendered prompt
    exceeds ``budget``; returns it with its estimated tokens. Pops from ``chosen``."""
    sub = schema.subset(set(chosen))
    tokens = estimate_tokens(render(sub), model)
    while tokens > budget and chosen:  # the per-table estimate was short: drop the worst
        chosen.pop()
        sub = schema.subset(set(chosen))
        tokens = estimate_tokens(render(sub), model)
    return sub, tokens


def column_similarities(plpy, question_vec: list[float]) -> list[tuple[str, str, str, float]]:
    """Compute the cosine similarity of the question with every readable column's embedding
    (``nl2sql._column_similarities`` over the view ``nl2sql.visible_column``).

    Args:
        question_vec: the question's embedding, 384 floats.

    Returns:
        (schema, table, column, similarity) tuples, best first; similarity in [-1, 1], 4 places.
    """
    rows = spi.query(
        plpy,
        "SELECT schema_name, table_name, column_name, sim "
        "FROM nl2sql._column_similarities($1::vector)",
        [to_pgvector(question_vec)],
        ["text"],
    )
    return [
        (r["schema_name"], r["table_name"], r["column_name"], round(float(r["sim"]), 4))
        for r in rows
    ]


def table_scores(schema: Schema, col_sims: list[tuple[str, str, str, float]]) -> dict[str, float]:
    """Score each table's similarity to the question: the best of its columns'.

    Args:
        schema: the schema (``catalog.load_schema``).
        col_sims: (schema, table, column, similarity) tuples (``column_similarities``).

    Returns:
        dict: table prompt name -> best column similarity, 0.0 for none (or a negative best).
    """
    lookup = table_lookup(schema)
    out = {t.name: 0.0 for t in schema.tables}
    for s, t, _c, sim in col_sims:
        tb = lookup.get(f"{s}.{t}".lower())
        if tb is not None and sim > out[tb.name]:
            out[tb.name] = sim
    return out
