"""``anti_joined``: a question that asks for what has *no* match answered with an inner join
that keeps rows whose joined table's column IS NULL (``professionals AS T1 JOIN treatments AS T2
ON … WHERE T2.dog_id IS NULL``): an inner join keeps matched rows only; round 0 makes it the LEFT
JOIN of the anti-join idiom (final), and the model is told why.

Source: bench/live.py's answers of Qwen2.5-Coder-0.5B and 1.5B-Instruct on Spider dev
(docs/benchmarks.md); in Spider dev no gold and none of the 13 systems' 22 joined IS NULL answers
is an inner join (all are LEFT JOIN anti-joins of negated questions).
"""

from __future__ import annotations

import re

from sqlglot import exp

from .._context import Context, Outcome
from .._sql import conjuncts

__all__ = ["run"]

# a question that asks for what has no match
_NEGATED = re.compile(r"\b(?:not|no|without|never|none)\b|n't\b", re.I)


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Make an inner join whose table's column the WHERE holds NULL the LEFT JOIN of the
    anti-join idiom, where the question is negated ("not", "no", "without", "never").

    Args:
        tree: the candidate's shared parse (copied before it is changed), or None.
        ctx: the candidate (its question; the sentence only with a schema).

    Returns:
        The rewrite (``JOIN t made LEFT``, final) and, given a schema, its sentence; None where
        the question says no negation, or no inner join of the top SELECT has a column
        (qualified with its name) held NULL by a top-level AND of the WHERE, or another
        condition of the WHERE reads that table.
    """
    if not ctx.question or not _NEGATED.search(ctx.question) or tree is None:
        return None
    tree = tree.copy()
    where = tree.args.get("where") if isinstance(tree, exp.Select) else None
    if where is None:
        return None
    ands = conjuncts(where.this)
    for join in tree.args.get("joins") or []:
        if join.side or join.kind not in ("", "INNER") or not isinstance(join.this, exp.Table):
            continue
        name = join.this.alias_or_name.lower()
        held = [c for c in ands if _held_null(c, name)]
        others = [c for c in ands if c not in held]
        if held and not any(
            x.table.lower() == name for c in others for x in c.find_all(exp.Column)
        ):
            join.set("side", "LEFT")
            join.set("kind", None)
            column = held[0].this.sql(dialect="postgres")
            change = f"JOIN {join.this.name} made LEFT ({column} IS NULL)"
            sentence = (
                f"the query keeps rows where {column} IS NULL, but its inner join keeps only rows "
                f"that have a match in {join.this.name}; to find rows without one, LEFT JOIN it"
            )
            return Outcome(
                "anti_joined",
                tree.sql(dialect="postgres"),
                (change,),
                final=True,
                sentence=sentence if ctx.schema is not None else None,
            )
    return None


def _held_null(c: exp.Expression, name: str) -> bool:
    """Whether ``c`` is ``name.column IS NULL``."""
    return (
        isinstance(c, exp.Is)
        and isinstance(c.expression, exp.Null)
        and isinstance(c.this, exp.Column)
        and c.this.table.lower() == name
    )
