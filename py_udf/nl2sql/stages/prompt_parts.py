"""What the prompts show from retrieval. Sources: PET-SQL (Li et al. 2024) §3.1, §3.3; DAIL-SQL
(Gao et al. 2023) §3.3."""

from __future__ import annotations

from ..core.settings import Settings
from ..core.types import Example, Schema
from ..linking.pruning import prune_schema
from ..linking.schema_linking import Linked, link_schema, linking_values
from ..model import prompts
from ..model.gate import Gate
from ..retrieval.example_selection import Selection, dail_select, presql_skeleton
from ..retrieval.values import ValueMatch
from .gather import Context, add_columns


def value_triples(
    schema: Schema, values: list[ValueMatch], tables: set[str] | None = None
) -> list[tuple[str, str, str]]:
    """List matched values as ``(table prompt name, column, value)`` for a prompt.

    Args:
        schema, values: the schema whose prompt names are used; the matched cell values.
        tables: prompt names of the tables to keep, None for all (tables not in ``schema``
            are always dropped).

    Returns:
        One triple per kept value, in ``values`` order.
    """
    names = {(t.schema, t.table): t.name for t in schema.tables}
    out = []
    for v in values:
        name = names.get((v.schema, v.table))
        if name and (tables is None or name in tables):
            out.append((name, v.column, v.value))
    return out


def first_examples(
    verified: list[Example], examples: list[Example], k: int | None = None
) -> list[Example]:
    """The few-shot examples with the verified queries first.

    Args:
        verified, examples: verified queries as examples (most similar first); the others.
        k: how many at most; None keeps all.

    Returns:
        ``verified``, then the examples whose SQL is not one of theirs, cut to ``k``.
    """
    seen = {e.sql.strip().rstrip(";") for e in verified}
    out = list(verified) + [e for e in examples if e.sql.strip().rstrip(";") not in seen]
    return out if k is None else out[:k]


def presql_prompt(
    plpy, ctx: Context, schema: Schema, st: Settings, gate: Gate, model: str = ""
) -> tuple[str, Schema, dict]:
    """Build the PreSQL prompt, pruned to ``prompt_token_budget``; sets ``ctx.presql_schema``.
    Source: PET-SQL (Li et al. 2024) §3.1.

    Args:
        ctx, schema, st: the question's context, the role's schema, the settings.
        gate: the call's gate: the values and examples shown pass it.
        model: the PreSQL model's id: the budget counts tokens as its calls are counted
            (``linking.pruning.estimate_tokens``); '' for the estimate.

    Returns:
        ``(prompt, schema used, info)``; info: ``pruned``, ``tokens_full``, ``tokens``
        (estimated), ``tables_kept``, ``tables_total``, ``budget`` and what pruning adds.

    Raises:
        EmbeddingError: pruning needed the question's embedding and the model is missing.
    """
    retrieved = [] if st.examples_when == "on_failure" else ctx.candidates
    examples = gate.examples("presql", first_examples(ctx.verified, retrieved, st.k_examples))

    parts = _parts(ctx, schema, gate, "presql")

    def render(s: Schema) -> str:
        return _render(ctx, s, st, gate, examples, parts)

    keep = [t for t, _why in ctx.semantic.links()]
    for name, _c, _v in value_triples(
        schema, linking_values(schema, ctx.values, st.link_value_min)
    ):
        if name not in keep:
            keep.append(name)

    def scores() -> dict[str, float]:
        ctx.timings["columns_ms"] = ctx.timings.get("columns_ms", 0.0) + add_columns(
            plpy, ctx, schema
        )
        return ctx.scores or {}

    used, info = prune_schema(schema, scores, st.prompt_token_budget, render, keep, model=model)
    ctx.presql_schema = used
    return render(used), used, info


def _parts(ctx: Context, schema: Schema, gate: Gate, stage: str) -> tuple:
    """What the gate lets ``stage`` show beside the schema: the values, the business context
    and the semantic model's objects (each gated once, for every render of the prompt)."""
    return (
        gate.values(stage, value_triples(schema, ctx.values)),
        ctx.business.prompt_text(gate, stage),
        ctx.semantic.gated(gate, stage),
    )


def _render(
    ctx: Context, s: Schema, st: Settings, gate: Gate, examples: list[Example], parts: tuple
) -> str:
    """The PreSQL prompt over ``s`` with ``examples`` (gated) and ``parts`` (``_parts``)."""
    shown, business, semantic = parts
    tables = {t.name for t in s.tables}
    return prompts.build_prompt(
        ctx.question,
        s,
        examples,
        st.sample_values,
        ctx.evidence,
        [v for v in shown if v[0] in tables],
        _context_text(business, ctx.semantic.prompt_text(tables, semantic)),
        gate.turns("presql", ctx.turns),
    )


def prompt_with_examples(ctx: Context, st: Settings, gate: Gate) -> str | None:
    """The PreSQL prompt as setting ``examples_when`` = ``always`` builds it: the schema the
    first prompt showed (``ctx.presql_schema``) with the retrieved examples. With
    ``on_failure`` the repair of a failed candidate starts from it.

    Args:
        ctx, st, gate: the question's context (after ``presql_prompt``), the settings, the
            call's gate.

    Returns:
        The prompt, or None when there is no retrieved example to add (or no PreSQL schema).
    """
    examples = first_examples(ctx.verified, ctx.candidates, st.k_examples)
    if ctx.presql_schema is None or len(examples) <= len(ctx.verified[: st.k_examples]):
        return None
    schema = ctx.presql_schema
    shown = gate.examples("repair", examples)
    return _render(ctx, schema, st, gate, shown, _parts(ctx, schema, gate, "repair"))


def link_and_select(
    ctx: Context, schema: Schema, presql: str | None, st: Settings, presql_text: str | None = None
) -> tuple[Linked, Selection]:
    """Link the schema from the PreSQL and select the FinSQL examples (DAIL). Source: PET-SQL (Li et
    al. 2024) §3.3; DAIL-SQL (Gao et al. 2023) §3.3.

    Args:
        ctx, schema, st: the question's context (after ``add_columns``), the role's schema,
            the settings.
        presql: the PreSQL's SQL, or None when there is none.
        presql_text: the PreSQL as the model wrote it (its tokens name tables when ``presql``
            is None or does not parse); None for ``presql``.

    Returns:
        ``(Linked, Selection)``: the linked tables and columns, and the chosen examples.

    Raises:
        ValueError: ``add_columns`` has not run on ``ctx``.
    """
    if ctx.column_sims is None:
        raise ValueError("link_and_select: run add_columns(plpy, ctx, schema) first")
    similar = [c for c in ctx.column_sims if c[3] >= st.link_column_min]
    linked = link_schema(
        schema,
        presql,
        ctx.values,
        similar,
        st.link_value_min,
        ctx.presql_schema,
        presql_text,
        ctx.question,
        ctx.semantic.links(),
    )
    sel = dail_select(
        ctx.candidates, ctx.skeletons, presql_skeleton(presql), st.k_examples, st.dail_tau
    )
    return linked, sel


def finsql_prompt(
    ctx: Context, schema: Schema, linked: Linked, sel: Selection, st: Settings, gate: Gate
) -> tuple[str, Schema]:
    """Build the FinSQL prompt over the linked tables. Source: PET-SQL (Li et al. 2024) §3.3.

    Args:
        ctx, schema, st: the question's context, the role's schema, the settings.
        linked, sel: from ``link_and_select``.
        gate: the call's gate: the values and examples shown pass it.

    Returns:
        ``(prompt, schema used)``: the linked tables only (the whole schema when nothing
        linked), with those tables' matched values and the selected examples.
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
        context_text(ctx, tables, gate, "finsql"),
        gate.turns("finsql", ctx.turns),
    )
    return prompt, fin_schema


def context_text(ctx: Context, tables: set[str], gate: Gate, stage: str) -> str:
    """The business context and the semantic model's objects of ``tables`` (their expressions
    through the gate's SQL path), as one prompt part.

    Args:
        ctx: the question's context.
        tables: prompt names of the tables the prompt shows.
        gate, stage: the call's gate and the asking stage.

    Returns:
        The text; ``""`` when there is neither.
    """
    semantic = ctx.semantic.prompt_text(tables, ctx.semantic.gated(gate, stage, tables))
    return _context_text(ctx.business.prompt_text(gate, stage), semantic)


def _context_text(business: str, semantic: str) -> str:
    """The business context and the semantic model's block, as one prompt part."""
    return "\n\n".join(p for p in (business, semantic) if p)
