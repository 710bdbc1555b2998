"""Statements of ``pg_stat_statements`` as mining candidates (docs/internals/curated.md
"Mining")."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp

from ..core.errors import CandidateRefused
from ..core.sqlcheck import parse_single, referenced_tables, to_sql
from ..core.types import Schema
from ..generation.db_checks import function_names
from ._parameters import parameter_sites, template_slots

HIDDEN_TEXT = "<insufficient privilege>"
"""What pg_stat_statements shows instead of another role's statement text to a role that is
neither superuser nor member of pg_read_all_stats."""
MAX_QUERY_CHARS = 20000
"""Longest statement text considered (longer ones are skipped as ``too_long``)."""
CATALOG_SCHEMAS = frozenset({"pg_catalog", "information_schema", "pg_toast"})
_DML = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Copy, exp.TruncateTable)
_DDL = tuple(
    t
    for t in (
        exp.Create,
        exp.Drop,
        exp.Alter,
        getattr(exp, "Grant", None),
        getattr(exp, "Revoke", None),
        getattr(exp, "Comment", None),
    )
    if t is not None
)
_QUERY = (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,40}")  # a parameter name (a column's name), not SQL


@dataclass
class LoggedStatement:
    """One statement of ``pg_stat_statements``, summed over the roles that ran it: its
    ``queryid``, its ``query`` text as shown (constants normalised to ``$n``), its ``calls``.
    """

    queryid: int | None
    query: str
    calls: int


@dataclass
class MinedCandidate:
    """A statement kept for mining: ``kind`` ``query`` or ``template`` (``$n`` → ``:name``),
    ``parameters`` (``Slot`` dicts, SQL order), ``tables`` (``schema.table``, lower-cased)."""

    statement: LoggedStatement
    kind: str
    sql: str
    parameters: list[dict[str, Any]] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)


def classify(query: str, own_functions: frozenset[str]) -> tuple[exp.Expression | None, str | None]:
    """Parse a logged statement and say why it is no candidate, if it is not.

    Args:
        query: the statement text.
        own_functions: lower-cased names of the nl2sql extension's functions.

    Returns:
        ``(tree, None)`` for one query over relations that are not nl2sql's or the catalogs',
        its comments removed (``without_comments``); ``(tree or None, reason)`` otherwise: ``hidden``, ``too_long``, ``unparsable``, ``dml``,
        ``ddl``, ``utility``, ``nl2sql``, ``catalog`` or ``no_table``.
    """
    if query.strip() == HIDDEN_TEXT:
        return None, "hidden"
    if len(query) > MAX_QUERY_CHARS:
        return None, "too_long"
    try:
        tree = without_comments(parse_single(query))
    except (CandidateRefused, RecursionError):
        return None, "unparsable"
    if isinstance(tree, _DML) or tree.find(*_DML) is not None:
        return tree, "dml"
    if isinstance(tree, _DDL):
        return tree, "ddl"
    if not isinstance(tree, _QUERY) or tree.find(exp.Into, exp.Command) is not None:
        return tree, "utility"
    tables = list(tree.find_all(exp.Table))
    if any(t.db.lower() == "nl2sql" for t in tables) or function_names(tree) & own_functions:
        return tree, "nl2sql"
    if any(
        t.db.lower() in CATALOG_SCHEMAS or (not t.db and t.name.lower().startswith("pg_"))
        for t in tables
    ):
        return tree, "catalog"
    if not referenced_tables(tree):
        return tree, "no_table"
    return tree, None


def without_comments(tree: exp.Expression) -> exp.Expression:
    """Remove every comment from a parsed statement: pg_stat_statements replaces constants but
    keeps comments, which may quote a value another role wrote, so none may reach a model's
    prompt or the mined pair.

    Args:
        tree: a sqlglot tree; changed in place.

    Returns:
        ``tree``, no node of it holding a comment (``to_sql`` then writes none).
    """
    for node in tree.walk():
        node.comments = None
    return tree


def _parameter_name(column: list[str] | tuple | None, node: exp.Expression, taken: set[str]) -> str:
    """A template parameter's name: its column's name (``limit``/``offset`` for those counts,
    ``p`` when not an identifier), made unique with a number and added to ``taken``.
    """
    if column:
        base = column[2].lower()
    else:
        base = "offset" if isinstance(node.parent, exp.Offset) else "limit"
    if not _NAME.fullmatch(base):
        base = "p"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def as_template(tree: exp.Expression, schema: Schema) -> tuple[str, str, list]:
    """Turn a normalised statement's ``$n`` parameters into named, typed template parameters
    (``:column``, typed by ``parameters.template_slots``).

    Args:
        tree: the parsed statement; not changed.
        schema: the calling role's schema.

    Returns:
        ``(kind, sql, slots)``: ``query``, the SQL as is and no slots when it has no parameter;
        else ``template``, the SQL with ``:name`` parameters and its ``Slot`` list.

    Raises:
        CandidateRefused: a parameter is not compared with a text or numeric column (nor a
            LIMIT/OFFSET count), so no question could bind it.
    """
    tree = tree.copy()
    params = list(tree.find_all(exp.Parameter, bfs=False))
    if not params:
        return "query", to_sql(tree), []
    for p in params:
        p.replace(exp.Placeholder(this=f"_p{p.name}"))
    sites = {
        ph.name: col
        for ph, col, _ in parameter_sites(tree, schema)
        if isinstance(ph, exp.Placeholder)
    }
    taken: set[str] = set()
    names: dict[str, str] = {}
    for ph in list(tree.find_all(exp.Placeholder, bfs=False)):
        if ph.name not in names:
            names[ph.name] = _parameter_name(sites.get(ph.name), ph, taken)
        ph.replace(exp.Placeholder(this=names[ph.name]))
    slots = template_slots(tree, schema, " ".join(f":{n}" for n in names.values()))
    return "template", template_text(tree), slots


def template_text(tree: exp.Expression) -> str:
    """PostgreSQL text of a template, each placeholder written ``:name`` (as ``add_template``
    takes it; sqlglot writes ``%(name)s``).

    Args:
        tree: the template's tree; not changed.

    Returns:
        The SQL text.
    """

    def named(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Placeholder) and node.name:
            return exp.Var(this=f":{node.name}")
        return node

    return to_sql(tree.copy().transform(named))
