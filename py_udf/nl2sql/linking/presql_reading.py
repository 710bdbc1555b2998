"""What a PreSQL reads: tables, columns, joins. Source: PET-SQL (Li et al. 2024) §3.3;
MCS-SQL (Lee et al. 2024) §3.1."""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from ..core.errors import CandidateRefused
from ..core.names import resolve
from ..core.sqlcheck import parse_shared
from ..core.types import Schema, Table
from ._schema_graph import single_column_keys, table_lookup

_NOT_NAMES = {TokenType.STRING, TokenType.NUMBER, TokenType.NATIONAL_STRING, TokenType.DOT}


_QUERY_STARTS = {TokenType.SELECT, TokenType.WITH}


def _presql_tree(presql: str | None) -> exp.Expression | None:
    """The PreSQL parsed (shared parse cache), or None when it is empty, does not parse, or
    parses as something other than a query (a lone name, ``DESCRIBE t``: not a PreSQL)."""
    if not presql:
        return None
    try:
        tree = parse_shared(presql)
    except CandidateRefused:
        return None
    return tree if isinstance(tree, exp.Query) else None


def presql_links(presql: str | None, schema: Schema) -> tuple[list[str], list[tuple[str, str]]]:
    """Find the tables and columns that PreSQL reads (``names.resolve``; an unqualified
    column credited to every relation of its scope that has it; PET-SQL §3.3).

    Args:
        presql: the PreSQL's text (PostgreSQL), or None.
        schema: the schema the calling role may see (``catalog.load_schema``).

    Returns:
        (table prompt names, (table, column) pairs), in query order without duplicates; ([], [])
        when PreSQL is empty or does not parse.
    """
    tree = _presql_tree(presql)
    if tree is None:
        return [], []
    lookup = table_lookup(schema)
    names = resolve(tree)
    tables: list[Table] = []
    for rel in names.relations:
        tb = lookup.get(rel.key)
        if tb is not None and tb not in tables:
            tables.append(tb)
    cols: list[tuple[str, str]] = []
    for c in tree.find_all(exp.Column):
        if not c.name:
            continue
        cname = c.name.lower()
        owners = [lookup[r.key] for r in names.column_relations(c) if r.key in lookup]
        for tb in owners:
            for col in tb.columns:
                if col.name.lower() == cname and (tb.name, col.name) not in cols:
                    cols.append((tb.name, col.name))
    return [t.name for t in tables], cols


def presql_token_tables(
    presql: str | None, schema: Schema, dialects: tuple[str, ...] = ("postgres", "sqlite")
) -> list[str]:
    """Read the tables a PreSQL names from its tokens, for a PreSQL that does not parse (cut
    off, another dialect). Only a text that starts as a query does (its first token SELECT or
    WITH): prose, an explanation or a refusal that names tables is not a PreSQL and reads none,
    so it never narrows the linked schema.

    Args:
        presql: the PreSQL's text (as cleaned, or as the model wrote it), or None.
        schema: the schema the calling role may see.
        dialects: sqlglot dialects whose tokenizers are tried in order.

    Returns:
        Table prompt names in token order without duplicates; [] when none is named or the
        text does not start as a query.
    """
    if not presql:
        return []
    by_name: dict[str, Table] = {}
    for t in schema.tables:
        by_name.setdefault(t.table.lower(), t)
        by_name[t.name.lower()] = t
        by_name[f"{t.schema}.{t.table}".lower()] = t
    for dialect in dialects:
        tk = Dialect.get_or_raise(dialect).tokenizer()
        try:
            tokens = tk.tokenize(presql)
        except SqlglotError:
            tokens = tk.tokens  # what was read before the error
        if not tokens or tokens[0].token_type not in _QUERY_STARTS:
            continue  # not a query: prose names tables without reading them
        found: list[str] = []
        for i, t in enumerate(tokens):
            if t.token_type in _NOT_NAMES:
                continue
            text = t.text.lower()
            if i + 2 < len(tokens) and tokens[i + 1].token_type == TokenType.DOT:
                qual = f"{text}.{tokens[i + 2].text.lower()}"
                if qual in by_name:
                    text = qual
            tb = by_name.get(text)
            if tb is not None and tb.name not in found:
                found.append(tb.name)
        if found:
            return found
    return []


def presql_written_joins(presql: str | None, schema: Schema) -> list[tuple[str, str]]:
    """Find the pairs of tables PreSQL joins by an equality it wrote between their columns.

    Args:
        presql: the PreSQL's text (PostgreSQL), or None.
        schema: the schema the calling role may see.

    Returns:
        (table, table) prompt-name pairs, in query order; [] when PreSQL is empty or does not
        parse.
    """
    tree = _presql_tree(presql)
    if tree is None:
        return []
    lookup = table_lookup(schema)
    names = resolve(tree)
    pks = single_column_keys(schema)
    out: list[tuple[str, str]] = []
    for eq in tree.find_all(exp.EQ):
        ends = []
        for side in (eq.this, eq.expression):
            if not isinstance(side, exp.Column):
                break
            owners = {
                lookup[r.key].name
                for r in names.column_relations(side)
                if r.key in lookup
                and any(c.name.lower() == side.name.lower() for c in lookup[r.key].columns)
            }
            if len(owners) != 1:
                break
            ends.append((owners.pop(), side.name.lower()))
        if len(ends) != 2 or ends[0][0] == ends[1][0]:
            continue
        if all(pks.get(t) == c for t, c in ends):
            continue  # primary key = primary key: not trusted
        pair = (ends[0][0], ends[1][0])
        if pair not in out:
            out.append(pair)
    return out


def presql_join_groups(presql: str | None, schema: Schema) -> list[list[str]]:
    """Group the tables PreSQL reads by the SELECT whose FROM/JOIN reads them.

    Args:
        presql: the PreSQL's text (PostgreSQL), or None.
        schema: the schema the calling role may see.

    Returns:
        Lists of table prompt names (schema tables only), one per SELECT reading two or more;
        [] when PreSQL is empty or does not parse.
    """
    tree = _presql_tree(presql)
    if tree is None:
        return []
    lookup = table_lookup(schema)
    groups: dict[int, list[str]] = {}
    for t in tree.find_all(exp.Table):
        sel = t.find_ancestor(exp.Select)
        key = f"{t.db}.{t.name}".lower() if t.db else t.name.lower()
        tb = lookup.get(key)
        if sel is None or tb is None:
            continue
        while (outer := _semi_join_outer(sel)) is not None:
            sel = outer
        grp = groups.setdefault(id(sel), [])
        if tb.name not in grp:
            grp.append(tb.name)
    return [g for g in groups.values() if len(g) > 1]


def _semi_join_outer(sel: exp.Select) -> exp.Select | None:
    """The SELECT that ``sel`` is a semi-join of (``col [NOT] IN (sel)``, ``col = (sel)``),
    or None when ``sel`` is not such a subquery."""
    sub = sel.parent
    if not isinstance(sub, exp.Subquery):
        return None
    pred = sub.parent
    if isinstance(pred, exp.In) and sub.arg_key == "query" or isinstance(pred, exp.EQ):
        return pred.find_ancestor(exp.Select)
    return None


def presql_stray_columns(presql: str | None, schema: Schema) -> list[str]:
    """Find the column names PreSQL reads from tables that lack them (``SELECT model FROM
    cars_data`` where ``model`` is a column of car_names): the model put a column of another
    table in this one (docs/internals/retrieval.md, "Stray columns").

    A column counts when it may belong to some relation (``names.column_relations``) and none
    of those is a schema table that has a column of that name (a table the schema lacks, as a
    PreSQL written for another database reads, has none); names that the query itself defines
    (output aliases, the columns of derived tables and CTEs) never count.

    Args:
        presql: the PreSQL's text (PostgreSQL), or None.
        schema: the schema the calling role may see.

    Returns:
        Lower-cased column names in query order without duplicates; [] when PreSQL is empty or
        does not parse.
    """
    tree = _presql_tree(presql)
    if tree is None:
        return []
    lookup = table_lookup(schema)
    names = resolve(tree)
    defined = {a.alias.lower() for a in tree.find_all(exp.Alias) if a.alias}
    for ta in tree.find_all(exp.TableAlias):
        defined |= {c.name.lower() for c in ta.columns} | {ta.name.lower()}
    for q in tree.find_all(exp.Subquery, exp.CTE):
        if isinstance(q.this, exp.Query):
            defined |= {n.lower() for n in q.this.named_selects}
    out: list[str] = []
    for c in tree.find_all(exp.Column):
        cname = c.name.lower()
        if not cname or cname in defined or cname in out:
            continue
        rels = names.column_relations(c)
        tables = [lookup[r.key] for r in rels if r.key in lookup]
        if rels and not any(col.name.lower() == cname for t in tables for col in t.columns):
            out.append(cname)
    return out
