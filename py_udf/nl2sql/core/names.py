"""Names of a parsed query resolved once with sqlglot scopes (docs/internals/core.md "Names")."""

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
    """One reference to a database relation in a query, names lower-cased."""

    name: str
    schema: str | None  # the qualifier as written; None when unqualified
    alias: str  # how the query refers to it (its alias, else its name)

    @property
    def key(self) -> str:
        """``schema.name`` when qualified, else ``name``: how the schema index is looked up."""
        return f"{self.schema}.{self.name}" if self.schema else self.name


@dataclass(frozen=True)
class Names:
    """A query's names, resolved."""

    # every reference to a real relation, breadth-first (outer query first; a self-join twice)
    relations: tuple[Relation, ...]
    ctes: frozenset[str]  # the CTEs the query defines
    scoped: bool  # sqlglot's scopes worked; else ``relations`` comes from a walk skipping CTEs
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
            Qualified: the relation its qualifier names in its scope or an enclosing one ([] for a
            CTE, a derived table or nothing known). Unqualified: the real relations of the innermost
            scope that has any. Without scopes: those of its qualifier's query, or all.
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
    """Resolve the names of a parsed statement once (cached per tree object). Source: sqlglot's
    optimizer scope analysis (``traverse_scope``).

    Args:
        tree: a sqlglot tree (as ``sqlcheck.parse_shared`` returns it); not changed.

    Returns:
        ``Names``: its real relations and the scope of every column reference.
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
