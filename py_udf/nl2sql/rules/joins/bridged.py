"""``bridged``: a join of a foreign key's column to a table other than the one it refers to,
where that table refers to the joined one: ``car_makers JOIN continents ON car_makers.country =
continents.contid`` (``car_makers.country`` refers to ``countries.countryid``, and
``countries.continent`` to ``continents.contid``): round 0 joins ``countries`` between them
(final). A key's column compared with a column of a table it does not refer to (no key's
column) is said to the model, whether or not one table bridges them.

Source: bench/live.py's answers of Qwen2.5-Coder-0.5B and 1.5B-Instruct on Spider dev
(docs/benchmarks.md); of the 13 recorded systems' 6,135 answers 57 compare a key's column with a
table it does not refer to (9 bridged by one table), none of Spider dev's 472 gold queries.
"""

from __future__ import annotations

from sqlglot import exp

from ...core.names import resolve
from ...core.types import Schema, Table
from .._context import Context, Outcome
from .._sql import has_column, identifier, table_key, table_named
from ._keys import compared, owner, refers

__all__ = ["run"]


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Join the missing table between a foreign key's column and a table it does not refer to:
    ``… JOIN b ON a.x = b.y`` where ``a.x`` refers to ``t.z`` (``t`` not ``b``) and ``t.w``
    refers to ``b.y`` (one such key) becomes ``… JOIN t ON a.x = t.z JOIN b ON t.w = b.y``
    (or the mirror, when ``a`` is the joined table); and say the comparison off its key's target.

    Args:
        tree: the candidate's shared parse (copied before it is changed), or None.
        ctx: the candidate (its schema's foreign keys).

    Returns:
        The rewrite (``JOIN t added between a.x and b.y``, final) where one key bridges an inner
        join's one equality, the sentence where a key's column is compared off its target; None
        when neither (or there is no schema).
    """
    schema = ctx.schema
    if tree is None or schema is None or not schema.foreign_keys:
        return None
    target = _off_target(tree, schema)
    sentence = None
    if target:
        x, key, y = target
        sentence = (
            f"the query compares {x} with {y}, but {key.table}.{key.columns[0]} refers to "
            f"{key.ref_table}.{key.ref_columns[0]}: join {key.ref_table} between them"
        )
    fixed = _bridged(tree.copy(), schema)
    if fixed is None and sentence is None:
        return None
    sql, changes = fixed or (None, ())
    return Outcome("bridged", sql, tuple(changes), final=sql is not None, sentence=sentence)


def _bridged(tree: exp.Expression, schema: Schema) -> tuple[str, list[str]] | None:
    """``bridged``'s rewrite of ``tree`` (changed in place): ``(SQL, [what changed])``, or None."""
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
    ta, tb = owner(a, names, schema), owner(b, names, schema)
    if ta is None or tb is None or ta is tb:
        return None
    joined = table_named(schema, table_key(join.this)) if isinstance(join.this, exp.Table) else None
    if joined not in (ta, tb):
        return None
    for (x, tx), (y, ty) in (((a, ta), (b, tb)), ((b, tb), (a, ta))):
        out = refers(schema, tx, x.name)
        if out is None or out.ref_table == ty.name or refers(schema, ty, y.name) is not None:
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
        found = owner(c, names, schema)
        if found is None or id(found) not in nodes:
            return False
        c.set("table", exp.to_identifier(nodes[id(found)].alias_or_name))
    return True


def _off_target(tree: exp.Expression, schema: Schema) -> tuple | None:
    """``(x as written, its foreign key, y as written)`` for a comparison of a foreign key's
    column ``x`` with a column ``y`` of a table it does not refer to (``y`` no key's column)."""
    names = resolve(tree)
    for a, b in compared(tree):
        ta, tb = owner(a, names, schema), owner(b, names, schema)
        if ta is None or tb is None or ta is tb:
            continue
        for (x, tx), (y, ty) in (((a, ta), (b, tb)), ((b, tb), (a, ta))):
            out = refers(schema, tx, x.name)
            if out and out.ref_table != ty.name and refers(schema, ty, y.name) is None:
                return x.sql(dialect="postgres"), out, y.sql(dialect="postgres")
    return None


def _fresh_alias(tree: exp.Expression, name: str) -> str:
    """``name``, or ``name_2``, … : no table of ``tree`` is called so."""
    used = {t.alias_or_name.lower() for t in tree.find_all(exp.Table)}
    alias, n = name, 1
    while alias.lower() in used:
        n += 1
        alias = f"{name}_{n}"
    return alias
