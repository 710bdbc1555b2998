"""``self_compared_join``: a join condition that compares a column with itself (``T1.id =
t1.id``: every row joins every row), written when a small model mixes up its aliases. Said to
the model; the query's own text shows it (no schema, no question).

Source: seen with Qwen2.5-Coder-0.5B-Instruct in bench/live.py (docs/benchmarks.md).
"""

from __future__ import annotations

from sqlglot import exp

from .._context import Context, Outcome
from .._sql import same_column

__all__ = ["run"]


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Say a join condition that compares a column with itself (true for every pair of rows, so
    the join is a cross product).

    Args:
        tree: the candidate's shared parse (read only), or None.
        ctx: the candidate (not read beyond its parse).

    Returns:
        The sentence, naming the condition; None when there is none (or no parse).
    """
    for join in tree.find_all(exp.Join) if tree is not None else ():
        on = join.args.get("on")
        for eq in on.find_all(exp.EQ) if on is not None else ():
            left, right = eq.this, eq.expression
            if isinstance(left, exp.Column) and same_column(left, right):
                same = eq.sql(dialect="postgres")
                return Outcome(
                    "self_compared_join",
                    sentence=(
                        f"the join condition {same} compares a column with itself, so every row "
                        "of one table is joined with every row of the other; join on the "
                        "columns that relate them"
                    ),
                )
    return None
