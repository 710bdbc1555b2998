"""``split_contradiction``: a WHERE no row can satisfy, one column held to two values at once
(``year = 2014 AND year = 2015``, ``age > 40 AND age < 30``). Small models write it for "both …
and" questions ("stadiums that had concerts in both 2014 and 2015", "countries where a singer
above 40 and a singer below 30 are from"); the question's reading is the rows of each condition
intersected: ``… WHERE year = 2014 INTERSECT … WHERE year = 2015``. Such a query's result is
empty whatever the data, so round 0's rewrite of an empty result loses no answer.

Source: seen with Qwen2.5-Coder-0.5B-Instruct in bench/live.py (docs/benchmarks.md); Spider
writes its "both" questions with INTERSECT (Yu et al. 2018).
"""

from __future__ import annotations

from sqlglot import exp

from .._context import Context, Outcome
from .._sql import conjuncts
from ._tree import literal_value

__all__ = ["run"]

_LOWER = (exp.GT, exp.GTE)  # column > / >= literal: a lower bound
_UPPER = (exp.LT, exp.LTE)  # column < / <= literal: an upper bound
_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Rewrite a SELECT whose WHERE holds one column to two values no row has at once as the
    INTERSECT of one SELECT per value, every other condition kept in each.

    Args:
        tree: the candidate's shared parse (read only: the branches are new trees), or None.
        ctx: the candidate (not read beyond its parse).

    Returns:
        The rewrite (``… (no row at once) -> INTERSECT``); None when the SQL has no such WHERE,
        or is not a plain SELECT (a set operation, GROUP BY, HAVING, aggregates, ORDER BY, LIMIT
        or a WITH, where an INTERSECT would mean something else), or does not parse.
    """
    if not _plain_select(tree):
        return None
    tree = tree.copy()
    ands = conjuncts(tree.args["where"].this)
    branches = _clash(ands)
    if branches is None:
        return None
    rest = [c for i, c in enumerate(ands) if i not in branches]
    selects = [tree.where(exp.and_(*rest, ands[i]), append=False) for i in branches]
    out = selects[0]
    for s in selects[1:]:
        out = exp.Intersect(this=out, expression=s, distinct=True)
    held = " AND ".join(ands[i].sql(dialect="postgres") for i in branches)
    change = f"{held} (no row at once) -> INTERSECT"
    return Outcome("split_contradiction", out.sql(dialect="postgres"), (change,))


def _plain_select(tree: exp.Expression | None) -> bool:
    """A SELECT with a WHERE and nothing an INTERSECT of its branches would change."""
    if not isinstance(tree, exp.Select) or tree.args.get("where") is None:
        return False
    if any(tree.args.get(k) for k in ("group", "having", "order", "limit", "offset", "with")):
        return False
    return not any(e.find(exp.AggFunc, exp.Window) for e in tree.expressions)


def _clash(conjuncts: list[exp.Expression]) -> list[int] | None:
    """The conjuncts (indexes) that hold one column to values no row has at once: two or more
    equalities with different values, else a lower and an upper bound that leave no value,
    else an equality outside a bound. None when there are none."""
    by_column: dict[str, list[tuple[int, type, object]]] = {}
    for i, c in enumerate(conjuncts):
        found = _bound(c)
        if found is not None:
            by_column.setdefault(found[0], []).append((i, found[1], found[2]))
    for held in by_column.values():
        eqs = [(i, v) for i, op, v in held if op is exp.EQ]
        if len({v for _, v in eqs}) > 1:
            return [i for i, _ in eqs]
        for i, op_i, a in held:
            for j, op_j, b in held:
                if i != j and _apart(op_i, a, op_j, b):
                    return sorted((i, j))
    return None


def _bound(c: exp.Expression) -> tuple[str, type, object] | None:
    """``(column key, comparison, value)`` of ``column op literal`` (either side), else None."""
    if type(c) not in _FLIP:
        return None
    col, lit, op = c.this, c.expression, type(c)
    if isinstance(lit, exp.Column):
        col, lit, op = lit, col, _FLIP[op]
    value = literal_value(lit)
    if not isinstance(col, exp.Column) or value is None:
        return None
    return col.sql(dialect="postgres", normalize=True), op, value


def _apart(op_a: type, a: tuple, op_b: type, b: tuple) -> bool:
    """Whether ``col op_a a AND col op_b b`` holds for no value: a lower bound above an upper
    one, or an equality a bound excludes (numbers only)."""
    if a[0] != "n" or b[0] != "n":
        return False
    x, y = a[1], b[1]
    if op_a in _LOWER and op_b in _UPPER:
        return x > y or (x == y and (op_a is exp.GT or op_b is exp.LT))
    if op_a is exp.EQ and op_b in _LOWER:
        return x < y or (x == y and op_b is exp.GT)
    if op_a is exp.EQ and op_b in _UPPER:
        return x > y or (x == y and op_b is exp.LT)
    return False
