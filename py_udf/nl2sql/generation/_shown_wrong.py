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
- ``grouped_by_key``: a one-table query that counts over groups of the table's primary key:
  every group is one row, so every count is 1 ("for each continent, how many countries it
  has" answered from the continents table alone).
- ``ungrouped_each``: a question that asks for a figure for *each* of something ("the average
  weight of cars each year") answered by aggregates with no GROUP BY: one row over all rows.
  In Spider's 472 dev questions, none of the 68 that say "each" has such a gold query (one
  that says "per" does: "miles per gallon", so "per" is not read).
- ``split_both``: a question that asks for what has *both* of two values ("stadiums that had
  concerts in both 2014 and 2015", "students who have both cats and dogs") answered with
  ``IN (a, b)`` or ``x = a OR x = b``, which keeps what has either. The question's reading is
  the rows of each value intersected; 9 of Spider dev's 10 "both" questions have an INTERSECT
  gold (the tenth says "list both charge type and amount"). Only where both values are the
  question's own words, the IN or OR under ANDs alone, and no SELECT on the way aggregates or
  groups (a ``GROUP BY … HAVING count(DISTINCT …) = 2`` already means both).

Seen with Qwen2.5-Coder-0.5B-Instruct in bench/live.py (docs/benchmarks.md); the rules are the
SQL's, never one database's. Spider writes its "both" questions with INTERSECT (Yu et al. 2018).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from ..core.errors import CandidateRefused
from ..core.sqlcheck import parse_one
from ..core.types import Schema, Table
from ._shown_links import conjuncts, parsed_sql, table_named
from ._shown_subqueries import relation_problem

__all__ = [
    "against_meaning",
    "grouped_by_key",
    "repeated_output",
    "self_compared_join",
    "shown_wrong",
    "split_both",
    "split_contradiction",
    "ungrouped_each",
]

_LOWER = (exp.GT, exp.GTE)  # column > / >= literal: a lower bound
_UPPER = (exp.LT, exp.LTE)  # column < / <= literal: an upper bound
_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}
# the question's words the rules read (never the SQL's: that is parsed)
_EACH = re.compile(r"\beach\b(?!\s+other\b)", re.I)
_BOTH = re.compile(r"\bboth\b", re.I)
# what may stand between a WHERE and the IN (or OR) that split_both rewrites
_UNDER_ANDS = (exp.And, exp.Paren, exp.Where, exp.Select, exp.Subquery, exp.In)


def shown_wrong(
    sql: str | None, schema: Schema | None = None, question: str | None = None
) -> str | None:
    """What a query that ran with rows shows wrong in its own text (and, given them, against
    the schema's keys and the question's words), for the repair prompt: a join condition that
    compares a column with itself (``self_compared_join``), a select list naming one expression
    twice (``repeated_output``), tables related the wrong way (``_shown_links``,
    ``_shown_subqueries``), counts over groups of one row (``grouped_by_key``), one row
    where the question asks for each (``ungrouped_each``), either value where it asks for both
    (``split_both``). No sentence quotes a literal (a literal may be an aligned cell value).

    Args:
        sql: the candidate's SQL (PostgreSQL), or None.
        schema: the schema the candidate was written for (its primary keys), or None.
        question: the user's question, or None.

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
    return against_meaning(sql, schema, question)


def against_meaning(sql: str | None, schema: Schema | None, question: str | None) -> str | None:
    """``shown_wrong``'s rules that read the schema's keys or the question's words: what the
    query means is wrong, whoever wrote its text (the model, or a rewrite of repair's round 0).

    Args:
        sql: the candidate's SQL (PostgreSQL), or None.
        schema: the schema it was written for, or None.
        question: the user's question, or None.

    Returns:
        One sentence on the problem, or None.
    """
    linked = relation_problem(sql, schema, question)
    if linked is not None:
        return linked
    keyed = grouped_by_key(sql, schema) if schema is not None else None
    if keyed is not None:
        return (
            f"GROUP BY {keyed[1]} groups {keyed[0]} by its primary key, so every group is one "
            f"row and every count is 1; to count the rows related to each {keyed[0]} row, join "
            f"the table that refers to it{_referring(schema, keyed[0])}"
        )
    if question and ungrouped_each(sql, question):
        return (
            "the question asks for a figure for each of something, but the query aggregates "
            "without GROUP BY and so returns one row over all rows; group by what the question "
            "says each of"
        )
    if question and split_both(sql, question) is not None:
        return (
            "the question asks for what has both of two values, but the query keeps what has "
            "either one; intersect the rows of each value"
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
    tree = parsed_sql(sql)
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
    tree = parsed_sql(sql)
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


def grouped_by_key(sql: str | None, schema: Schema) -> tuple[str, str] | None:
    """A SELECT of one table that counts over groups holding the table's whole primary key:
    each group is one row, so each count is 1 (or 0).

    Args:
        sql: a candidate's SQL (PostgreSQL).
        schema: the schema it was written for (``Column.is_primary_key``).

    Returns:
        ``(the table's name, the GROUP BY's columns as text)``, or None when the SQL counts nothing at its
        top level, reads more than one table, does not group by a whole primary key, names a
        table the schema does not hold, or does not parse.
    """
    tree = parsed_sql(sql)
    if not isinstance(tree, exp.Select) or tree.args.get("joins") or not tree.args.get("group"):
        return None
    froms = [v for v in tree.args.values() if isinstance(v, exp.From)]
    if len(froms) != 1 or not isinstance(froms[0].this, exp.Table):
        return None
    if not any(_at_top(e, tree, exp.Count) for e in tree.expressions):
        return None
    table = _table_of(schema, froms[0].this)
    key = {c.name.lower() for c in table.columns if c.is_primary_key} if table else set()
    grouped = [g for g in tree.args["group"].expressions if isinstance(g, exp.Column)]
    if not key or not key <= {g.name.lower() for g in grouped}:
        return None
    # the grouped columns only: another GROUP BY expression may hold a literal (a cell value)
    return table.name, ", ".join(g.sql(dialect="postgres") for g in grouped)


def ungrouped_each(sql: str | None, question: str) -> bool:
    """Whether the question asks for a figure for each of something ("each", not "each
    other") and the SQL aggregates at its top level with no GROUP BY (one row over all rows).

    Args:
        sql: a candidate's SQL (PostgreSQL).
        question: the user's question.

    Returns:
        True for such a pair; False otherwise (or when the SQL does not parse).
    """
    if not _EACH.search(question or ""):
        return False
    tree = parsed_sql(sql)
    if not isinstance(tree, exp.Select) or tree.args.get("group"):
        return False
    return any(_at_top(e, tree, exp.AggFunc) for e in tree.expressions)


def split_both(sql: str | None, question: str | None) -> tuple[str, list[str]] | None:
    """Rewrite a query that keeps what has either of two values, where the question asks for
    what has both, as the INTERSECT of the query with each value in turn.

    The two values are an ``IN`` list of two literals or ``x = a OR x = b`` (one column), both
    the question's own words (a word of the question starts with each), under ANDs only (no
    NOT, OR, CASE between them and their WHERE); no SELECT from the top down to them groups or
    aggregates, and the top is a plain SELECT (no ORDER BY, LIMIT, WITH or set operation).

    Args:
        sql: a candidate's SQL (PostgreSQL).
        question: the user's question; None: nothing to read.

    Returns:
        ``(the rewritten SQL, [what was rewritten])``; None when the question does not say
        "both", the SQL has no one such pair of values, or it does not parse.
    """
    if not question or not _BOTH.search(question):
        return None
    try:
        tree = parse_one(sql) if sql else None
    except CandidateRefused:
        return None
    if not isinstance(tree, exp.Select) or any(
        tree.args.get(k) for k in ("order", "limit", "offset", "with")
    ):
        return None
    pairs = [p for p in map(_either, tree.find_all(exp.In, exp.Or)) if p is not None]
    pairs = [
        p
        for p in pairs
        if _under_ands(p[0], tree) and _said(p[2], question) and _of_another_table(p, tree)
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
    return out.sql(dialect="postgres"), [f"{node.sql(dialect='postgres')} (both) -> INTERSECT"]


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
        if not _same_column(col, sides[1].this) and col != sides[1].this:
            return None
    else:
        return None
    if not isinstance(col, exp.Column) or len(lits) != 2:
        return None
    if any(_value(v) is None or isinstance(v, exp.Neg) for v in lits):
        return None
    return (node, col, lits) if _value(lits[0]) != _value(lits[1]) else None


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


def _referring(schema: Schema, table: str) -> str:
    """`` (a.x refers to t.y; …)``: the schema's foreign keys into ``table`` (names only), or
    '' for none."""
    refs = [
        f"{fk.table}.{', '.join(fk.columns)} refers to {table}.{', '.join(fk.ref_columns)}"
        for fk in schema.foreign_keys
        if fk.ref_table == table and fk.table != table
    ]
    return f" ({'; '.join(refs[:3])})" if refs else ""


def _said(values: list[exp.Literal], question: str) -> bool:
    """Whether a word of the question starts with each literal's text (case folded)."""
    q = question.lower()
    return all(re.search(r"\b" + re.escape(v.this.lower()), q) for v in values)


def _at_top(e: exp.Expression, top: exp.Select, kind: type) -> bool:
    """Whether ``e`` holds a ``kind`` of ``top``'s own (not of a subquery, not a window's)."""
    return any(f.find_ancestor(exp.Select, exp.Window) is top for f in e.find_all(kind))


def _table_of(schema: Schema, t: exp.Table) -> Table | None:
    """The schema's table that ``t`` names (``_shown_links.table_named``), or None."""
    return table_named(schema, ".".join(i.name for i in (t.args.get("db"), t.this) if i))


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
