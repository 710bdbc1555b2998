"""SQLite's semantics carried over to PostgreSQL, one rule per behaviour, on the parsed tree
(docs/internals/generation.md "SQLite rules"). Sources: the SQLite documentation.

Repair's reading of a failed candidate's SQLSTATE (``fix_by_sqlstate``) is a repair rule:
``rules.shape.fix_by_sqlstate``."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import traverse_scope

from ...core.types import Schema, Table
from ...rules.shape.fix_by_sqlstate import minmax_rows
from .aggregates import group_by_dependent
from .scope import column_type, schema_table, source_table, tables_by_name, type_kind

__all__ = [
    "SqliteRewrite",
    "apply_sqlite_rules",
    "derived_aliases",
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
