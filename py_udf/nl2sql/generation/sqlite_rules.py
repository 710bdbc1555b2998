"""SQLite's semantics carried over to PostgreSQL: what a model writing SQLite means, resolved
against the schema.

``sqlglot.transpile`` changes SQLite's syntax into PostgreSQL's, but not what SQLite does with
it. A model configured with ``dialect => 'sqlite'`` (and Spider/BIRD-trained models in
general) relies on seven SQLite behaviours that PostgreSQL does not share; each rule here
rewrites one of them on the parsed tree (sqlglot, with its optimizer's scopes) and is named in
the candidate's ``cleaning`` list:

``sqlite:string_literal``
    ``"x"`` is a string literal in SQLite when no column ``x`` exists; a double-quoted,
    unqualified name that names no column of the statement's tables (nor an output name of one
    of its queries) becomes ``'x'``.
``sqlite:identifier_case``
    a double-quoted table or column name in another case than the database's (``"Hometown"``
    for ``hometown``) takes the database's spelling: SQLite matches it case-insensitively.
``sqlite:derived_alias``
    a derived table (subquery in FROM/JOIN) without an alias gets one (PostgreSQL 15 requires
    it).
``sqlite:like_nocase``
    SQLite's ``LIKE`` compares ASCII letters case-insensitively: ``LIKE`` becomes ``ILIKE``.
``sqlite:group_by_dependent``
    a bare column in a grouped SELECT (or its ORDER BY) is added to the GROUP BY when it is
    functionally dependent on the grouped key: its table's primary key is grouped, directly or
    through equalities of the join conditions and WHERE (``GROUP BY t1.singer_id`` with
    ``t1.singer_id = t2.singer_id`` determines every column of ``t2`` when that is ``t2``'s
    key). A bare column that is not dependent is refused with the reason (SQLite returns the
    value of an arbitrary row of the group).
``sqlite:minmax_row``
    an ungrouped SELECT with exactly one aggregate, ``max(x)`` or ``min(x)``, and bare columns
    beside it: SQLite takes the bare columns from the row holding the maximum (minimum); the
    aggregate becomes ``x``, ordered ``DESC`` (``ASC``) with NULLs last, ``LIMIT 1``
    (``SELECT max(hp), make FROM cars`` → ``SELECT hp, make FROM cars ORDER BY hp DESC NULLS
    LAST LIMIT 1``). When no row qualifies SQLite returns one row of NULLs, the rewrite none.
``sqlite:text_vs_number``
    a number compared with a text column: SQLite applies the column's text affinity to the
    number, so the number becomes a string literal (``code = 5`` → ``code = '5'``); two columns,
    one text and one numeric, compare as text (the numeric side cast to text).

Sources: the SQLite documentation, "Datatypes In SQLite" §4.2 (type conversions prior to
comparison), §3 of "SQLite Keywords" (a double-quoted string that names no identifier is a
string literal), "The LIKE operator" (case-insensitive for ASCII), "Bare columns in an aggregate
query"; functional dependency on a primary key as PostgreSQL's GROUP BY accepts it (SQL:1999
T301). Rules found by reading the misses of the Spider dev replay (see the README's replay
section).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from ..core.types import Schema, Table

_NUMERIC = (
    "smallint",
    "integer",
    "bigint",
    "numeric",
    "decimal",
    "real",
    "double precision",
    "int",
    "float",
)
_TEXT = ("text", "character varying", "varchar", "character", "char", "bpchar", "name", "citext")
_COMPARE = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


@dataclass
class SqliteRewrite:
    """The outcome of ``apply_sqlite_rules``.

    Attributes:
        tree: the rewritten tree (a copy; the input is not changed).
        steps: names of the rules applied, in order, each once (``sqlite:string_literal``, ...).
        reason: why the statement cannot mean in PostgreSQL what it means in SQLite (a bare
            column not dependent on the GROUP BY key); None when it can.
    """

    tree: exp.Expression
    steps: list[str] = field(default_factory=list)
    reason: str | None = None


def _tables_by_name(schema: Schema) -> dict[str, Table]:
    out: dict[str, Table] = {}
    for t in schema.tables:
        out.setdefault(t.name.lower(), t)
        out.setdefault(t.table.lower(), t)
        out.setdefault(f"{t.schema}.{t.table}".lower(), t)
    return out


def _schema_table(node: exp.Table, tables: dict[str, Table]) -> Table | None:
    key = f"{node.db}.{node.name}" if node.db else node.name
    return tables.get(key.lower())


def _col_type(t: Table, name: str) -> str | None:
    for c in t.columns:
        if c.name.lower() == name.lower():
            return c.data_type.lower()
    return None


def _kind(data_type: str | None) -> str | None:
    if data_type is None:
        return None
    if data_type.startswith(_NUMERIC):
        return "number"
    if data_type.startswith(_TEXT):
        return "text"
    return None


def _known_names(tree: exp.Expression, tables: dict[str, Table]) -> dict[str, str] | None:
    """Every name a column reference of ``tree`` may mean, lower-cased, with its spelling in
    the database (the columns of its tables) or as written (output names of its queries and
    CTEs, its aliases). None when a table is not in the schema (then nothing is known to be
    missing)."""
    names: dict[str, str] = {}
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for node in tree.find_all(exp.Table):
        t = _schema_table(node, tables)
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
    known = _known_names(tree, _tables_by_name(schema))
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
    """A double-quoted table or column name spelled in another case than in the database
    (``"Hometown"`` for ``hometown``) takes the database's spelling: SQLite matches quoted
    names case-insensitively, PostgreSQL exactly.

    Args:
        tree: a statement parsed as SQLite (sqlglot); changed in place.
        schema: the tables the statement may read.

    Returns:
        ``(tree, changed)``.
    """
    tables = _tables_by_name(schema)
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


def _resolve(
    scope: Scope, col: exp.Column, tables: dict[str, Table]
) -> tuple[str, Table | None] | None:
    """The source a column of ``scope`` reads, when certain: ``(alias, schema table)`` for a
    table, ``(alias, None)`` for a derived table or CTE; None when unknown or ambiguous."""
    if col.table:
        src = next((v for k, v in scope.sources.items() if k.lower() == col.table.lower()), None)
        if isinstance(src, exp.Table):
            t = _schema_table(src, tables)
            return (col.table.lower(), t) if t is not None else None
        return (col.table.lower(), None) if isinstance(src, Scope) else None
    hits: list[tuple[str, Table | None]] = []
    for alias, src in scope.sources.items():
        if isinstance(src, exp.Table):
            t = _schema_table(src, tables)
            if t is None:
                return None
            if _col_type(t, col.name) is not None:
                hits.append((alias.lower(), t))
        elif isinstance(src, Scope) and col.name.lower() in {
            s.lower() for s in getattr(src.expression, "named_selects", [])
        }:
            hits.append((alias.lower(), None))
    return hits[0] if len(hits) == 1 else None


def _source_table(
    scope: Scope, col: exp.Column, tables: dict[str, Table]
) -> tuple[str, Table] | None:
    """The (alias, schema table) a column of ``scope`` reads, when certain and a table."""
    hit = _resolve(scope, col, tables)
    return hit if hit is not None and hit[1] is not None else None


def text_vs_number(tree: exp.Expression, schema: Schema) -> tuple[exp.Expression, bool]:
    """A number compared with a text column becomes a string literal; a numeric column
    compared with a text column is cast to text (SQLite's affinity rules for comparisons).

    Args:
        tree: a statement tree; changed in place.
        schema: the tables the statement may read (column types).

    Returns:
        ``(tree, changed)``.
    """
    tables = _tables_by_name(schema)
    changed = False
    try:
        scopes = traverse_scope(tree)
    except (SqlglotError, KeyError, ValueError):
        return tree, False
    for scope in scopes:

        def kind(node: exp.Expression) -> str | None:
            if isinstance(node, exp.Column):
                hit = _source_table(scope, node, tables)  # noqa: B023 - called within this iteration
                return _kind(_col_type(hit[1], node.name)) if hit else None
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


def _conjuncts(cond: exp.Expression | None) -> list[exp.Expression]:
    if cond is None:
        return []
    cond = cond.unnest()
    if isinstance(cond, exp.And):
        return _conjuncts(cond.left) + _conjuncts(cond.right)
    return [cond]


def _outside_aggregates(expr: exp.Expression, select: exp.Select) -> list[exp.Column]:
    """Columns of ``expr`` that are not inside an aggregate or a subquery of ``select``."""
    out = []
    for col in expr.find_all(exp.Column):
        node, inside = col.parent, False
        while node is not None and node is not select:
            if isinstance(node, (exp.AggFunc, exp.Select, exp.Window)):
                inside = True
                break
            node = node.parent
        if not inside:
            out.append(col)
    return out


def _group_by_scope(scope: Scope, tables: dict[str, Table]) -> tuple[bool, str | None]:
    """Add dependent bare columns of one grouped SELECT to its GROUP BY; the reason when a bare
    column is not dependent."""
    sel = scope.expression
    group = sel.args.get("group")
    if not isinstance(sel, exp.Select) or group is None or not group.expressions:
        return False, None
    closure = _grouped_closure(scope, sel, tables)
    added, seen = False, set()
    for col in _bare_columns(sel):
        k = _column_key(scope, col, tables)
        if k is None or k in closure or k in seen:
            continue
        if not _dependent(scope, col, tables, closure):
            by = ", ".join(g.sql() for g in group.expressions)
            return added, (
                f"bare column {col.sql()} in a grouped SELECT is not functionally "
                f"dependent on GROUP BY {by} (SQLite returns an arbitrary row's "
                "value); group by it or aggregate it"
            )
        group.append("expressions", col.copy())
        seen.add(k)
        added = True
    return added, None


def _column_key(scope: Scope, col: exp.Column, tables: dict[str, Table]) -> tuple[str, str] | None:
    """``(source alias, column name)`` of a column of ``scope``, None when its source is
    uncertain (``_resolve``)."""
    hit = _resolve(scope, col, tables)
    return (hit[0], col.name.lower()) if hit else None


def _grouped_closure(
    scope: Scope, sel: exp.Select, tables: dict[str, Table]
) -> set[tuple[str, str]]:
    """The grouped columns (``_column_key``) and every column equal to one of them through the
    equalities of the join conditions and WHERE."""
    closure = {
        k
        for g in sel.args["group"].expressions
        if isinstance(g, exp.Column) and (k := _column_key(scope, g, tables))
    }
    conds = [j.args.get("on") for j in sel.args.get("joins") or []]
    conds.append(sel.args["where"].this if sel.args.get("where") else None)
    edges = [
        (_column_key(scope, c.left, tables), _column_key(scope, c.right, tables))
        for cond in conds
        for c in _conjuncts(cond)
        if isinstance(c, exp.EQ)
        and isinstance(c.left, exp.Column)
        and isinstance(c.right, exp.Column)
    ]
    grew = True
    while grew:
        grew = False
        for a, b in edges:
            if a and b and (a in closure) != (b in closure):
                closure |= {a, b}
                grew = True
    return closure


def _bare_columns(sel: exp.Select) -> list[exp.Column]:
    """The columns of the select list and ORDER BY outside aggregates, other than those
    grouped by (as written) and the select list's aliases."""
    grouped_sql = {g.sql().lower() for g in sel.args["group"].expressions}
    aliases = {e.alias.lower() for e in sel.expressions if isinstance(e, exp.Alias)}
    exprs = list(sel.expressions) + [
        o.this for o in (sel.args.get("order") or exp.Order()).expressions
    ]
    return [
        col
        for e in exprs
        for col in _outside_aggregates(e, sel)
        if not (col.sql().lower() in grouped_sql or (not col.table and col.name.lower() in aliases))
    ]


def _dependent(
    scope: Scope, col: exp.Column, tables: dict[str, Table], closure: set[tuple[str, str]]
) -> bool:
    """Whether a bare column is functionally dependent on the grouped key: its table's primary
    key is all in ``closure``."""
    alias, t = _resolve(scope, col, tables)
    pk = {c.name.lower() for c in t.columns if c.is_primary_key} if t else set()
    return bool(pk) and all((alias, p) in closure for p in pk)


def group_by_dependent(
    tree: exp.Expression, schema: Schema
) -> tuple[exp.Expression, bool, str | None]:
    """Bare columns of grouped SELECTs: added to the GROUP BY when functionally dependent on
    the grouped key (their table's primary key grouped, directly or through equalities of the
    join conditions and WHERE); otherwise the reason to refuse.

    Args:
        tree: a statement tree; changed in place.
        schema: the tables the statement may read (primary keys).

    Returns:
        ``(tree, changed, reason)``; ``reason`` is None unless a bare column is not dependent.
    """
    tables = _tables_by_name(schema)
    try:
        scopes = traverse_scope(tree)
    except (SqlglotError, KeyError, ValueError):
        return tree, False, None
    changed = False
    for scope in scopes:
        added, reason = _group_by_scope(scope, tables)
        changed = changed or added
        if reason:
            return tree, changed, reason
    return tree, changed, None


def _minmax_select(sel: exp.Select) -> bool:
    """Rewrite one ungrouped SELECT of ``minmax_rows`` in place; True when rewritten."""
    if (
        sel.args.get("group")
        or sel.args.get("having")
        or sel.args.get("order")
        or sel.args.get("limit")
        or sel.args.get("offset")
        or sel.args.get("distinct")
    ):
        return False
    aggs = [
        a
        for e in sel.expressions
        for a in e.find_all(exp.AggFunc, exp.Window)
        if a.find_ancestor(exp.Select) is sel
    ]
    if (
        len(aggs) != 1
        or not isinstance(aggs[0], (exp.Max, exp.Min))
        or aggs[0].expressions
        or isinstance(aggs[0].this, exp.Distinct)
    ):
        return False
    if not any(_outside_aggregates(e, sel) for e in sel.expressions):
        return False
    agg = aggs[0]
    key = agg.this.copy()
    agg.replace(agg.this.copy())
    sel.order_by(
        exp.Ordered(this=key, desc=isinstance(agg, exp.Max), nulls_first=False), copy=False
    )
    sel.limit(1, copy=False)
    return True


def minmax_rows(tree: exp.Expression) -> tuple[exp.Expression, bool]:
    """SQLite's bare columns beside a lone ``max``/``min`` of an ungrouped SELECT: taken from
    the row holding the extreme (module docstring, ``sqlite:minmax_row``).

    Source: the SQLite documentation, "Bare columns in an aggregate query" (with exactly one
    ``min()`` or ``max()``, bare columns take the values of the row holding it). Found in the
    Spider replay's misses: ``SELECT max(horsepower), make …`` written by seven systems for one
    car_1 question, failing in PostgreSQL; the same form occurs on other databases.

    Args:
        tree: a statement tree; changed in place.

    Returns:
        ``(tree, changed)``.
    """
    changed = False
    for sel in list(tree.find_all(exp.Select)):
        changed = _minmax_select(sel) or changed
    return tree, changed


def apply_sqlite_rules(tree: exp.Expression, schema: Schema) -> SqliteRewrite:
    """Rewrite a statement parsed as SQLite so that PostgreSQL gives what SQLite would.

    Rules, in order: ``sqlite:string_literal``, ``sqlite:identifier_case``,
    ``sqlite:derived_alias``,
    ``sqlite:like_nocase``, ``sqlite:text_vs_number``, ``sqlite:minmax_row``,
    ``sqlite:group_by_dependent`` (see the module docstring).

    Source: the SQLite documentation (datatypes §4.2, keywords, LIKE, bare columns in
    aggregate queries).

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
