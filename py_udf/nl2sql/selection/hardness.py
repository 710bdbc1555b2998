"""Spider hardness with sqlglot, and PET-SQL's fine-grained voting (docs/internals/selection.md
"Hardness"). Sources: Spider (Yu et al. 2018); PET-SQL (Li et al. 2024) §3.4."""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import walk_in_scope

from ..core.errors import CandidateRefused
from ..core.sqlcheck import parse_shared, parse_single


@dataclass
class HardnessCounts:
    """Spider's three counts for one query (``count_component1``, ``count_component2``,
    ``count_others``, the last 0..4) and the ``level`` they give."""

    component1: int
    component2: int
    others: int
    level: str


def _conditions(cond: exp.Expression | None, root: exp.Expression) -> list[exp.Expression]:
    """Leaf conditions of an AND/OR tree (parentheses removed)."""
    if cond is None:
        return []
    if isinstance(cond, exp.Paren):
        return _conditions(cond.this, root)
    if isinstance(cond, (exp.And, exp.Or)):
        return _conditions(cond.left, root) + _conditions(cond.right, root)
    return [cond]


def _nested_in(cond: exp.Expression) -> int:
    """Subqueries directly used by one condition, each counted once (not descended into)."""
    n = 0
    stack = list(cond.iter_expressions())
    while stack:
        x = stack.pop()
        if isinstance(x, (exp.Select, exp.Subquery, exp.Union, exp.Intersect, exp.Except)):
            n += 1
            continue
        stack.extend(x.iter_expressions())
    return n


def _count_aggs(nodes: list[exp.Expression], root: exp.Expression) -> int:
    return sum(1 for n in nodes for x in walk_in_scope(n) if isinstance(x, exp.AggFunc))


def _outer_select(tree: exp.Expression) -> tuple[exp.Select | None, int]:
    """The leftmost SELECT of the outermost query and the number of set operations on top."""
    setops = 0
    t = tree
    while isinstance(t, (exp.Union, exp.Intersect, exp.Except, exp.Subquery)):
        if isinstance(t, exp.Subquery):
            t = t.this
            continue
        setops = 1  # Spider nests set operations: the outer one counts once
        t = t.left
    return (t if isinstance(t, exp.Select) else None), setops


def _ors_and_likes(roots: list[exp.Expression], conds: list[exp.Expression]) -> int:
    """``counts``' ORs in the condition ``roots`` (this query level) and LIKEs (``NOT LIKE``
    too) among its ``conds``: each a component 1."""
    n_or = sum(1 for r in roots for x in walk_in_scope(r) if isinstance(x, exp.Or))
    n_like = sum(
        1
        for c in conds
        if isinstance(c, (exp.Like, exp.ILike))
        or (isinstance(c, exp.Not) and isinstance(c.this, (exp.Like, exp.ILike)))
    )
    return n_or + n_like


def counts(tree: exp.Expression) -> HardnessCounts:
    """Count Spider's component1 / component2 / others on the outermost query level and classify.
    Source: Spider (Yu et al. 2018) ``evaluation.py``.

    Args:
        tree: sqlglot tree of one query (SELECT, set operation or parenthesised query).

    Returns:
        HardnessCounts; all-zero counts when the outermost level has no SELECT (component 2 is 1
        for a set operation).
    """
    sel, setops = _outer_select(tree)
    if sel is None:
        return HardnessCounts(0, setops, 0, classify(0, setops, 0))
    where = sel.args.get("where")
    having = sel.args.get("having")
    group = sel.args.get("group")
    joins = sel.args.get("joins") or []
    order = sel.args.get("order")
    wconds = _conditions(where.this if where else None, sel)
    hconds = _conditions(having.this if having else None, sel)
    jconds = [c for j in joins for c in _conditions(j.args.get("on"), sel)]
    roots = [where.this if where else None, having.this if having else None]
    roots += [j.args.get("on") for j in joins]
    c1 = (
        bool(where)
        + bool(group)
        + bool(order)
        + bool(sel.args.get("limit"))
        + len(joins)
        + _ors_and_likes([x for x in roots if x is not None], wconds + hconds + jconds)
    )
    c2 = setops + sum(_nested_in(c) for c in wconds + hconds + jconds)
    group_exprs = list(group.expressions) if group else []
    aggs = _count_aggs(
        list(sel.expressions) + wconds + group_exprs + hconds + ([order] if order else []), sel
    )
    others = (
        int(aggs > 1)
        + int(len(sel.expressions) > 1)
        + int(len(wconds) > 1)
        + int(len(group_exprs) > 1)
    )
    return HardnessCounts(c1, c2, others, classify(c1, c2, others))


def classify(c1: int, c2: int, others: int) -> str:
    """Apply Spider's ``eval_hardness`` rule to the three counts.

    Args:
        c1: int, component-1 count.
        c2: int, component-2 count (nested queries and set operations).
        others: int, the "others" count, 0..4.

    Returns:
        ``"easy"``, ``"medium"``, ``"hard"`` or ``"extra"``.
    """
    if c1 <= 1 and others == 0 and c2 == 0:
        return "easy"
    if (others <= 2 and c1 <= 1 and c2 == 0) or (c1 <= 2 and others < 2 and c2 == 0):
        return "medium"
    if (
        (others > 2 and c1 <= 2 and c2 == 0)
        or (2 < c1 <= 3 and others <= 2 and c2 == 0)
        or (c1 <= 1 and others == 0 and c2 <= 1)
    ):
        return "hard"
    return "extra"


def hardness(sql: str, dialect: str = "postgres") -> str | None:
    """Classify one SQL statement by Spider's hardness rules (PostgreSQL parsed once, shared).

    Args:
        sql: SQL text of one statement.
        dialect: sqlglot dialect name of ``sql`` (default ``postgres``).

    Returns:
        ``"easy"``, ``"medium"``, ``"hard"`` or ``"extra"``; None when ``sql`` is empty, does not
        parse, or is not one statement.
    """
    if dialect == "postgres":  # the PreSQL: already parsed for linking and its skeleton
        try:
            return counts(parse_shared(sql)).level
        except (CandidateRefused, ValueError):
            return None
    try:
        return counts(parse_single(sql, dialect)).level
    except CandidateRefused:
        return None


def route(
    level: str | None, voters: dict[str, list[str]], models: list[str]
) -> tuple[list[str], str]:
    """Choose the models that write FinSQL and vote for a PreSQL of hardness ``level``. Source:
    PET-SQL (Li et al. 2024) §3.4, fine-grained voting.

    Args:
        level: the PreSQL's Spider hardness, or None when unknown.
        voters: level -> model names (``setting_declaration.parse_hardness_voters``); empty: off.
        models: the enabled model names, in order.

    Returns:
        (chosen model names in ``models`` order; a reason for the trace). All of ``models`` when
        routing is off, the level unknown or unconfigured, or no configured name is enabled.
    """
    if not voters:
        return list(models), "hardness voting off"
    if level is None:
        return list(models), "PreSQL hardness unknown (did not parse): all models vote"
    names = voters.get(level)
    if not names:
        return list(models), f"no voters configured for {level}: all models vote"
    chosen = [m for m in models if m in names]
    if not chosen:
        return list(models), (
            f"voters for {level} ({', '.join(names)}) name no enabled model: all models vote"
        )
    return chosen, f"PreSQL is {level}: {', '.join(chosen)} vote"
