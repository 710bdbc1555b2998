"""Two tables related the wrong way, which the schema's keys show (repair, docs/internals/
generation.md "Repair"):

- ``off_key_link``: two tables that one foreign key links, compared on other columns: a join
  ``countries.continent = car_makers.country`` or ``countries.countryid IN (SELECT id FROM
  car_makers)`` where ``car_makers.country`` refers to ``countries.countryid``. One side of the
  comparison is the key's own column, so the other side is its partner: round 0 puts it there.
- ``outer_bound``: an ``IN (SELECT x FROM t …)`` whose ``x`` none of the subquery's own tables
  has: SQL binds it to the outer query's ``x``, so the condition compares a value with itself and
  holds wherever the subquery has a row (``template_id IN (SELECT template_id FROM
  ref_template_types WHERE …)`` where ``ref_template_types`` has no ``template_id``).

Where they came from: read across bench/live.py's answers of Qwen2.5-Coder-0.5B and 1.5B-Instruct
on Spider dev (docs/benchmarks.md), and checked against its 472 gold queries, none of which
either rule flags; of the 13 recorded systems' 6,135 answers 24 compare off the key and 18 bind
an IN's column to the outer query. Nothing per database: the rules read the foreign keys the
catalog (or the semantic model) declares.
"""

from __future__ import annotations

from sqlglot import exp

from ..core.errors import CandidateRefused
from ..core.names import resolve
from ..core.sqlcheck import parse_one, parse_shared
from ..core.types import ForeignKey, Schema, Table

__all__ = ["link_problem", "off_key_link", "outer_bound", "table_named"]


def link_problem(sql: str | None, schema: Schema) -> str | None:
    """The sentence for the repair prompt on a query that relates two tables the wrong way
    (``off_key_link``, ``outer_bound``); names only, never a literal.

    Args:
        sql: a candidate's SQL (PostgreSQL), or None.
        schema: the schema it was written for (its tables' columns and foreign keys), or None.

    Returns:
        One sentence, or None when neither rule applies (or there is no schema).
    """
    if schema is None:
        return None
    off = _off_key(_parsed(sql), schema)
    if off:
        _, _, (a, b), key = off[0]
        return (
            f"the query compares {a} with {b}, but {key.table}.{key.columns[0]} refers to "
            f"{key.ref_table}.{key.ref_columns[0]}: relate the two tables on those columns"
        )
    bound = outer_bound(sql, schema)
    if bound:
        column, tables = bound
        return (
            f"the IN subquery selects {column}, which none of its tables ({tables}) has, so it "
            "refers to the outer query's column and the condition holds wherever the subquery "
            "has a row; select a column of the subquery's own tables, or read the table that has it"
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
        column.set("this", exp.to_identifier(new, quoted=new != new.lower()))
        changes.append(f"{old} → {column.sql(dialect='postgres')}")
    return tree.sql(dialect="postgres"), changes


def outer_bound(sql: str | None, schema: Schema) -> tuple[str, str] | None:
    """An ``IN`` subquery whose one output column none of its own tables has (an outer query's).

    Args:
        sql: a candidate's SQL (PostgreSQL), or None.
        schema: the schema it was written for (its tables' columns).

    Returns:
        ``(the column as written, the subquery's tables, comma-separated)``, or None when every
        IN subquery selects its own tables' columns, names a table the schema does not hold, or
        the SQL does not parse.
    """
    tree = _parsed(sql)
    if tree is None:
        return None
    for node in tree.find_all(exp.In):
        sub = node.args.get("query")
        sub = sub.this if isinstance(sub, exp.Subquery) else sub
        if not isinstance(sub, exp.Select) or len(sub.expressions) != 1:
            continue
        column = sub.expressions[0]
        own = [t for t in sub.find_all(exp.Table) if t.find_ancestor(exp.Select) is sub]
        tables = [table_named(schema, _key(t)) for t in own]
        if not isinstance(column, exp.Column) or not own or None in tables:
            continue
        aliases = {t.alias_or_name.lower() for t in own}
        if column.table:
            outer = column.table.lower() not in aliases
        else:
            outer = not any(_has(t, column.name) for t in tables)
        if outer:
            return column.sql(dialect="postgres"), ", ".join(t.name for t in tables)
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
    holders = {id(t): t for t in tables if t is not None and _has(t, column.name)}
    return next(iter(holders.values())) if len(holders) == 1 else None


def _on_key(key: ForeignKey, ta: Table, a: exp.Column, tb: Table, b: exp.Column) -> bool:
    """Whether ``a = b`` is the foreign key's own pair (either way round)."""
    return a.name.lower() == _side(key, ta).lower() and b.name.lower() == _side(key, tb).lower()


def _has(table: Table, name: str) -> bool:
    return any(c.name.lower() == name.lower() for c in table.columns)


def _key(t: exp.Table) -> str:
    return ".".join(i.name for i in (t.args.get("db"), t.args.get("this")) if i is not None)


def _parsed(sql: str | None) -> exp.Expression | None:
    try:
        return parse_shared(sql) if sql else None
    except CandidateRefused:
        return None
