"""SQLite's semantics carried over to PostgreSQL, one rule per behaviour, on the parsed tree
(docs/internals/generation.md "SQLite rules"). Sources: the SQLite documentation.

And, for a PostgreSQL candidate that failed (repair's round 0, beside the names snapped:
``linking.names.snap_names``), ``fix_by_sqlstate``: SQL that SQLite, the dialect most
text-to-SQL training data is written in, runs and PostgreSQL refuses, rewritten where the
error has one reading:

- ``21000`` "more than one row returned by a subquery used as an expression": ``x = (SELECT …)``
  → ``x IN (SELECT …)`` (``<>`` → ``NOT … IN``); SQLite takes the subquery's first row, an
  arbitrary one, where the question asks for each.
- ``42803`` "must appear in the GROUP BY clause": a lone ``max``/``min`` beside bare columns →
  the row holding it (``minmax_rows``); else a SELECT with aggregates grouped by its select
  list's expressions that hold none, added to its GROUP BY when it has one (``SELECT format
  FROM t ORDER BY count(*)`` → ``… GROUP BY format``).

Seen with Qwen2.5-Coder-0.5B/1.5B-Instruct in bench/live.py (docs/internals/generation.md
"Repair"); the rules are the SQL's, never one database's."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import traverse_scope

from ...core.errors import CandidateRefused
from ...core.sqlcheck import parse_one, to_sql
from ...core.types import Schema, Table
from .aggregates import group_by_dependent, minmax_rows
from .scope import column_type, schema_table, source_table, tables_by_name, type_kind

__all__ = [
    "SqliteRewrite",
    "apply_sqlite_rules",
    "derived_aliases",
    "fix_by_sqlstate",
    "identifier_case",
    "like_nocase",
    "string_literals",
    "text_vs_number",
]

_COMPARE = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


@dataclass
class SqliteRewrite:
    """The outcome of ``apply_sqlite_rules``."""

    tree: exp.Expression  # the rewritten copy (the input is not changed)
    steps: list[str] = field(default_factory=list)  # rules applied, in order, each once
    reason: str | None = None  # why PostgreSQL cannot mean what SQLite does (a bare column)


def _known_names(tree: exp.Expression, tables: dict[str, Table]) -> dict[str, str] | None:
    """Every name a column reference may mean, lower-cased → its spelling (the tables' columns,
    output names, aliases); None when a table is not in the schema."""
    names: dict[str, str] = {}
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for node in tree.find_all(exp.Table):
        t = schema_table(node, tables)
        if t is None:
            if node.name.lower() in ctes:
                continue
            return None
        names.update((c.name.lower(), c.name) for c in t.columns)
    for node in tree.find_all(exp.Alias, exp.TableAlias):
        alias = node.alias if isinstance(node, exp.Alias) else node.name
        names.setdefault(alias.lower(), alias)
        if isinstance(node, exp.TableAlias):
            for c in node.columns:
                names.setdefault(c.name.lower(), c.name)
    return names


def string_literals(tree: exp.Expression, schema: Schema) -> tuple[exp.Expression, bool]:
    """``"x"`` naming no column in scope → the string literal ``'x'`` (SQLite's rule).

    Args:
        tree: a statement parsed as SQLite (sqlglot); changed in place.
        schema: the tables the statement may read.

    Returns:
        ``(tree, changed)``.
    """
    known = _known_names(tree, tables_by_name(schema))
    if known is None:
        return tree, False
    changed = False
    for col in list(tree.find_all(exp.Column)):
        ident = col.this
        if col.table or not isinstance(ident, exp.Identifier) or not ident.quoted:
            continue
        if ident.name.lower() not in known:
            col.replace(exp.Literal.string(ident.name))
            changed = True
    return tree, changed


def identifier_case(tree: exp.Expression, schema: Schema) -> tuple[exp.Expression, bool]:
    """A double-quoted name in another case than the database's takes the database's spelling
    (SQLite matches quoted names case-insensitively, PostgreSQL exactly).

    Args:
        tree: a statement parsed as SQLite (sqlglot); changed in place.
        schema: the tables the statement may read.

    Returns:
        ``(tree, changed)``.
    """
    tables = tables_by_name(schema)
    known = _known_names(tree, tables) or {}
    changed = False
    for ident in list(tree.find_all(exp.Identifier)):
        if not ident.quoted:
            continue
        parent = ident.parent
        if isinstance(parent, exp.Table) and parent.this is ident:
            t = tables.get(ident.name.lower())
            real = t.table if t is not None else None
        elif isinstance(parent, exp.Column) and parent.this is ident:
            real = known.get(ident.name.lower())
        else:
            continue
        if real is not None and real != ident.name:
            ident.replace(exp.to_identifier(real))
            changed = True
    return tree, changed


def derived_aliases(tree: exp.Expression) -> tuple[exp.Expression, bool]:
    """A derived table (a subquery in FROM or JOIN) without an alias gets ``derived_<n>``.

    Args:
        tree: a statement tree; changed in place.

    Returns:
        ``(tree, changed)``.
    """
    changed = False
    taken = {a.name.lower() for a in tree.find_all(exp.TableAlias)}
    n = 0
    for sub in list(tree.find_all(exp.Subquery)):
        if sub.alias or not isinstance(sub.parent, (exp.From, exp.Join)):
            continue
        n += 1
        while f"derived_{n}" in taken:
            n += 1
        sub.set("alias", exp.TableAlias(this=exp.to_identifier(f"derived_{n}")))
        changed = True
    return tree, changed


def like_nocase(tree: exp.Expression) -> tuple[exp.Expression, bool]:
    """SQLite's ``LIKE`` is case-insensitive (ASCII): every ``LIKE`` becomes ``ILIKE``.

    Args:
        tree: a statement tree; changed in place.

    Returns:
        ``(tree, changed)``.
    """
    changed = False
    for like in list(tree.find_all(exp.Like)):
        like.replace(exp.ILike(**like.args))  # keeps NOT (negate) and the operands
        changed = True
    return tree, changed


def text_vs_number(tree: exp.Expression, schema: Schema) -> tuple[exp.Expression, bool]:
    """SQLite's comparison affinity: a number compared with a text column becomes a string
    literal; a numeric column compared with a text column is cast to text.

    Args:
        tree: a statement tree; changed in place.
        schema: the tables the statement may read (column types).

    Returns:
        ``(tree, changed)``.
    """
    tables = tables_by_name(schema)
    changed = False
    try:
        scopes = traverse_scope(tree)
    except (SqlglotError, KeyError, ValueError):
        return tree, False
    for scope in scopes:

        def kind(node: exp.Expression) -> str | None:
            if isinstance(node, exp.Column):
                hit = source_table(scope, node, tables)  # noqa: B023 - called within this iteration
                return type_kind(column_type(hit[1], node.name)) if hit else None
            if isinstance(node, exp.Literal) and not node.is_string:
                return "literal"
            if (
                isinstance(node, exp.Neg)
                and isinstance(node.this, exp.Literal)
                and not node.this.is_string
            ):
                return "literal"
            return None

        for cmp in [
            n
            for n in scope.expression.find_all(*_COMPARE, exp.In)
            if n.find_ancestor(exp.Select) is scope.expression
        ]:
            left = cmp.this
            rights = list(cmp.expressions) if isinstance(cmp, exp.In) else [cmp.expression]
            lk = kind(left)
            for right in rights:
                rk = kind(right)
                pair = {lk, rk}
                if pair == {"text", "literal"}:
                    lit = right if rk == "literal" else left
                    lit.replace(exp.Literal.string(lit.sql()))
                    changed = True
                elif pair == {"text", "number"} and not isinstance(cmp, exp.In):
                    num = right if rk == "number" else left
                    num.replace(exp.Cast(this=num.copy(), to=exp.DataType.build("text")))
                    changed = True
    return tree, changed


def apply_sqlite_rules(tree: exp.Expression, schema: Schema) -> SqliteRewrite:
    """Rewrite a statement parsed as SQLite so that PostgreSQL gives what SQLite would.

    Rules, in order: ``sqlite:string_literal``, ``identifier_case``, ``derived_alias``,
    ``like_nocase``, ``text_vs_number``, ``minmax_row``, ``group_by_dependent``.

    Args:
        tree: the statement parsed with sqlglot's ``sqlite`` dialect (not changed).
        schema: the tables the calling role may read (column names, types, primary keys).

    Returns:
        ``SqliteRewrite(tree, steps, reason)``: the rewritten copy, the rules applied, and the
        reason when a bare column is not dependent on the GROUP BY key.
    """
    tree = tree.copy()
    steps: list[str] = []
    tree, ch = string_literals(tree, schema)
    if ch:
        steps.append("sqlite:string_literal")
    tree, ch = identifier_case(tree, schema)
    if ch:
        steps.append("sqlite:identifier_case")
    tree, ch = derived_aliases(tree)
    if ch:
        steps.append("sqlite:derived_alias")
    tree, ch = like_nocase(tree)
    if ch:
        steps.append("sqlite:like_nocase")
    tree, ch = text_vs_number(tree, schema)
    if ch:
        steps.append("sqlite:text_vs_number")
    tree, ch = minmax_rows(tree)
    if ch:
        steps.append("sqlite:minmax_row")
    tree, ch, reason = group_by_dependent(tree, schema)
    if ch:
        steps.append("sqlite:group_by_dependent")
    return SqliteRewrite(tree, steps, reason)


CARDINALITY = "21000"  # cardinality_violation
GROUPING = "42803"  # grouping_error


def fix_by_sqlstate(sql: str | None, sqlstate: str | None) -> tuple[str, list[str]] | None:
    """The failing query rewritten by its error's one reading.

    Args:
        sql: the candidate's SQL (PostgreSQL).
        sqlstate: the SQLSTATE its execution failed with (five characters), or None.

    Returns:
        ``(rewritten SQL, ["what changed", ...])``, or None when the error has no rule here, the
        query does not parse, or nothing in it fits the rule.
    """
    rule = _RULES.get(sqlstate or "")
    if rule is None:
        return None
    try:
        tree = parse_one(sql or "")
    except CandidateRefused:
        return None
    changes = rule(tree)
    return (to_sql(tree), changes) if changes else None


def _subquery_in(tree: exp.Expression) -> list[str]:
    """``x = (SELECT …)`` → ``x IN (SELECT …)``, ``x <> (SELECT …)`` → ``NOT x IN (SELECT …)``."""
    changes = []
    for cmp in list(tree.find_all(exp.EQ, exp.NEQ)):
        left, right = cmp.this, cmp.expression
        if isinstance(left, exp.Subquery) and not isinstance(right, exp.Subquery):
            left, right = right, left
        if not isinstance(right, exp.Subquery) or isinstance(left, exp.Subquery):
            continue
        new: exp.Expression = exp.In(this=left.copy(), query=right.copy())
        if isinstance(cmp, exp.NEQ):
            new = exp.Not(this=new)
        cmp.replace(new)
        changes.append(f"{'<>' if isinstance(cmp, exp.NEQ) else '='} (subquery) → IN")
    return changes


def _grouped(tree: exp.Expression) -> list[str]:
    """A lone max/min's row (``minmax_rows``), else each SELECT with aggregates grouped by its
    select list's expressions that hold no aggregate (added to a GROUP BY it has: what the
    error asks), and a grouped SELECT's ORDER BY column that is neither grouped nor aggregated
    ordered by its groups' ``max`` (descending) or ``min`` (ascending)."""
    _, changed = minmax_rows(tree)
    if changed:
        return ["max/min beside bare columns → the row holding it"]
    changes = []
    for sel in list(tree.find_all(exp.Select)):
        keys = _group_keys(sel)
        if keys:
            sel.group_by(*keys, copy=False)
            changes.append(f"GROUP BY {', '.join(k.sql() for k in keys)} added")
        changes += _order_by_groups(sel)
    return changes


def _order_by_groups(sel: exp.Select) -> list[str]:
    """A grouped SELECT's ORDER BY columns that are neither grouped nor selected by name, each
    put in its groups' ``max`` where descending, ``min`` where ascending: every group stands
    where its first row would in the rows so ordered (``ORDER BY year DESC`` of record
    companies: the company of the latest year first)."""
    group, order = sel.args.get("group"), sel.args.get("order")
    if not group or not order:
        return []
    grouped = {g.sql().lower() for g in group.expressions}
    grouped |= {g.name.lower() for g in group.expressions if isinstance(g, exp.Column)}
    named = {e.alias_or_name.lower() for e in sel.expressions}
    changes = []
    for term in order.expressions:
        col = term.this
        if not isinstance(col, exp.Column) or isinstance(col.this, exp.Star):
            continue
        if col.sql().lower() in grouped or col.name.lower() in grouped:
            continue
        if not col.table and col.name.lower() in named:  # an output column's name
            continue
        agg = exp.Max if term.args.get("desc") else exp.Min
        col.replace(agg(this=col.copy()))
        changes.append(f"ORDER BY {col.sql()} → {agg.key.upper()}({col.sql()})")
    return changes


def _group_keys(sel: exp.Select) -> list[exp.Expression]:
    """The expressions a SELECT with aggregates is to be grouped by as well: those of its select
    list that hold a column and no aggregate and are not in its GROUP BY; [] when it has no
    aggregate (a window's is none)."""
    aggregates = [a for a in sel.find_all(exp.AggFunc) if a.find_ancestor(exp.Select) is sel]
    if not any(not isinstance(a.parent, exp.Window) for a in aggregates):
        return []
    group = sel.args.get("group")
    grouped = {g.sql().lower() for g in group.expressions} if group else set()
    keys = []
    for e in sel.expressions:
        e = e.this if isinstance(e, exp.Alias) else e
        if e.sql().lower() in grouped or not _own_in(e, sel, exp.Column):
            continue
        if not _own_in(e, sel, exp.AggFunc, exp.Window):
            keys.append(e.copy())
            grouped.add(e.sql().lower())
    return keys


def _own_in(node: exp.Expression, sel: exp.Select, *kinds) -> bool:
    """``node`` holds a node of ``kinds`` whose nearest SELECT is ``sel``."""
    return any(
        n.find_ancestor(exp.Select) is sel
        and not (isinstance(n, exp.Column) and isinstance(n.this, exp.Star))
        for n in node.find_all(*kinds)
        if n is not sel
    )


_RULES = {CARDINALITY: _subquery_in, GROUPING: _grouped}
