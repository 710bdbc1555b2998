"""The schema as a graph of joins (docs/internals/retrieval.md "Join graph"). Source: PET-SQL
(Li et al. 2024) §3.3; foreign-key discovery by column names (Rostin et al. 2009)."""

from __future__ import annotations

from collections import deque

from ..core.types import Schema, Table
from ..model.masking import inflections, name_words


def table_lookup(schema: Schema) -> dict[str, Table]:
    """Map each table's lower-cased prompt name and ``schema.table`` to the table.

    Args:
        schema: the schema (``catalog.load_schema``).

    Returns:
        dict: lower-cased name -> ``Table``.
    """
    out: dict[str, Table] = {}
    for t in schema.tables:
        out[t.name.lower()] = t
        out[f"{t.schema}.{t.table}".lower()] = t
    return out


def fk_graph(schema: Schema) -> dict[str, set[str]]:
    """Build the undirected graph of tables joined by a foreign key.

    Args:
        schema: the schema (``catalog.load_schema``).

    Returns:
        dict: table prompt name -> the tables it shares a foreign key with (no self-edges).
    """
    g: dict[str, set[str]] = {t.name: set() for t in schema.tables}
    for fk in schema.foreign_keys:
        if fk.table in g and fk.ref_table in g and fk.table != fk.ref_table:
            g[fk.table].add(fk.ref_table)
            g[fk.ref_table].add(fk.table)
    return g


def _components(g: dict[str, set[str]]) -> dict[str, int]:
    """Number the connected components of ``g`` (table -> component id)."""
    comp: dict[str, int] = {}
    for start in sorted(g):
        if start in comp:
            continue
        comp[start] = len(comp)
        q = deque([start])
        while q:
            for v in g[q.popleft()]:
                if v not in comp:
                    comp[v] = comp[start]
                    q.append(v)
    return comp


def single_column_keys(schema: Schema) -> dict[str, str | None]:
    """Map each table to its one-column primary key.

    Args:
        schema: the schema (``catalog.load_schema``).

    Returns:
        dict: table prompt name -> lower-cased key column; None for none or a composite key.
    """
    out: dict[str, str | None] = {}
    for t in schema.tables:
        pks = [c.name.lower() for c in t.columns if c.is_primary_key]
        out[t.name] = pks[0] if len(pks) == 1 else None
    return out


def entity_forms(words: list[str]) -> set[str]:
    """The names a column named after a table takes (``car_makers`` -> maker, car_makers…).

    Args:
        words: the table name's words (``masking.name_words``).

    Returns:
        Singular/plural forms of the last word and of the whole name; empty for no words.
    """
    return inflections(words[-1]) | inflections("_".join(words)) if words else set()


def inferred_joins(schema: Schema) -> list[tuple[str, str, str]]:
    """Infer join edges between tables the foreign keys leave unconnected: a column name and
    type only these two tables share, or a column named after the other table
    (Rostin et al. 2009; docs/internals/retrieval.md, "Inferred joins").

    Args:
        schema: the schema (``catalog.load_schema``).

    Returns:
        Sorted (table, other table, column name) triples, prompt names, each pair once, sorted.
    """
    comp = _components(fk_graph(schema))
    pk_only = single_column_keys(schema)
    by_col: dict[tuple[str, str], list[str]] = {}
    for t in schema.tables:
        for c in t.columns:
            by_col.setdefault((c.name.lower(), (c.data_type or "").lower()), []).append(t.name)
    out: set[tuple[str, str, str]] = set()
    for (col, _), names in by_col.items():
        if len(names) != 2:
            continue
        a, b = sorted(names)
        if comp.get(a) != comp.get(b) and not (pk_only.get(a) == col and pk_only.get(b) == col):
            out.add((a, b, col))
    for t, col, ref in named_references(schema, pk_only):
        if comp.get(t) != comp.get(ref):
            a, b = sorted((t, ref))
            out.add((a, b, col))
    return sorted(out)


def named_references(schema: Schema, pk_only: dict[str, str | None]) -> list[tuple[str, str, str]]:
    """Find the columns named after another table that no foreign key declares
    (``model_list.maker`` -> ``car_makers``: an ``entity_forms`` name, the type of that table's
    one-column key, one table fitting).

    Args:
        schema: the schema (``catalog.load_schema``).
        pk_only: ``single_column_keys(schema)``.

    Returns:
        (table, lower-cased column, referenced table) triples, prompt names.
    """
    declared = {(fk.table, c.lower()) for fk in schema.foreign_keys for c in fk.columns}
    pk_type: dict[str, str] = {}
    forms: dict[str, set[str]] = {}
    for t in schema.tables:
        pk = pk_only.get(t.name)
        col = next((c for c in t.columns if c.name.lower() == pk), None) if pk else None
        if col is None:
            continue
        pk_type[t.name] = (col.data_type or "").lower()
        words = name_words(t.table)
        if words:
            forms[t.name] = entity_forms(words)
    out = []
    for t in schema.tables:
        for c in t.columns:
            name = c.name.lower()
            if c.is_primary_key or (t.name, name) in declared:
                continue
            refs = [
                r
                for r, f in forms.items()
                if r != t.name and name in f and pk_type[r] == (c.data_type or "").lower()
            ]
            if len(refs) == 1:
                out.append((t.name, c.name.lower(), refs[0]))
    return out


def _join_graph(schema: Schema) -> dict[str, set[str]]:
    """``fk_graph`` plus the ``inferred_joins`` edges: the graph ``fk_bridges`` walks."""
    g = fk_graph(schema)
    for a, b, _ in inferred_joins(schema):
        g[a].add(b)
        g[b].add(a)
    return g


def _shortest_path(
    g: dict[str, set[str]], sources: set[str], targets: set[str]
) -> list[str] | None:
    """Shortest path (ends included) from any of ``sources`` to any of ``targets``
    (breadth-first, neighbours in name order: deterministic); None when there is none."""
    prev: dict[str, str | None] = dict.fromkeys(sources)
    q = deque(sorted(sources))
    while q:
        u = q.popleft()
        if u in targets:
            path = [u]
            while prev[path[-1]] is not None:
                path.append(prev[path[-1]])
            return path[::-1]
        for v in sorted(g.get(u, ())):
            if v not in prev:
                prev[v] = u
                q.append(v)
    return None


def fk_bridges(
    tables: list[str], schema: Schema, joined: list[str] = (), edges: list[tuple[str, str]] = ()
) -> list[tuple[str, str, str]]:
    """Find the tables needed to join ``tables`` over the foreign keys and inferred joins.

    Args:
        tables: table prompt names, in link order (names not in ``schema`` are ignored).
        schema: the schema (``catalog.load_schema``).
        joined: the tables PreSQL reads; the tree starts from all of them.
        edges: further (table, table) pairs joined directly (``presql_written_joins``).

    Returns:
        (bridge, from, to) triples, prompt names: the intermediate tables, not in ``tables``, of
        the path from ``from`` (in the tree) to ``to``; empty for fewer than two known tables.
    """
    g = _join_graph(schema)
    for a, b in edges:
        if a in g and b in g and a != b:
            g[a].add(b)
            g[b].add(a)
    todo = [t for t in tables if t in g]
    if len(todo) < 2:
        return []
    tree = {t for t in joined if t in g} or {todo[0]}
    out: list[tuple[str, str, str]] = []
    remaining = set(todo) - tree
    while remaining:
        path = _shortest_path(g, tree, remaining)
        if path is None:
            # the rest is unreachable from the tree: start a new tree at the next table
            nxt = next(t for t in todo if t in remaining)
            remaining.discard(nxt)
            tree.add(nxt)
            continue
        for b in path[1:-1]:
            if b not in tree and b not in tables:
                out.append((b, path[0], path[-1]))
        tree.update(path)
        remaining -= set(path)
    return out


def nearest_with_column(schema: Schema, start: list[str], column: str) -> list[str]:
    """Find the tables nearest to ``start`` over the join graph that have a column ``column``
    (where a PreSQL's stray column belongs; docs/internals/retrieval.md, "Stray columns").

    Args:
        schema: the schema (``catalog.load_schema``).
        start: table prompt names (the PreSQL's tables); they themselves are never returned.
        column: the lower-cased column name.

    Returns:
        Table prompt names, sorted: those with the column at the least number of joins (>= 1)
        from any of ``start``; [] when no table reachable from ``start`` has it.
    """
    g = _join_graph(schema)
    has = {t.name for t in schema.tables if any(c.name.lower() == column for c in t.columns)}
    seen = {t for t in start if t in g}
    frontier = set(seen)
    while frontier:
        frontier = {v for u in frontier for v in g[u]} - seen
        found = sorted(frontier & has)
        if found:
            return found
        seen |= frontier
    return []
