"""``ungrouped_each``: a question that asks for a figure for *each* of something ("the average
weight of cars each year") answered by aggregates with no GROUP BY: one row over all rows. Said
to the model.

Source: seen with Qwen2.5-Coder-0.5B-Instruct in bench/live.py (docs/benchmarks.md); in Spider's
472 dev questions none of the 68 that say "each" has such a gold query (one that says "per"
does: "miles per gallon", so "per" is not read).
"""

from __future__ import annotations

import re

from sqlglot import exp

from .._context import Context, Outcome
from ._tree import at_top

__all__ = ["run"]

_EACH = re.compile(r"\beach\b(?!\s+other\b)", re.I)


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Say a question that asks for a figure for each of something ("each", not "each other")
    answered by a SQL that aggregates at its top level with no GROUP BY (one row over all rows).

    Args:
        tree: the candidate's shared parse (read only), or None.
        ctx: the candidate (its question).

    Returns:
        The sentence, or None for another pair (or no question, or no parse).
    """
    if not ctx.question or not _EACH.search(ctx.question):
        return None
    if not isinstance(tree, exp.Select) or tree.args.get("group"):
        return None
    if not any(at_top(e, tree, exp.AggFunc) for e in tree.expressions):
        return None
    return Outcome(
        "ungrouped_each",
        sentence=(
            "the question asks for a figure for each of something, but the query aggregates "
            "without GROUP BY and so returns one row over all rows; group by what the question "
            "says each of"
        ),
    )
