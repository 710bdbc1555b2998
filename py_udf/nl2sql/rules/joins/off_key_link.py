"""``off_key_link``: two tables that one foreign key links, compared on other columns: a join
``countries.continent = car_makers.country`` or ``countries.countryid IN (SELECT id FROM
car_makers)`` where ``car_makers.country`` refers to ``countries.countryid``. One side of the
comparison is the key's own column, so the other side is its partner: round 0 puts it there
(final: its rows, or none, answer); the model is told which column refers to which.

Source: read across bench/live.py's answers of Qwen2.5-Coder-0.5B and 1.5B-Instruct on Spider dev
(docs/benchmarks.md), checked against its 472 gold queries (none flagged); 24 of the 13 recorded
systems' 6,135 answers compare off the key. Nothing per database: the catalog's foreign keys.
"""

from __future__ import annotations

from sqlglot import exp

from ...core.names import resolve
from ...core.types import ForeignKey, Schema, Table
from .._context import Context, Outcome
from .._sql import identifier
from ._keys import compared, owner

__all__ = ["run"]


def run(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """Rewrite comparisons of two tables linked by one foreign key, made on other columns, onto
    the key: where one side is the key's column on its table, the other becomes the key's column
    on the other table (``countries.countryid IN (SELECT id FROM car_makers)`` → ``… (SELECT
    country FROM car_makers)`` given ``car_makers.country → countries.countryid``).

    Args:
        tree: the candidate's shared parse (copied before it is changed), or None.
        ctx: the candidate (its schema's foreign keys).

    Returns:
        The rewrite (changes ``a.x → a.y``, final) and its sentence (names only), or None when
        no comparison is off a key (or the tables share no key, or more than one, or neither
        side is the key's column).
    """
    tree = tree.copy() if tree is not None else None
    found = _off_key(tree, ctx.schema)
    if not found:
        return None
    _, _, (a, b), key = found[0]
    sentence = (
        f"the query compares {a} with {b}, but {key.table}.{key.columns[0]} refers to "
        f"{key.ref_table}.{key.ref_columns[0]}: relate the two tables on those columns"
    )
    changes = []
    for column, new, _, _ in found:
        old = column.sql(dialect="postgres")
        column.set("this", identifier(new))
        changes.append(f"{old} → {column.sql(dialect='postgres')}")
    sql = tree.sql(dialect="postgres")
    return Outcome("off_key_link", sql, tuple(changes), final=True, sentence=sentence)


def _off_key(tree: exp.Expression | None, schema: Schema | None) -> list:
    """``[(the column to move, its new name, (side a, side b as written), the foreign key)]``
    of ``tree``."""
    if tree is None or schema is None or not schema.foreign_keys:
        return []
    names = resolve(tree)
    found = []
    for a, b in compared(tree):
        ta, tb = owner(a, names, schema), owner(b, names, schema)
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


def _on_key(key: ForeignKey, ta: Table, a: exp.Column, tb: Table, b: exp.Column) -> bool:
    """Whether ``a = b`` is the foreign key's own pair (either way round)."""
    return a.name.lower() == _side(key, ta).lower() and b.name.lower() == _side(key, tb).lower()
