"""Two tables related the wrong way, which the schema's keys show (repair, docs/internals/
generation.md "Repair"):

- ``off_key_link``: two tables that one foreign key links, compared on other columns: a join
  ``countries.continent = car_makers.country`` or ``countries.countryid IN (SELECT id FROM
  car_makers)`` where ``car_makers.country`` refers to ``countries.countryid``. One side of the
  comparison is the key's own column, so the other side is its partner: round 0 puts it there.
- ``bridged``: a join of a foreign key's column to a table other than the one it refers to, where
  that table refers to the joined one: ``car_makers JOIN continents ON car_makers.country =
  continents.contid`` (``car_makers.country`` refers to ``countries.countryid``, and
  ``countries.continent`` to ``continents.contid``): round 0 joins ``countries`` between them.
  Such a comparison where no table bridges them is said to the model (``link_problem``).
- ``unjoined``: a failed query joining two tables on a column one of them lacks, everything
  else it names held by one of the two (``SELECT T2.role_code, T2.city FROM professionals AS T1
  JOIN owners AS T2 ON T1.owner_id = T2.owner_id``, where professionals has no owner_id and
  owners no role_code): the join was never needed; round 0 reads that one table alone.
- ``anti_joined``: a question that asks for what has *no* match answered with an inner join
  that keeps rows whose joined table's column IS NULL (``professionals AS T1 JOIN treatments AS
  T2 ON … WHERE T2.dog_id IS NULL``): an inner join keeps matched rows only; round 0 makes it the
  LEFT JOIN of the anti-join idiom. In Spider dev no gold and none of the 13 systems' 22 joined
  IS NULL answers is an inner join (all are LEFT JOIN anti-joins of negated questions).

Where they came from: read across bench/live.py's answers of Qwen2.5-Coder-0.5B and 1.5B-Instruct
on Spider dev (docs/benchmarks.md), and checked against its 472 gold queries, none of which any
rule here flags; of the 13 recorded systems' 6,135 answers 24 compare off the key, 57 compare a
key's column with a table it does not refer to (9 bridged by one table). Nothing per database:
the rules read the foreign keys the catalog (or the semantic model) declares.
"""

from __future__ import annotations

import re

from sqlglot import exp

from ..core.errors import CandidateRefused
from ..core.names import resolve
from ..core.sqlcheck import parse_one, parse_shared
from ..core.types import ForeignKey, Schema, Table

# a question that asks for what has no match
_NEGATED = re.compile(r"\b(?:not|no|without|never|none)\b|n't\b", re.I)

__all__ = [
    "anti_joined",
    "bridged",
    "conjuncts",
    "has_column",
    "identifier",
    "link_problem",
    "off_key_link",
    "parsed_sql",
    "table_key",
    "table_named",
    "unjoined",
]


def link_problem(sql: str | None, schema: Schema, question: str | None = None) -> str | None:
    """The sentence for the repair prompt on a query that relates two tables the wrong way
    (``off_key_link``, ``bridged``, ``anti_joined``); names only, never a literal.

    Args:
        sql: a candidate's SQL (PostgreSQL), or None.
        schema: the schema it was written for (its tables' columns and foreign keys), or None.
        question: the user's question (``anti_joined`` reads its negation), or None.

    Returns:
        One sentence, or None when neither rule applies (or there is no schema).
    """
    if schema is None:
        return None
    off = _off_key(parsed_sql(sql), schema)
    if off:
        _, _, (a, b), key = off[0]
        return (
            f"the query compares {a} with {b}, but {key.table}.{key.columns[0]} refers to "
            f"{key.ref_table}.{key.ref_columns[0]}: relate the two tables on those columns"
        )
    target = _off_target(parsed_sql(sql), schema)
    if target:
        x, key, y = target
        return (
            f"the query compares {x} with {y}, but {key.table}.{key.columns[0]} refers to "
            f"{key.ref_table}.{key.ref_columns[0]}: join {key.ref_table} between them"
        )
    anti = anti_joined(sql, question)
    if anti:
        return (
            f"the query keeps rows where {anti[2]} IS NULL, but its inner join keeps only rows "
            f"that have a match in {anti[3]}; to find rows without one, LEFT JOIN it"
        )
    return None


def off_key_link(sql: str | None, schema: Schema) -> tuple[str, list[str]] | None:
    """Rewrite comparisons of two tables linked by one foreign key, made on other columns, onto
    the key: where one side is the key's column on its table, the other becomes the key's column
    on the other table (``countries.countryid IN (SELECT id FROM car_makers)`` → ``… (SELECT
    country FROM car_makers)`` given ``car_makers.country → countries.countryid``).

    Args:
        sql: a candidate's SQL (PostgreSQL), or None.
        schema: the schema it was written for.

    Returns:
        ``(the rewritten SQL, ["a.x → a.y", …])``, or None when no comparison is off a key
        (or the tables share no key, or more than one, or neither side is the key's column).
    """
    try:
        tree = parse_one(sql) if sql else None
    except CandidateRefused:
        return None
    found = _off_key(tree, schema)
    if not found:
        return None
    changes = []
    for column, new, _, _ in found:
        old = column.sql(dialect="postgres")
        column.set("this", identifier(new))
        changes.append(f"{old} → {column.sql(dialect='postgres')}")
    return tree.sql(dialect="postgres"), changes


def bridged(sql: str | None, schema: Schema) -> tuple[str, list[str]] | None:
    """Join the missing table between a foreign key's column and a table it does not refer to:
    ``… JOIN b ON a.x = b.y`` where ``a.x`` refers to ``t.z`` (``t`` not ``b``) and ``t.w``
    refers to ``b.y`` (one such key) becomes ``… JOIN t ON a.x = t.z JOIN b ON t.w = b.y``
    (or the mirror, when ``a`` is the joined table).

    Args:
        sql: a candidate's SQL (PostgreSQL), or None.
        schema: the schema it was written for (its foreign keys).

    Returns:
        ``(the rewritten SQL, ["JOIN t added between a.x and b.y"])``, or None where no inner
        join's ON is such one equality, or no one key bridges it.
    """
    try:
        tree = parse_one(sql) if sql else None
    except CandidateRefused:
        return None
    if tree is None or not schema.foreign_keys:
        return None
    for join in list(tree.find_all(exp.Join)):
        found = _bridge(join, tree, schema)
        if found is None:
            continue
        (near, far), via, (z, w) = found
        select = join.parent
        if not _qualified(select, via, tree, schema):
            return None
        alias = _fresh_alias(tree, via.table)
        node = exp.Table(
            this=identifier(via.table), db=identifier(via.schema) if via.name != via.table else None
        )
        node.set("alias", exp.TableAlias(this=identifier(alias)))
        first = exp.EQ(
            this=near.copy(), expression=exp.column(identifier(z), table=identifier(alias))
        )
        then = exp.EQ(
            this=exp.column(identifier(w), table=identifier(alias)), expression=far.copy()
        )
        joins = select.args["joins"]
        joins.insert(joins.index(join), exp.Join(this=node, on=first))
        join.set("on", then)
        select.set("joins", joins)
        text = f"JOIN {via.name} added between {near.sql(dialect='postgres')} and {far.sql(dialect='postgres')}"
        return tree.sql(dialect="postgres"), [text]
    return None


def unjoined(sql: str | None, schema: Schema) -> tuple[str, list[str]] | None:
    """Drop a join that cannot run and was not needed: a SELECT of two tables joined ``ON`` a
    column (qualified) that its table lacks, where exactly one of the two tables holds every
    other column the query names; that table is read alone, the qualifiers made its own.

    Args:
        sql: a failed candidate's SQL (PostgreSQL), or None.
        schema: the schema it was written for (its tables' columns).

    Returns:
        ``(the rewritten SQL, ["JOIN t dropped"])``, or None where the query is not a SELECT of
        two tables and one join ON, has a subquery, aggregates or groups (the join's rows may be
        what it counts), names a table the schema lacks, joins on columns both tables have, or
        where no one table (or both) holds the other columns.
    """
    try:
        tree = parse_one(sql) if sql else None
    except CandidateRefused:
        return None
    if not isinstance(tree, exp.Select) or len(tree.args.get("joins") or []) != 1:
        return None
    join, source = tree.args["joins"][0], tree.args.get("from_")
    nodes = [source.this if source else None, join.this]
    tables = {n.alias_or_name.lower(): table_named(schema, table_key(n)) for n in nodes if n}
    on = join.args.get("on")
    if on is None or len(tables) != 2 or None in tables.values() or tree.find(exp.Subquery):
        return None
    if tree.find(exp.AggFunc) or tree.args.get("group"):
        return None  # what it counts or groups may be the join's rows: the join was meant
    lacking = [
        c
        for c in on.find_all(exp.Column)
        if not has_column(tables.get(c.table.lower(), _NONE), c.name)
    ]
    rest = [c for c in tree.find_all(exp.Column) if c.find_ancestor(exp.Join) is None]
    holders = [a for a, t in tables.items() if all(has_column(t, c.name) for c in rest)]
    if not lacking or len(holders) != 1:
        return None
    kept = next(n for n in nodes if n.alias_or_name.lower() == holders[0])
    dropped = next(n for n in nodes if n is not kept)
    tree.set("joins", None)
    tree.set("from_", exp.From(this=kept))
    for c in rest:
        if c.table:
            c.set("table", exp.to_identifier(kept.alias_or_name))
    return tree.sql(dialect="postgres"), [f"JOIN {dropped.name} dropped"]


def anti_joined(sql: str | None, question: str | None) -> tuple | None:
    """Make an inner join whose table's column the WHERE holds NULL the LEFT JOIN of the
    anti-join idiom, where the question is negated ("not", "no", "without", "never").

    Args:
        sql: a candidate's SQL (PostgreSQL), or None.
        question: the user's question, or None.

    Returns:
        ``(the rewritten SQL, ["JOIN t made LEFT"], the column held NULL, the joined table)``,
        or None where the question says no negation, or no inner join of the top SELECT has
        a column (qualified with its name) held NULL by a top-level AND of the WHERE, or another
        condition of the WHERE reads that table.
    """
    if not question or not _NEGATED.search(question):
        return None
    try:
        tree = parse_one(sql) if sql else None
    except CandidateRefused:
        return None
    where = tree.args.get("where") if isinstance(tree, exp.Select) else None
    if where is None:
        return None
    ands = conjuncts(where.this)
    for join in tree.args.get("joins") or []:
        if join.side or join.kind not in ("", "INNER") or not isinstance(join.this, exp.Table):
            continue
        name = join.this.alias_or_name.lower()
        held = [c for c in ands if _held_null(c, name)]
        others = [c for c in ands if c not in held]
        if held and not any(
            x.table.lower() == name for c in others for x in c.find_all(exp.Column)
        ):
            join.set("side", "LEFT")
            join.set("kind", None)
            column = held[0].this.sql(dialect="postgres")
            change = f"JOIN {join.this.name} made LEFT ({column} IS NULL)"
            return tree.sql(dialect="postgres"), [change], column, join.this.name
    return None


def table_named(schema: Schema, key: str) -> Table | None:
    """The schema's table that ``key`` names.

    Args:
        schema: the schema a candidate was written for.
        key: a table's name as the prompt names it, or ``schema.table`` (case folded).

    Returns:
        The ``Table``, or None when the schema holds none of that name.
    """
    key = key.lower()
    for table in schema.tables:
        if key in (table.name.lower(), f"{table.schema}.{table.table}".lower()):
            return table
    return None


def _off_key(tree: exp.Expression | None, schema: Schema) -> list:
    """``[(the column to move, its new name, (side a, side b as written), the foreign key)]``
    of ``tree``."""
    if tree is None or schema is None or not schema.foreign_keys:
        return []
    names = resolve(tree)
    found = []
    for a, b in _compared(tree):
        ta, tb = _owner(a, names, schema), _owner(b, names, schema)
        if ta is None or tb is None or ta is tb:
            continue
        keys = [k for k in schema.foreign_keys if {k.table, k.ref_table} == {ta.name, tb.name}]
        if len(keys) != 1 or len(keys[0].columns) != 1 or _on_key(keys[0], ta, a, tb, b):
            continue
        own_a, own_b = _side(keys[0], ta), _side(keys[0], tb)
        if (a.name.lower() == own_a.lower()) != (b.name.lower() == own_b.lower()):
            # one side is the key's own column: the other is moved onto its partner
            moved, new = (b, own_b) if a.name.lower() == own_a.lower() else (a, own_a)
            texts = (a.sql(dialect="postgres"), b.sql(dialect="postgres"))
            found.append((moved, new, texts, keys[0]))
    return found


def _bridge(join: exp.Join, tree: exp.Expression, schema: Schema):
    """``((the column of the table read before, the joined table's column), the table between,
    (its column the first refers to, its column referring to the second))`` for an inner join
    ``ON a = b`` that a foreign key's column compares with a table it does not refer to, one key
    of the table it does refer to leading to the other; else None."""
    on = join.args.get("on")
    if join.side or join.kind not in ("", "INNER") or not isinstance(on, exp.EQ):
        return None
    a, b = on.this, on.expression
    if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
        return None
    names = resolve(tree)
    ta, tb = _owner(a, names, schema), _owner(b, names, schema)
    if ta is None or tb is None or ta is tb:
        return None
    joined = table_named(schema, table_key(join.this)) if isinstance(join.this, exp.Table) else None
    if joined not in (ta, tb):
        return None
    for (x, tx), (y, ty) in (((a, ta), (b, tb)), ((b, tb), (a, ta))):
        out = _refers(schema, tx, x.name)
        if out is None or out.ref_table == ty.name or _refers(schema, ty, y.name) is not None:
            continue
        via = table_named(schema, out.ref_table)
        back = [
            k
            for k in schema.foreign_keys
            if k.table == out.ref_table
            and k.ref_table == ty.name
            and len(k.columns) == 1
            and k.ref_columns[0].lower() == y.name.lower()
        ]
        if via is None or len(back) != 1:
            continue
        # x's table before the join, y's joined; or the mirror, y read before and x joined
        if ty is joined:
            return (x, y), via, (out.ref_columns[0], back[0].columns[0])
        return (y, x), via, (back[0].columns[0], out.ref_columns[0])
    return None


def _qualified(select: exp.Select, via: Table, tree: exp.Expression, schema: Schema) -> bool:
    """Qualify ``select``'s own unqualified columns that ``via`` also has (joining it would make
    them ambiguous) with their one table's name as the query calls it; False where one has no
    one table."""
    names = resolve(tree)
    nodes = {id(table_named(schema, table_key(t))): t for t in select.find_all(exp.Table)}
    for c in list(select.find_all(exp.Column)):
        if c.table or c.find_ancestor(exp.Select) is not select or not has_column(via, c.name):
            continue
        owner = _owner(c, names, schema)
        if owner is None or id(owner) not in nodes:
            return False
        c.set("table", exp.to_identifier(nodes[id(owner)].alias_or_name))
    return True


def _off_target(tree: exp.Expression | None, schema: Schema) -> tuple | None:
    """``(x as written, its foreign key, y as written)`` for a comparison of a foreign key's
    column ``x`` with a column ``y`` of a table it does not refer to (``y`` no key's column)."""
    if tree is None or not schema.foreign_keys:
        return None
    names = resolve(tree)
    for a, b in _compared(tree):
        ta, tb = _owner(a, names, schema), _owner(b, names, schema)
        if ta is None or tb is None or ta is tb:
            continue
        for (x, tx), (y, ty) in (((a, ta), (b, tb)), ((b, tb), (a, ta))):
            out = _refers(schema, tx, x.name)
            if out and out.ref_table != ty.name and _refers(schema, ty, y.name) is None:
                return x.sql(dialect="postgres"), out, y.sql(dialect="postgres")
    return None


def conjuncts(e: exp.Expression) -> list[exp.Expression]:
    """The conditions ``e`` ANDs together, through parentheses.

    Args:
        e: a condition (a WHERE's, an ON's).

    Returns:
        Its conjuncts, left to right.
    """
    e = e.unnest()
    return conjuncts(e.this) + conjuncts(e.expression) if isinstance(e, exp.And) else [e]


def _held_null(c: exp.Expression, name: str) -> bool:
    """Whether ``c`` is ``name.column IS NULL``."""
    return (
        isinstance(c, exp.Is)
        and isinstance(c.expression, exp.Null)
        and isinstance(c.this, exp.Column)
        and c.this.table.lower() == name
    )


def _refers(schema: Schema, table: Table, column: str) -> ForeignKey | None:
    """The single-column foreign key of ``table.column``, or None."""
    for k in schema.foreign_keys:
        if k.table == table.name and len(k.columns) == 1 and k.columns[0].lower() == column.lower():
            return k
    return None


def _fresh_alias(tree: exp.Expression, name: str) -> str:
    """``name``, or ``name_2``, … : no table of ``tree`` is called so."""
    used = {t.alias_or_name.lower() for t in tree.find_all(exp.Table)}
    alias, n = name, 1
    while alias.lower() in used:
        n += 1
        alias = f"{name}_{n}"
    return alias


def identifier(name: str) -> exp.Identifier:
    """An identifier for a real name, quoted where PostgreSQL would fold it otherwise.

    Args:
        name: a table's or column's name as the catalog spells it.

    Returns:
        The sqlglot identifier.
    """
    ident = exp.to_identifier(name)
    if name != name.lower():
        ident.set("quoted", True)
    return ident


def _side(key: ForeignKey, table: Table) -> str:
    """The foreign key's column on ``table``'s side."""
    return key.columns[0] if key.table == table.name else key.ref_columns[0]


def _compared(tree: exp.Expression) -> list[tuple[exp.Column, exp.Column]]:
    """Column pairs ``tree`` compares: ``a = b`` and ``a IN (SELECT b …)``."""
    pairs = [
        (e.this, e.expression)
        for e in tree.find_all(exp.EQ)
        if isinstance(e.this, exp.Column) and isinstance(e.expression, exp.Column)
    ]
    for node in tree.find_all(exp.In):
        sub = node.args.get("query")
        sub = sub.this if isinstance(sub, exp.Subquery) else sub
        if isinstance(sub, exp.Select) and len(sub.expressions) == 1:
            if isinstance(node.this, exp.Column) and isinstance(sub.expressions[0], exp.Column):
                pairs.append((node.this, sub.expressions[0]))
    return pairs


def _owner(column: exp.Column, names, schema: Schema) -> Table | None:
    """The one schema table that holds ``column`` among those it may belong to, or None."""
    tables = [table_named(schema, r.key) for r in names.column_relations(column)]
    holders = {id(t): t for t in tables if t is not None and has_column(t, column.name)}
    return next(iter(holders.values())) if len(holders) == 1 else None


def _on_key(key: ForeignKey, ta: Table, a: exp.Column, tb: Table, b: exp.Column) -> bool:
    """Whether ``a = b`` is the foreign key's own pair (either way round)."""
    return a.name.lower() == _side(key, ta).lower() and b.name.lower() == _side(key, tb).lower()


_NONE = Table("", "", "", [])  # a qualifier that names neither table: no column of its own


def has_column(table: Table, name: str) -> bool:
    """Whether ``table`` has a column of that name.

    Args:
        table: a schema table.
        name: a column's name (case folded).

    Returns:
        True when one of its columns is so called.
    """
    return any(c.name.lower() == name.lower() for c in table.columns)


def table_key(t: exp.Table) -> str:
    """How a query names a table: ``schema.table`` or ``table``, as written.

    Args:
        t: a table node of a query.

    Returns:
        The name, for ``table_named``.
    """
    return ".".join(i.name for i in (t.args.get("db"), t.args.get("this")) if i is not None)


def parsed_sql(sql: str | None) -> exp.Expression | None:
    """The shared parse of a candidate's SQL (``sqlcheck.parse_shared``: read it, do not change it).

    Args:
        sql: SQL text, or None.

    Returns:
        The tree, or None when there is no SQL or it does not parse.
    """
    try:
        return parse_shared(sql) if sql else None
    except CandidateRefused:
        return None
