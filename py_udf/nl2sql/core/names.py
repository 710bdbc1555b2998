"""Names of a parsed query resolved once: the real relations it reads and what each column
reference belongs to, with sqlglot's optimizer scopes (``sqlglot.optimizer.scope``).

A query's tables are not all relations of the database: a CTE's name, a derived table's
alias and a LATERAL subquery are sources too, a CTE may shadow a table of the same name, and a
correlated subquery's column may belong to an outer query. sqlglot's scope analysis already
knows which source every name refers to; this module asks it once per tree and answers the
questions the pipeline asks: which relations does the query read (schema linking, the
candidate check, the trace), and which relations may a column reference belong to (value
alignment, column linking).

Lower-cased names throughout, as the schema index is matched (unquoted PostgreSQL identifiers).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

CACHE_SIZE = 256
_CACHE: OrderedDict[int, tuple[exp.Expression, Names]] = OrderedDict()


@dataclass(frozen=True)
class Relation:
    """One reference to a database relation in a query.

    Attributes:
        name: the relation's name, lower-cased.
        schema: its qualifier as written, lower-cased; None when unqualified.
        alias: the name the query refers to it by (its alias, else its name), lower-cased.
    """

    name: str
    schema: str | None
    alias: str

    @property
    def key(self) -> str:
        """``schema.name`` when qualified, else ``name``: how the schema index is looked up."""
        return f"{self.schema}.{self.name}" if self.schema else self.name


@dataclass(frozen=True)
class Names:
    """A query's names, resolved.

    Attributes:
        relations: every reference to a real relation, in the order of sqlglot's
            breadth-first walk (outer query first; a table read twice, e.g. a self-join,
            appears twice).
        ctes: names of the CTEs the query defines, lower-cased.
        scoped: whether sqlglot's scope analysis succeeded; when not (a statement that is not
            a query), ``relations`` comes from a walk of the tree that skips CTE names.
    """

    relations: tuple[Relation, ...]
    ctes: frozenset[str]
    scoped: bool
    _column_scope: dict[int, Scope] = field(default_factory=dict, repr=False, compare=False)
    _table_relation: dict[int, Relation] = field(default_factory=dict, repr=False, compare=False)

    def keys(self) -> list[str]:
        """The relations' keys, each once.

        Returns:
            ``schema.name`` or ``name`` strings, in the order of ``relations``.
        """
        return list(dict.fromkeys(r.key for r in self.relations))

    def column_relations(self, column: exp.Column) -> list[Relation]:
        """The relations a column reference of this query may belong to.

        Args:
            column: an ``exp.Column`` node of the tree these names were resolved from.

        Returns:
            For a qualified column, the relation its qualifier names in its scope or an
            enclosing one (correlated subqueries), or [] when the qualifier names a CTE, a
            derived table or nothing known. For an unqualified column, the real relations of
            the innermost scope that has any (its own, else the enclosing ones'); the caller
            picks by the catalog's columns. Without scopes (or for a column no scope lists):
            the relations of the query its qualifier names, or all of them.
        """
        scope = self._column_scope.get(id(column))
        if scope is None:  # no scopes, or a column the scopes do not list
            qualifier = column.table.lower()
            return list(
                {r.key: r for r in self.relations if not qualifier or r.alias == qualifier}.values()
            )
        qualifier = column.table
        while scope is not None:
            if qualifier:
                source = _source(scope, qualifier)
                if source is not None:
                    relation = self._table_relation.get(id(source))
                    return [relation] if relation is not None else []
            else:
                found = [
                    self._table_relation[id(s)]
                    for s in scope.sources.values()
                    if id(s) in self._table_relation
                ]
                if found:
                    return found
            scope = scope.parent
        return []


def _source(scope: Scope, qualifier: str):
    """The source ``qualifier`` names in ``scope`` (exact, then case-insensitive)."""
    if qualifier in scope.sources:
        return scope.sources[qualifier]
    low = qualifier.lower()
    for name, source in scope.sources.items():
        if name.lower() == low:
            return source
    return None


def _relation(table: exp.Table) -> Relation:
    db = table.args.get("db")
    return Relation(
        name=table.name.lower(),
        schema=db.name.lower() if db else None,
        alias=table.alias_or_name.lower(),
    )


def _scoped(tree: exp.Expression) -> Names | None:
    """Names from sqlglot's scopes; None when the statement has no query scope."""
    scopes = traverse_scope(tree)
    if not scopes:
        return None
    real: dict[int, Relation] = {}
    column_scope: dict[int, Scope] = {}
    sourced: set[int] = set()  # Table nodes some scope resolves (to a relation or a CTE)
    for scope in scopes:  # innermost scopes first
        for source in scope.sources.values():
            if isinstance(source, exp.Table) and source.name:
                real.setdefault(id(source), _relation(source))
        sourced.update(id(t) for t in scope.tables)
        for col in scope.columns:
            column_scope.setdefault(id(col), scope)
    ctes = _cte_names(tree)
    ordered = []
    for t in tree.find_all(exp.Table):
        if id(t) in real:
            ordered.append(real[id(t)])
        elif t.name and id(t) not in sourced and (t.args.get("db") or t.name.lower() not in ctes):
            # a table no scope reads from (e.g. the target of a data-modifying statement):
            # listed, so that the relation check sees everything the text names
            ordered.append(_relation(t))
    return Names(
        relations=tuple(ordered),
        ctes=ctes,
        scoped=True,
        _column_scope=column_scope,
        _table_relation=real,
    )


def _cte_names(tree: exp.Expression) -> frozenset[str]:
    return frozenset(c.alias_or_name.lower() for c in tree.find_all(exp.CTE))


def _walked(tree: exp.Expression) -> Names:
    """Without scopes: every named table that is not a CTE's name."""
    ctes = _cte_names(tree)
    rels = tuple(
        _relation(t)
        for t in tree.find_all(exp.Table)
        if t.name and (t.args.get("db") or t.name.lower() not in ctes)
    )
    return Names(relations=rels, ctes=ctes, scoped=False)


def resolve(tree: exp.Expression) -> Names:
    """Resolve the names of a parsed statement once (cached per tree object).

    Args:
        tree: a sqlglot tree (as ``sqlcheck.parse_shared`` returns it); not changed.

    Returns:
        ``Names``: its real relations and the scope of every column reference.

    Source: sqlglot's optimizer scope analysis (``traverse_scope``), which resolves CTEs,
    derived tables, set operations, subqueries and LATERAL as PostgreSQL does.
    """
    hit = _CACHE.get(id(tree))
    if hit is not None and hit[0] is tree:
        _CACHE.move_to_end(id(tree))
        return hit[1]
    try:
        names = _scoped(tree) or _walked(tree)
    except (SqlglotError, RecursionError, KeyError, AttributeError):
        names = _walked(tree)
    _CACHE[id(tree)] = (tree, names)
    if len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return names
