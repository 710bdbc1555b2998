"""A candidate's names against the schema: which tables and columns it names that do not exist,
the real ones nearest to them (for the repair prompt), and the query with each such name snapped
to the one real name it must have meant, where only one fits (a candidate of its own); a
column no table of its SELECT has, taken from the one table that has it, joined in.

Small local models misspell names (``semester`` for ``semesters``), shorten them (``age`` for
``pet_age``), take a column through the wrong alias (``T2.weight`` where ``weight`` is ``T1``'s)
and repeat the mistake when asked to repair it at temperature 0 (bench/live.py's misses with
Qwen2.5-Coder-0.5B/1.5B-Instruct). The rule is the schema's, never one database's.
"""

from __future__ import annotations

import difflib

from sqlglot import exp

from ..core.errors import CandidateRefused
from ..core.sqlcheck import parse_one, to_sql
from ..core.types import Column, Schema, Table

__all__ = ["schema_hints", "snap_names"]

NEAREST = 3  # real names shown for an unknown one
CUTOFF = 0.6  # difflib ratio a real name needs to be shown as near
SNAP_TABLE = 0.8  # ratio a table name needs to be snapped to (``semester`` → ``semesters``)
_INTEGERS = {"integer", "bigint", "smallint", "int", "int4", "int8", "int2"}  # key column types


class _Query:
    """A parsed query's relations: alias or name → schema table, the CTE names, the names it
    defines itself (output aliases, CTEs)."""

    def __init__(self, tree: exp.Expression, schema: Schema):
        self.tables = {t.name.lower(): t for t in schema.tables}
        self.tables.update(
            {t.table.lower(): t for t in schema.tables if t.table.lower() not in self.tables}
        )
        self.ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        self.own = self.ctes | {a.alias.lower() for a in tree.find_all(exp.Alias) if a.alias}
        self.by_alias: dict[str, Table] = {}
        self.unknown: list[exp.Table] = []
        for node in tree.find_all(exp.Table):
            name = node.name.lower()
            if not name or name in self.ctes:
                continue
            if name in self.tables:
                self.by_alias[node.alias_or_name.lower()] = self.tables[name]
            else:
                self.unknown.append(node)

    def every(self) -> list[Table]:
        """Every table of the schema, once each."""
        return list({id(t): t for t in self.tables.values()}.values())

    def used(self) -> list[Table]:
        return list({id(t): t for t in self.by_alias.values()}.values())

    def has_column(self, name: str) -> bool:
        return name in self.own or any(
            c.name.lower() == name for t in self.used() for c in t.columns
        )


def _parsed(sql: str | None) -> exp.Expression | None:
    try:
        return parse_one(sql or "")
    except CandidateRefused:
        return None


def schema_hints(sql: str | None, schema: Schema) -> list[str]:
    """Say which tables and columns of a query do not exist and which real ones are nearest.

    Args:
        sql: the candidate's SQL (or raw answer); None or unparsable gives no hint.
        schema: what the calling role may see (the evaluator's schema).

    Returns:
        One line per unknown table (its nearest tables, with their columns) and per unknown
        column (the nearest columns of the query's tables, and the tables that have a column of
        that very name); at most 6 lines, ``[]`` when every name exists.
    """
    tree = _parsed(sql)
    if tree is None:
        return []
    q, hints = _Query(tree, schema), []
    for node in q.unknown:
        name = node.name.lower()
        near = difflib.get_close_matches(name, list(q.tables), NEAREST, CUTOFF)
        shown = "; ".join(f"{n}({', '.join(c.name for c in q.tables[n].columns)})" for n in near)
        hints.append(f"there is no table {name}" + (f"; the nearest: {shown}" if shown else ""))
    if q.used():
        hints += _column_hints(tree, q, schema)
    return list(dict.fromkeys(hints))[:6]


def _column_hints(tree: exp.Expression, q: _Query, schema: Schema) -> list[str]:
    """The unknown-column lines of ``schema_hints`` (columns of the query's tables only)."""
    own = {f"{t.name}.{c.name}".lower(): c.name.lower() for t in q.used() for c in t.columns}
    out = []
    for col in tree.find_all(exp.Column):
        name = col.name.lower()
        if not name or isinstance(col.this, exp.Star) or q.has_column(name):
            continue
        near = difflib.get_close_matches(name, list(own), NEAREST, CUTOFF)
        near += [k for k, c in own.items() if difflib.get_close_matches(name, [c], 1, CUTOFF)]
        elsewhere = [t.name for t in schema.tables if _has(t, name)]
        line = f"no table of the query has a column {name}"
        if near:
            line += f"; the nearest: {', '.join(dict.fromkeys(near[:NEAREST]))}"
        if elsewhere:
            line += f"; {name} is a column of {', '.join(elsewhere[:NEAREST])} (join it)"
        out.append(line)
    return out


def snap_names(sql: str | None, schema: Schema) -> tuple[str, list[str]] | None:
    """The query with each unknown name replaced by the one real name it must have meant: a
    table by the only table at least ``SNAP_TABLE`` alike; a SELECT's one table, that has some
    of the columns the SELECT names but not all, by the one table that has them all (``SELECT
    maker, model FROM car_names`` → ``FROM model_list``); a column of a join condition that its
    table lacks, by its side of the one declared foreign key to the other side's column; a
    column that another table of the query has under that very name, through that table (not the table it is compared with in
    a join condition); else, unless a table one declared foreign key away has that very name,
    by the only column of the query's tables (of the alias's table when qualified) whose name
    is alike (``CUTOFF``), holds it as a word (``age`` in ``pet_age``) or is a word of it, not
    a key (``name`` in ``first_name``), a name ending in ``id`` only for a column of keys and
    another never for a name ending in ``id`` (``maker`` is never ``makeid``: ``_key_fits``);
    ``<table>id`` for that table's one key (``_own_key``). A name with no such single answer is
    left as it is.
    Then a column that no table of its SELECT has is taken from the one table nearest to the
    SELECT's tables that has it, joined in: one declared foreign key away (``SELECT model FROM
    cars_data`` where ``car_names`` and ``model_list`` have ``model`` and only ``car_names`` is a
    key away: ``JOIN car_names ON cars_data.id = car_names.makeid``), else two, through one
    table between (``pettype`` of ``pets`` for ``student``, through ``has_pet``). The SELECT's
    bare columns are qualified first, so that none becomes ambiguous (one the join makes
    ambiguous is the joined key's, equal on both sides: the side already read); then the columns
    are snapped once more, the joined tables among the query's. Two such tables or two ways to one: left alone.

    Args:
        sql: the failing candidate's SQL.
        schema: what the calling role may see.

    Returns:
        ``(snapped SQL, ["old → new", ...])``, or None when nothing could be snapped (or the
        query does not parse).
    """
    tree = _parsed(sql)
    if tree is None:
        return None
    changes = _snap_tables(tree, schema)
    changes += _swap_tables(tree, _Query(tree, schema))
    q = _Query(tree, schema)
    changes += _snap_columns(tree, q, schema)
    unknown = [c for c in _columns(tree) if not _known(c, q)]  # before any join
    joined = [c for c in (_join_holder(col, q, schema) for col in unknown) if c]
    if joined:
        changes += joined + _snap_columns(tree, _Query(tree, schema), schema)
    return (to_sql(tree), changes) if changes else None


def _columns(tree: exp.Expression) -> list[exp.Column]:
    return list(tree.find_all(exp.Column))


def _snap_columns(tree: exp.Expression, q: _Query, schema: Schema) -> list[str]:
    return [c for c in (_snap_column(col, q, schema) for col in _columns(tree)) if c]


def _snap_tables(tree: exp.Expression, schema: Schema) -> list[str]:
    q, changes = _Query(tree, schema), []
    for node in q.unknown:
        near = difflib.get_close_matches(node.name.lower(), list(q.tables), 2, SNAP_TABLE)
        if len(near) == 1:
            changes.append(f"{node.name} → {near[0]}")
            if not node.alias:  # the old name may qualify columns: keep it as the alias
                node.set("alias", exp.TableAlias(this=exp.to_identifier(node.name)))
            real = q.tables[near[0]]
            node.set("this", exp.to_identifier(real.table))
            if real.name != real.table:  # the prompt names it schema-qualified
                node.set("db", exp.to_identifier(real.schema))
    return changes


def _swap_tables(tree: exp.Expression, q: _Query) -> list[str]:
    """Each SELECT that reads one table having some but not all of the columns it names, where
    exactly one other table has every one of them: that table read instead (``SELECT maker,
    model FROM car_names`` → ``FROM model_list``: the names together point to the table the
    model meant; ``maker`` is no misspelt ``make``). A SELECT none of whose names its table has
    keeps its table (the names are snapped)."""
    changes = []
    for select in list(tree.find_all(exp.Select)):
        read = _read_by(select, q)
        node = _only_table(select)
        if len(read) != 1 or node is None:
            continue
        table, names = next(iter(read.values())), _own_names(select, q, node)
        own = [n for n in names if _has(table, n)]
        if not own or len(own) == len(names) or _outer_names(select, q, names):
            continue  # nothing amiss, or no name of its own (a name to snap, not a table)
        fits = [t for t in q.every() if t is not table and all(_has(t, n) for n in names)]
        if len(fits) != 1:
            continue
        if not node.alias:  # columns qualified by the old name: by the new one
            _requalify(select, node.name.lower(), fits[0].table)
        node.set("this", exp.to_identifier(fits[0].table))
        node.set("db", exp.to_identifier(fits[0].schema) if fits[0].name != fits[0].table else None)
        changes.append(f"{table.name} → {fits[0].name}")
    return changes


def _requalify(select: exp.Select, old: str, new: str) -> None:
    """The SELECT's own columns qualified by ``old`` qualified by ``new``."""
    for col in select.find_all(exp.Column):
        if col.table.lower() == old and col.find_ancestor(exp.Select) is select:
            col.set("table", exp.to_identifier(new))


def _only_table(select: exp.Select) -> exp.Table | None:
    """The table node of a SELECT that reads one table and joins nothing; else None."""
    froms = [v for v in select.args.values() if isinstance(v, exp.From)]
    if len(froms) != 1 or select.args.get("joins") or not isinstance(froms[0].this, exp.Table):
        return None
    return froms[0].this


def _own_names(select: exp.Select, q: _Query, node: exp.Table) -> set[str]:
    """The column names a SELECT that reads only ``node`` names itself (not its subqueries'),
    output aliases left out; empty when one is qualified by another relation (a correlated
    reference)."""
    read, names = {node.alias_or_name.lower(), node.name.lower()}, set()
    for col in select.find_all(exp.Column):
        if col.find_ancestor(exp.Select) is not select or isinstance(col.this, exp.Star):
            continue
        if col.table and col.table.lower() not in read:
            return set()
        if col.name and col.name.lower() not in q.own:
            names.add(col.name.lower())
    return names


def _outer_names(select: exp.Select, q: _Query, names: set[str]) -> bool:
    """A SELECT that ``select`` is inside reads a table with one of ``names`` (a correlated
    reference may be meant)."""
    outer = select.parent.find_ancestor(exp.Select) if select.parent else None
    while outer is not None:
        if any(_has(t, n) for t in _read_by(outer, q).values() for n in names):
            return True
        outer = outer.parent.find_ancestor(exp.Select) if outer.parent else None
    return False


def _snap_column(col: exp.Column, q: _Query, schema: Schema) -> str | None:
    name, alias = col.name.lower(), col.table.lower()
    if not name or isinstance(col.this, exp.Star):
        return None
    table = q.by_alias.get(alias) if alias else None
    if table is not None and _has(table, name):
        return None
    if table is None and (alias or q.has_column(name)):
        return None  # an alias of a CTE or subquery, or a name the query has: not ours to judge
    key = _key_side(col, table, q, schema) if table is not None else None
    if key:
        col.set("this", exp.to_identifier(key))
        return f"{alias}.{name} → {alias}.{key}"
    holders = [a for a, t in q.by_alias.items() if _has(t, name) and a != _compared_with(col)]
    if alias and len(holders) == 1:
        col.set("table", exp.to_identifier(holders[0]))
        return f"{alias}.{name} → {holders[0]}.{name}"
    if _path(col, q, schema, keys=1):
        return None  # that very name a key away: joined in later, not snapped to a near one
    pool = [(t, c) for t in ([table] if table is not None else _pool(col, q)) for c in t.columns]
    fits = [
        c.name
        for t, c in pool
        if (_alike(name, c.name.lower()) or _word_of(c, name))
        and _key_fits(name, t, c, schema)
        or _own_key(name, t, c)
    ]
    if len(fits) != 1:  # none, or two (in one table or in two: ambiguous either way)
        return None
    new = fits[0]
    col.set("this", exp.to_identifier(new))
    return f"{name} → {new}"


def _pool(col: exp.Column, q: _Query) -> list[Table]:
    """The tables an unqualified column may be snapped into: its SELECT's own (a subquery's
    tables are not its), else, when that reads none of the schema's, the query's."""
    select = col.find_ancestor(exp.Select)
    own = list(_read_by(select, q).values()) if select is not None else []
    return own or q.used()


def _own_key(name: str, t: Table, c: Column) -> bool:
    """``name`` is ``<the table's name>id`` for its one primary key column (``makerid`` in
    ``car_makers``, whose key is ``id``; ``stadium_id`` in ``stadium``): the table's own
    identifier, as models write it."""
    if not name.endswith("id") or not c.is_primary_key:
        return False
    if sum(k.is_primary_key for k in t.columns) != 1:
        return False
    stem = name[:-2].rstrip("_")
    words = [t.table.lower(), *t.table.lower().split("_")]
    return bool(stem) and any(
        difflib.SequenceMatcher(None, stem, w).ratio() >= SNAP_TABLE for w in words
    )


def _compared_with(col: exp.Column) -> str | None:
    """The alias of the column ``col`` is compared with for equality (``T2.x = T3.x``: ``t3``):
    a join condition compares two tables, so ``col`` is not that one's."""
    other = _eq_other(col)
    return (other.table.lower() or None) if other is not None else None


def _eq_other(col: exp.Column) -> exp.Column | None:
    """The column on the other side of the equality ``col`` is one side of, if any."""
    eq = col.parent
    if not isinstance(eq, exp.EQ):
        return None
    other = eq.right if eq.left is col else eq.left
    return other if isinstance(other, exp.Column) else None


def _key_side(col: exp.Column, table: Table, q: _Query, schema: Schema) -> str | None:
    """In a join condition ``A.x = B.y`` where ``A`` has no ``x``: ``A``'s column of the one
    declared foreign key between the two tables whose ``B`` side is ``y`` (``T1.makeid =
    T2.makeid`` over ``cars_data.id → car_names.makeid``: ``id``); None otherwise."""
    other = _eq_other(col)
    peer = q.by_alias.get(other.table.lower()) if other is not None else None
    if peer is None or peer is table:
        return None
    found = set()
    for fk in _keys(schema, table, peer):
        mine, theirs = _sides(fk, table)
        found |= {a for a, b in zip(mine, theirs) if b.lower() == other.name.lower()}
    return found.pop() if len(found) == 1 else None


def _sides(fk, table: Table) -> tuple[list[str], list[str]]:
    """A foreign key's columns as ``(table's side, the other table's side)``, in key order."""
    if fk.table.lower() == table.name.lower():
        return fk.columns, fk.ref_columns
    return fk.ref_columns, fk.columns


def _key_fits(name: str, t: Table, c: Column, schema: Schema) -> bool:
    """A name written ending in ``id`` is snapped only to a column of identifiers
    (``_key_like``: ``makerid`` → ``model_list.maker``, a key to ``car_makers.id``, but never to
    the name ``car_makers.maker``), and another name never to a column whose name ends in ``id``
    (``maker`` is no misspelt ``makeid``)."""
    if name.endswith("id"):
        return _key_like(t, c, schema)
    return not c.name.lower().endswith("id")


def _key_like(t: Table, c: Column, schema: Schema) -> bool:
    """The column holds identifiers: its name ends in ``id``, or it is an integer primary key or
    in a declared foreign key (``model_list.maker`` → ``car_makers.id``)."""
    n = c.name.lower()
    if n.endswith("id"):
        return True
    if c.data_type.lower() not in _INTEGERS:
        return False
    return c.is_primary_key or any(
        (fk.table.lower() == t.name.lower() and n in {x.lower() for x in fk.columns})
        or (fk.ref_table.lower() == t.name.lower() and n in {x.lower() for x in fk.ref_columns})
        for fk in schema.foreign_keys
    )


def _word_of(real: Column, name: str) -> bool:
    """``real`` is a ``_``-separated word of the name written (``first_name`` for a table whose
    column is ``name``), and not a key (``country_id`` is not the table's own ``id``)."""
    words = name.split("_")
    return len(words) > 1 and not real.is_primary_key and real.name.lower() in words


def _alike(name: str, real: str) -> bool:
    """``real`` is the name meant: alike by difflib, or holding it as a ``_``-separated word."""
    return name in real.split("_") or difflib.SequenceMatcher(None, name, real).ratio() >= CUTOFF


def _join_holder(col: exp.Column, q: _Query, schema: Schema) -> str | None:
    """``snap_names``'s join: ``col`` taken from the one table nearest to its SELECT's that has
    it, joined in; the change as ``"name → table.name (joined)"``, or None when that is not the
    case."""
    path = _path(col, q, schema, keys=2)
    if path is None:
        return None
    select = col.find_ancestor(exp.Select)
    alias, steps = path
    _qualify_bare(select, _read_by(select, q))
    by = _alias_ident(select, alias)
    for fk, src, dst in steps:
        mine, theirs = _sides(fk, src)
        on = exp.and_(
            *(exp.column(a, by.copy()).eq(exp.column(b, dst.table)) for a, b in zip(mine, theirs))
        )
        node = exp.Table(this=exp.to_identifier(dst.table))
        if dst.name != dst.table:  # the prompt names it schema-qualified
            node.set("db", exp.to_identifier(dst.schema))
        select.join(node, on=on, copy=False)
        _qualify_key(select, by, [a for a, b in zip(mine, theirs) if a.lower() == b.lower()])
        by = exp.to_identifier(dst.table)
    col.set("table", exp.to_identifier(steps[-1][2].table))
    via = f" through {steps[0][2].table}" if len(steps) > 1 else ""
    return f"{col.name.lower()} → {steps[-1][2].table}.{col.name.lower()} (joined{via})"


def _path(col: exp.Column, q: _Query, schema: Schema, keys: int):
    """The one way to a table that has ``col``'s name from a table its SELECT reads (any of them,
    whatever alias it is written with: the alias is what the model got wrong; qualified with a
    table the FROM lacks, that table), none of whose tables the SELECT reads: ``(alias, [(key,
    from, to), ...])`` over one declared foreign key, else (``keys`` = 2) two through one table
    between; None when no table the SELECT reads lacks it, none is that near, or two are, or
    two ways lead to one, or a table's name is an alias or CTE of the query."""
    name, select = col.name.lower(), col.find_ancestor(exp.Select)
    if not name or isinstance(col.this, exp.Star) or name in q.own or select is None:
        return None
    read = _read_by(select, q)
    if any(_has(t, name) for t in read.values()):
        return None  # a column the SELECT has
    named = None  # SELECT singer.name FROM singer_in_concert: singer, joined
    if col.table and col.table.lower() not in read:
        named = q.tables.get(col.table.lower())
        if named is None or col.table.lower() in q.ctes or not _has(named, name):
            return None  # another relation's alias (a CTE, a subquery)
    taken, names = {t.name.lower() for t in read.values()}, read.keys() | q.ctes
    free = [
        t for t in {id(t): t for t in q.tables.values()}.values() if t.name.lower() not in taken
    ]
    holders = [t for t in free if _has(t, name) and named in (None, t)]
    ways = [
        (a, [(fk, t, h)]) for a, t in read.items() for h in holders for fk in _keys(schema, t, h)
    ]
    if not ways and keys > 1:
        ways = [
            (a, [(k1, t, b), (k2, b, h)])
            for a, t in read.items()
            for b in free
            if b not in holders
            for k1 in _keys(schema, t, b)
            for h in holders
            for k2 in _keys(schema, b, h)
        ]
    if len(ways) != 1 or any(s[2].table.lower() in names for s in ways[0][1]):
        return None
    return ways[0]


def _known(col: exp.Column, q: _Query) -> bool:
    """A table of ``col``'s SELECT, or of a SELECT it is inside (a correlated reference), has a
    column of its name."""
    name, select = col.name.lower(), col.find_ancestor(exp.Select)
    while select is not None:
        if any(_has(t, name) for t in _read_by(select, q).values()):
            return True
        select = select.parent.find_ancestor(exp.Select) if select.parent else None
    return False


def _qualify_key(select: exp.Select, by: exp.Identifier, names: list[str]) -> None:
    """Qualify the SELECT's bare columns named as a joined key column that both sides of the
    join have (equal there, so either side's is the same): with ``by``, the side already read."""
    for c in select.find_all(exp.Column):
        if not c.table and c.name.lower() in {n.lower() for n in names}:
            if c.find_ancestor(exp.Select) is select:
                c.set("table", by.copy())


def _keys(schema: Schema, a: Table, b: Table) -> list:
    """The declared foreign keys that join tables ``a`` and ``b``, either way."""
    return [fk for fk in schema.foreign_keys if _links(fk, a, b)]


def _read_by(select: exp.Select, q: _Query) -> dict[str, Table]:
    """The schema tables a SELECT reads itself (its FROM and JOINs): alias or name → table."""
    # the FROM by its type: sqlglot names its key "from" or "from_" by version
    nodes = [v for v in select.args.values() if isinstance(v, exp.From)]
    out = {}
    for n in nodes + list(select.args.get("joins") or []):
        t = n.this
        if isinstance(t, exp.Table) and t.name.lower() in q.tables:
            out[t.alias_or_name.lower()] = q.tables[t.name.lower()]
    return out


def _alias_ident(select: exp.Select, alias: str) -> exp.Identifier:
    """The identifier (its case and quotes as written) of the relation ``alias`` the SELECT
    reads."""
    for t in select.find_all(exp.Table):
        if t.alias_or_name.lower() == alias and t.find_ancestor(exp.Select) is select:
            return t.args["alias"].this if t.alias else t.this
    return exp.to_identifier(alias)


def _has(t: Table, name: str) -> bool:
    """The table has a column ``name`` (lower-cased)."""
    return any(c.name.lower() == name for c in t.columns)


def _links(fk, a: Table, b: Table) -> bool:
    """The foreign key joins tables ``a`` and ``b`` (either way; not a table with itself)."""
    ends = {fk.table.lower(), fk.ref_table.lower()}
    return a is not b and ends == {a.name.lower(), b.name.lower()}


def _qualify_bare(select: exp.Select, read: dict[str, Table]) -> None:
    """Qualify each bare column of ``select`` (not of its subqueries) that one table it reads
    has, so that a table joined in makes none ambiguous."""
    for c in select.find_all(exp.Column):
        if c.table or isinstance(c.this, exp.Star) or c.find_ancestor(exp.Select) is not select:
            continue
        by = [a for a, t in read.items() if _has(t, c.name.lower())]
        if len(by) == 1:
            c.set("table", exp.to_identifier(by[0]))
