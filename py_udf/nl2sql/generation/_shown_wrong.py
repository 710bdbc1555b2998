"""A query that runs and is wrong in a way its own text shows (repair, docs/internals/generation.md
"Repair"):

- ``self_compared_join``: a join condition that compares a column with itself (``T1.id =
  t1.id``: every row joins every row), written when a small model mixes up its aliases.
- ``repeated_output``: a select list naming the same expression twice (``SELECT c.name,
  c.name``), which no question asks for: the model meant another column.
- ``split_contradiction``: a WHERE no row can satisfy, one column held to two values at once
  (``year = 2014 AND year = 2015``, ``age > 40 AND age < 30``). Small models write it for "both
  … and" questions ("stadiums that had concerts in both 2014 and 2015", "countries where a
  singer above 40 and a singer below 30 are from"); the question's reading is the rows of each
  condition intersected: ``… WHERE year = 2014 INTERSECT … WHERE year = 2015``. Such a query's
  result is empty whatever the data, so the rewrite loses no answer.

Seen with Qwen2.5-Coder-0.5B-Instruct in bench/live.py (docs/benchmarks.md); the rules are the
SQL's, never one database's. Spider writes its "both" questions with INTERSECT (Yu et al. 2018).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sqlglot import exp

from ..core.errors import CandidateRefused
from ..core.sqlcheck import parse_one, parse_shared

__all__ = ["repeated_output", "self_compared_join", "shown_wrong", "split_contradiction"]

_LOWER = (exp.GT, exp.GTE)  # column > / >= literal: a lower bound
_UPPER = (exp.LT, exp.LTE)  # column < / <= literal: an upper bound
_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}


def shown_wrong(sql: str | None) -> str | None:
    """What a query that ran with rows shows wrong in its own text, for the repair prompt: a
    join condition that compares a column with itself (``self_compared_join``), or a select list
    naming one expression twice (``repeated_output``).

    Args:
        sql: the candidate's SQL (PostgreSQL), or None.

    Returns:
        One sentence on the problem, or None when the text shows none.
    """
    same = self_compared_join(sql)
    if same is not None:
        return (
            f"the join condition {same} compares a column with itself, so every row of one "
            "table is joined with every row of the other; join on the columns that relate them"
        )
    twice = repeated_output(sql)
    if twice is not None:
        return (
            f"the select list names {twice} twice; select each column the question asks for, once"
        )
    return None


def self_compared_join(sql: str | None) -> str | None:
    """Find a join condition that compares a column with itself (``T1.id = t1.id``: true for
    every pair of rows, so the join is a cross product): a query that runs and is wrong, which
    small models write when they mix up their aliases (bench/live.py's misses).

    Args:
        sql: the candidate's SQL (PostgreSQL), or None.

    Returns:
        The condition's text, or None when there is none (or the SQL does not parse).
    """
    tree = _parsed(sql)
    for join in tree.find_all(exp.Join) if tree is not None else ():
        on = join.args.get("on")
        for eq in on.find_all(exp.EQ) if on is not None else ():
            left, right = eq.this, eq.expression
            if isinstance(left, exp.Column) and _same_column(left, right):
                return eq.sql(dialect="postgres")
    return None


def _same_column(a: exp.Column, b: exp.Expression) -> bool:
    """Both name the same column of the same table (unquoted names compared as PostgreSQL folds
    them)."""
    if not isinstance(b, exp.Column):
        return False

    def key(c: exp.Column) -> tuple[str, ...]:
        return tuple(
            i.name if i.args.get("quoted") else i.name.lower()
            for i in (c.args.get("table"), c.args.get("this"))
            if isinstance(i, exp.Identifier)
        )

    return key(a) == key(b) and len(key(a)) == 2


def split_contradiction(sql: str | None) -> tuple[str, list[str]] | None:
    """Rewrite a SELECT whose WHERE holds one column to two values no row has at once as the
    INTERSECT of one SELECT per value, every other condition kept in each.

    Args:
        sql: a candidate's SQL (PostgreSQL).

    Returns:
        ``(the rewritten SQL, [what was rewritten])``; None when the SQL has no such WHERE, or is
        not a plain SELECT (a set operation, GROUP BY, HAVING, aggregates, ORDER BY, LIMIT or a
        WITH, where an INTERSECT would mean something else), or does not parse.
    """
    try:
        tree = parse_one(sql) if sql else None
    except CandidateRefused:
        return None
    if not _plain_select(tree):
        return None
    conjuncts = _conjuncts(tree.args["where"].this)
    branches = _clash(conjuncts)
    if branches is None:
        return None
    rest = [c for i, c in enumerate(conjuncts) if i not in branches]
    selects = [tree.where(exp.and_(*rest, conjuncts[i]), append=False) for i in branches]
    out = selects[0]
    for s in selects[1:]:
        out = exp.Intersect(this=out, expression=s, distinct=True)
    held = " AND ".join(conjuncts[i].sql(dialect="postgres") for i in branches)
    return out.sql(dialect="postgres"), [f"{held} (no row at once) -> INTERSECT"]


def repeated_output(sql: str | None) -> str | None:
    """The first select-list expression a SELECT names twice (``SELECT c.name, c.name``; in a
    SELECT of one table, with or without its qualifier: ``SELECT name, singer.name FROM
    singer``).

    Args:
        sql: a candidate's SQL (PostgreSQL).

    Returns:
        The expression's text, or None when every output differs (or the SQL does not parse).
        An output holding a literal is not compared: its text could carry a cell value into
        the repair prompt past the gate.
    """
    tree = _parsed(sql)
    if not isinstance(tree, exp.Select):
        return None
    # the FROM by its type: sqlglot names its key "from" or "from_" by version
    froms = [v for v in tree.args.values() if isinstance(v, exp.From)]
    one_table = not tree.args.get("joins") and [type(f.this) for f in froms] == [exp.Table]
    seen: set[str] = set()
    for e in tree.expressions:
        inner = e.this if isinstance(e, exp.Alias) else e
        # a literal's text may be a cell value (value alignment): never quoted to a model here
        if isinstance(inner, exp.Star) or inner.find(exp.Literal):
            continue
        key = _output_key(inner, one_table)
        if key in seen:
            return inner.sql(dialect="postgres")
        seen.add(key)
    return None


def _parsed(sql: str | None) -> exp.Expression | None:
    """The shared parse of ``sql``; None when there is none or it does not parse."""
    try:
        return parse_shared(sql) if sql else None
    except CandidateRefused:
        return None


def _output_key(e: exp.Expression, one_table: bool) -> str:
    """An output's text as PostgreSQL folds it; a column's without its qualifier when the SELECT
    reads one table (the qualifier can only name it)."""
    if one_table and isinstance(e, exp.Column):
        e = exp.column(e.args["this"].copy())
    return e.sql(dialect="postgres", normalize=True)


def _plain_select(tree: exp.Expression | None) -> bool:
    """A SELECT with a WHERE and nothing an INTERSECT of its branches would change."""
    if not isinstance(tree, exp.Select) or tree.args.get("where") is None:
        return False
    if any(tree.args.get(k) for k in ("group", "having", "order", "limit", "offset", "with")):
        return False
    return not any(e.find(exp.AggFunc, exp.Window) for e in tree.expressions)


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    """The conditions ``e`` ANDs together, through parentheses."""
    e = e.unnest()
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


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
    value = _value(lit)
    if not isinstance(col, exp.Column) or value is None:
        return None
    return col.sql(dialect="postgres", normalize=True), op, value


def _value(e: exp.Expression) -> object | None:
    """A literal's value: ``("n", Decimal)`` for a number, ``("s", text)`` for a string; None
    for anything else."""
    negative = isinstance(e, exp.Neg)
    e = e.this if negative else e
    if not isinstance(e, exp.Literal):
        return None
    if e.is_string:
        return None if negative else ("s", e.this)
    try:
        n = Decimal(e.this)
    except InvalidOperation:
        return None
    return ("n", -n if negative else n)


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
