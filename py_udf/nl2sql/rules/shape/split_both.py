"""``split_both``: a question that asks for what has *both* of two values ("stadiums that had
concerts in both 2014 and 2015", "students who have both cats and dogs") answered with ``IN (a,
b)`` or ``x = a OR x = b``, which keeps what has either. The question's reading is the rows of
each value intersected: round 0 rewrites it so (final, rows or none: an empty INTERSECT is its
answer), and ``said`` tells the model (two entries of ``rules.RULES``: the rewrite first among
round 0's, the sentence last among the findings). Only where both values are the question's own
words, the IN or OR under ANDs alone, and no SELECT on the way aggregates or groups (a ``GROUP BY
… HAVING count(DISTINCT …) = 2`` already means both).

Source: seen with Qwen2.5-Coder-0.5B-Instruct in bench/live.py (docs/benchmarks.md); 9 of Spider
dev's 10 "both" questions have an INTERSECT gold (Yu et al. 2018; the tenth says "list both
charge type and amount").
"""

from __future__ import annotations

import re

from sqlglot import exp

from .._context import Context, Outcome
from .._sql import same_column
from ._tree import literal_value

__all__ = ["run", "said"]

_BOTH = re.compile(r"\bboth\b", re.I)
# what may stand between a WHERE and the IN (or OR) that split_both rewrites
_UNDER_ANDS = (exp.And, exp.Paren, exp.Where, exp.Select, exp.Subquery, exp.In)


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Rewrite a query that keeps what has either of two values, where the question asks for
    what has both, as the INTERSECT of the query with each value in turn.

    The two values are an ``IN`` list of two literals or ``x = a OR x = b`` (one column), both
    the question's own words (a word of the question starts with each), under ANDs only (no
    NOT, OR, CASE between them and their WHERE); no SELECT from the top down to them groups or
    aggregates, and the top is a plain SELECT (no ORDER BY, LIMIT, WITH or set operation).

    Args:
        tree: the candidate's shared parse (copied before it is changed), or None.
        ctx: the candidate (its question).

    Returns:
        The rewrite (``… (both) -> INTERSECT``, final); None when the question does not say
        "both", the SQL has no one such pair of values, or it does not parse.
    """
    if not ctx.question or not _BOTH.search(ctx.question) or not isinstance(tree, exp.Select):
        return None
    if any(tree.args.get(k) for k in ("order", "limit", "offset", "with")):
        return None
    tree = tree.copy()
    pairs = [p for p in map(_either, tree.find_all(exp.In, exp.Or)) if p is not None]
    pairs = [
        p
        for p in pairs
        if _under_ands(p[0], tree) and _said(p[2], ctx.question) and _of_another_table(p, tree)
    ]
    if len(pairs) != 1:
        return None
    node, column, values = pairs[0]
    branches = []
    for v in values:
        eq = exp.EQ(this=column.copy(), expression=v.copy())
        node.replace(eq)
        branches.append(tree.copy())
        eq.replace(node)
    out = branches[0]
    for b in branches[1:]:
        out = exp.Intersect(this=out, expression=b, distinct=True)
    change = f"{node.sql(dialect='postgres')} (both) -> INTERSECT"
    return Outcome("split_both", out.sql(dialect="postgres"), (change,), final=True)


def said(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Say what ``run`` rewrites: the question asks for both values, the query keeps either.

    Args:
        tree: the candidate's shared parse (read only), or None.
        ctx: the candidate (its question).

    Returns:
        The sentence (no literal quoted), or None where ``run`` has no rewrite.
    """
    if run(tree, ctx) is None:
        return None
    return Outcome(
        "split_both_said",
        sentence=(
            "the question asks for what has both of two values, but the query keeps what has "
            "either one; intersect the rows of each value"
        ),
    )


def _either(
    node: exp.Expression,
) -> tuple[exp.Expression, exp.Column, list[exp.Literal]] | None:
    """``(node, column, [two literals])`` of ``column IN (a, b)`` or ``column = a OR column =
    b``; None for anything else."""
    if isinstance(node, exp.In) and not node.args.get("query"):
        col, lits = node.this, node.expressions
    elif isinstance(node, exp.Or):
        sides = [s.unnest() for s in (node.this, node.expression)]
        if not all(isinstance(s, exp.EQ) for s in sides):
            return None
        col, lits = sides[0].this, [s.expression for s in sides]
        if not same_column(col, sides[1].this) and col != sides[1].this:
            return None
    else:
        return None
    if not isinstance(col, exp.Column) or len(lits) != 2:
        return None
    if any(literal_value(v) is None or isinstance(v, exp.Neg) for v in lits):
        return None
    return (node, col, lits) if literal_value(lits[0]) != literal_value(lits[1]) else None


def _under_ands(node: exp.Expression, top: exp.Select) -> bool:
    """Whether only ANDs, parentheses and plain SELECTs (no GROUP BY, HAVING or aggregate)
    stand between ``node`` and ``top``, the IN of a subquery included, and a WHERE among them."""
    where, e = False, node.parent
    while e is not None:
        if not isinstance(e, _UNDER_ANDS):
            return False
        if isinstance(e, exp.In) and e.args.get("query") is None:
            return False
        if isinstance(e, exp.Select) and (
            e.args.get("group")
            or e.args.get("having")
            or any(x.find(exp.AggFunc, exp.Window) for x in e.expressions)
        ):
            return False
        where = where or isinstance(e, exp.Where)
        if e is top:
            return where
        e = e.parent
    return False


def _of_another_table(pair: tuple, top: exp.Select) -> bool:
    """Whether the pair's column is another table's than the outputs': inside a subquery, or a
    joined table's (by its qualifier) that no output names. A column of the output's own row
    holds one value at a time, so "both" of its values would be no row's."""
    node, column = pair[0], pair[1]
    if node.find_ancestor(exp.Select) is not top:
        return True
    qualifier = column.table.lower()
    if not top.args.get("joins") or not qualifier:
        return False
    outputs = {c.table.lower() for e in top.expressions for c in e.find_all(exp.Column)}
    return qualifier not in outputs


def _said(values: list[exp.Literal], question: str) -> bool:
    """Whether a word of the question starts with each literal's text (case folded)."""
    q = question.lower()
    return all(re.search(r"\b" + re.escape(v.this.lower()), q) for v in values)
