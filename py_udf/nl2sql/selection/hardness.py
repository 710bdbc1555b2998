"""SQL hardness by Spider's rules (easy / medium / hard / extra), computed with sqlglot, and
PET-SQL's fine-grained voting: the PreSQL's hardness selects which models write and vote.

Spider's evaluation script (Yu et al. 2018, ``evaluation.py``: ``count_component1``,
``count_component2``, ``count_others``, ``eval_hardness``) counts, on the outermost SELECT:

* component 1: WHERE, GROUP BY, ORDER BY, LIMIT present (1 each); one per JOIN; one per OR and
  per LIKE in the join/WHERE/HAVING conditions;
* component 2: nested queries — subqueries in join/WHERE/HAVING conditions, and one for a
  UNION / INTERSECT / EXCEPT;
* others: more than one aggregate, more than one SELECT column, more than one WHERE
  condition, more than one GROUP BY expression (1 each);

and classifies: easy when c1 ≤ 1, others = 0, c2 = 0; medium when (others ≤ 2, c1 ≤ 1,
c2 = 0) or (c1 ≤ 2, others < 2, c2 = 0); hard when (others > 2, c1 ≤ 2, c2 = 0) or
(2 < c1 ≤ 3, others ≤ 2, c2 = 0) or (c1 ≤ 1, others = 0, c2 ≤ 1); extra otherwise.

Source for the voting: PET-SQL (Li et al. 2024) §3.4, fine-grained voting — the models that
vote are chosen per PreSQL hardness level.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import walk_in_scope

from ..core.errors import CandidateRefused
from ..core.sqlcheck import parse_shared, parse_single


@dataclass
class HardnessCounts:
    """Spider's three counts for one query and the hardness level they give.

    Source: Spider's hardness rules (Yu et al. 2018), ``evaluation.py``.

    Attributes:
        component1: int, Spider's ``count_component1`` on the outermost SELECT (WHERE, GROUP BY,
            ORDER BY, LIMIT, one per JOIN, one per OR and per LIKE in its conditions).
        component2: int, Spider's ``count_component2``: subqueries used by the outermost SELECT's
            join/WHERE/HAVING conditions, plus one for a UNION / INTERSECT / EXCEPT.
        others: int, Spider's ``count_others``, 0..4 (more than one aggregate, SELECT column,
            WHERE condition, GROUP BY expression: 1 each).
        level: str, ``easy``, ``medium``, ``hard`` or ``extra`` (``classify`` of the three
            counts).
    """

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
    """Subqueries directly used by one condition (``x IN (SELECT …)``, ``x > (SELECT …)``),
    each counted once (no descent into them)."""
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


def counts(tree: exp.Expression) -> HardnessCounts:
    """Count Spider's component1 / component2 / others on a parsed query and classify it.

    Only the outermost query level is counted: nested SELECTs count as component 2 and are not
    descended into; for a set operation, its leftmost SELECT is the one counted.

    Source: Spider's hardness rules (Yu et al. 2018), ``evaluation.py``: ``count_component1``,
    ``count_component2``, ``count_others``, ``eval_hardness``.

    Args:
        tree: sqlglot tree of one query (SELECT, set operation or parenthesised query).

    Returns:
        HardnessCounts with the three counts and the level. A tree with no SELECT at the outermost
        level gives all-zero counts (component 2 being 1 for a set operation).
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
    all_cond_roots = [
        x
        for x in (
            where.this if where else None,
            having.this if having else None,
            *[j.args.get("on") for j in joins],
        )
        if x is not None
    ]
    n_or = sum(1 for r in all_cond_roots for x in walk_in_scope(r) if isinstance(x, exp.Or))
    n_like = sum(
        1
        for c in wconds + hconds + jconds
        if isinstance(c, (exp.Like, exp.ILike))
        or (isinstance(c, exp.Not) and isinstance(c.this, (exp.Like, exp.ILike)))
    )
    c1 = (
        bool(where)
        + bool(group)
        + bool(order)
        + bool(sel.args.get("limit"))
        + len(joins)
        + n_or
        + n_like
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

    Source: Spider's hardness rules (Yu et al. 2018), ``evaluation.py``: ``eval_hardness``.

    Args:
        c1: int, component-1 count.
        c2: int, component-2 count (nested queries and set operations).
        others: int, the "others" count, 0..4.

    Returns:
        ``"easy"``, ``"medium"``, ``"hard"`` or ``"extra"`` (rules in the module docstring).
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
    """Classify one SQL statement by Spider's hardness rules.

    A PostgreSQL statement (the PreSQL) is parsed through ``sqlcheck.parse_shared``, so the tree
    that linking and the skeleton already parsed is reused; another dialect is parsed afresh.

    Source: Spider's hardness rules (Yu et al. 2018).

    Args:
        sql: SQL text of one statement.
        dialect: sqlglot dialect name of ``sql`` (default ``postgres``).

    Returns:
        ``"easy"``, ``"medium"``, ``"hard"`` or ``"extra"``; None when ``sql`` is empty, does not
        parse, or is not exactly one statement (never raises for those).
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
    """Choose the models that write FinSQL and vote for a PreSQL of hardness ``level``.

    Source: PET-SQL (Li et al. 2024) §3.4, fine-grained voting (the voting models are chosen
    per PreSQL hardness level).

    Args:
        level: the PreSQL's Spider hardness (``easy``/``medium``/``hard``/``extra``), or None when
            it is unknown (the PreSQL did not parse).
        voters: level -> model names that vote at that level (from
            ``setting_declaration.parse_hardness_voters``); empty turns hardness routing off.
        models: the enabled model names, in order.

    Returns:
        (chosen model names, in ``models`` order; one-line reason for the trace). All of
        ``models`` when routing is off, the level is unknown or has no voters configured, or the
        configured names match no enabled model.
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
