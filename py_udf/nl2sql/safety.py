"""Safety checks that need the database: function volatility (pg_proc), the calling role's
privileges, the statement's remaining time, and the query-log write; the cell-value policy's
rules are in ``value_policy`` (re-exported here: ``value_columns``, ``withheld_value_columns``;
``set_value_policy`` is the SQL function's entry).

The model's text is untrusted input executed inside someone's database (README "Safety").
``sqlcheck.check_candidate`` checks the statement's shape with sqlglot; this module adds
what only the catalog knows:

- every function a candidate calls must be non-volatile in ``pg_proc`` (``provolatile`` 'i' or
  's'), or be on ``VOLATILE_ALLOWLIST``; a volatile function can change state or reach outside
  the query (``pg_sleep``, ``pg_read_file``, ``nextval``, ``set_config``, ``dblink``, a user's
  function that writes) even when the statement is a plain SELECT;
- every relation must be one the calling role may SELECT (``has_table_privilege``);
- cell values of a table with row-level security are not indexed unless opted in, and any
  table or column can be opted out (``nl2sql.value_policy``; module ``value_policy``).

The database remains the backstop: candidates run read-only and time-limited (``execute.py``),
as the calling role (every user-facing function is SECURITY INVOKER).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from sqlglot import exp

from . import spi, value_policy
from .errors import CandidateRefused
from .sqlcheck import check_candidate, referenced_tables
from .types import Schema

# Volatile functions a candidate may still call: they read no data and change nothing but the
# values they return. Documented in README "Safety".
VOLATILE_ALLOWLIST = frozenset({"random", "clock_timestamp", "timeofday"})


def function_names(tree: exp.Expression) -> set[str]:
    """List the lower-cased names under which PostgreSQL may resolve each function call in ``tree``.

    An unknown function (``exp.Anonymous``) contributes its own name (schema qualification
    dropped: ``pg_catalog.pg_sleep`` -> ``pg_sleep``). A function sqlglot knows contributes every
    name sqlglot maps to that node (e.g. ``exp.Rand`` -> ``rand``, ``random``), so that a
    volatile PostgreSQL function hidden behind a portable node is still looked up.

    Args:
        tree: the candidate's sqlglot tree; not changed.

    Returns:
        set[str] of lower-cased function names (aggregates and built-ins included).
    """
    names: set[str] = set()
    for node in tree.find_all(exp.Func):
        if isinstance(node, exp.Anonymous):
            if node.name:
                names.add(node.name.lower())
            continue
        names.add(node.sql_name().lower())
        for alias in getattr(type(node), "_sql_names", None) or []:
            names.add(str(alias).lower())
    return names


def volatile_functions(plpy, names: Iterable[str]) -> set[str]:
    """Find those of ``names`` that name a volatile function in ``pg_proc``.

    A name counts when at least one function of that name, in any schema, has ``provolatile =
    'v'``: conservative, overloads and schemas are not told apart.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        names: function names (as ``function_names`` gives them).

    Returns:
        set[str]: the volatile ones among ``names``; empty when ``names`` is empty (no query then).
    """
    names = sorted(set(names))
    if not names:
        return set()
    rows = spi.query(plpy, "SELECT DISTINCT proname::text AS n FROM pg_catalog.pg_proc "
                           "WHERE proname = ANY($1::name[]) AND provolatile = 'v'",
                     [names], ["text[]"])
    return {r["n"] for r in rows}


def check_functions(tree: exp.Expression, volatile: Callable[[set[str]], set[str]]) -> None:
    """Refuse a candidate that calls a volatile function not on ``VOLATILE_ALLOWLIST``.

    Args:
        tree: the candidate's sqlglot tree.
        volatile: callable taking a set of function names and returning the volatile ones
            among them (``volatile_functions`` bound to ``plpy`` inside the server).

    Returns:
        None, when every function called is non-volatile or allowlisted.

    Raises:
        CandidateRefused: the candidate calls a volatile function; the message names them.
    """
    bad = sorted(volatile(function_names(tree) - VOLATILE_ALLOWLIST) - VOLATILE_ALLOWLIST)
    if bad:
        raise CandidateRefused(
            f"calls volatile function(s) {', '.join(f + '()' for f in bad)}: only non-volatile "
            f"functions (pg_proc.provolatile 'i' or 's') and {', '.join(sorted(VOLATILE_ALLOWLIST))} "
            f"are allowed")


def relation_targets(tree: exp.Expression, schema: Schema) -> list[tuple[str, str]]:
    """List the (schema, table) of every relation ``tree`` reads that ``schema`` knows.

    A relation is matched by its prompt name or by ``schema.table`` (lower-cased); relations
    ``schema`` does not know are left out.

    Args:
        tree: the candidate's sqlglot tree.
        schema: the schema the calling role may see (``catalog.load_schema``).

    Returns:
        list of (schema name, table name) pairs, in the order the query reads them (a relation
        read under two names may appear twice).
    """
    by_name: dict[str, tuple[str, str]] = {}
    for t in schema.tables:
        by_name[t.name.lower()] = (t.schema, t.table)
        by_name[f"{t.schema}.{t.table}".lower()] = (t.schema, t.table)
    return [by_name[n] for n in referenced_tables(tree) if n in by_name]


def unreadable_relations(plpy, targets: Iterable[tuple[str, str]]) -> list[str]:
    """List the relations among ``targets`` on which the current role may SELECT no column.

    A relation that no longer exists counts as unreadable. Column-level privileges are the
    database's to enforce when the candidate runs (``has_any_column_privilege`` here).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        targets: (schema name, table name) pairs; duplicates are checked once.

    Returns:
        list[str] of ``schema.table`` names, in the order of ``targets``; empty when all are
        readable or ``targets`` is empty.
    """
    targets = list(dict.fromkeys(targets))
    if not targets:
        return []
    rels = [plpy.quote_ident(s) + "." + plpy.quote_ident(t) for s, t in targets]
    rows = spi.query(plpy, "SELECT COALESCE(pg_catalog.has_any_column_privilege("
                           "pg_catalog.to_regclass(r), 'SELECT'), false) AS ok FROM unnest($1::text[]) "
                           "WITH ORDINALITY AS u(r, n) ORDER BY n", [rels], ["text[]"])
    return [f"{s}.{t}" for (s, t), r in zip(targets, rows) if not r["ok"]]


def check_candidate_in_db(plpy, sql: str, schema: Schema) -> exp.Expression:
    """Run the full candidate check: the statement's shape, function volatility, privileges.

    In order: ``sqlcheck.check_candidate`` (one SELECT/WITH/set operation, no data-modifying or
    DDL node, no SELECT INTO, no locking clause, no function refused by name, known relations
    only: ``schema`` is what the calling role may see); then every function non-volatile in
    ``pg_proc`` or on ``VOLATILE_ALLOWLIST`` (``check_functions``); then SELECT privilege on
    every relation for the current role (``unreadable_relations``).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        sql: the candidate's SQL text (PostgreSQL).
        schema: the schema the calling role may see (``catalog.load_schema``).

    Returns:
        The parsed tree, SHARED (``sqlcheck.parse_shared``): copy it before changing it.

    Raises:
        CandidateRefused: the candidate breaks a rule; the message says which.
    """
    from .catalog import known_relations

    tree = check_candidate(sql, known_relations(schema))
    check_functions(tree, lambda names: volatile_functions(plpy, names))
    denied = unreadable_relations(plpy, relation_targets(tree, schema))
    if denied:
        raise CandidateRefused(f"the calling role may not SELECT {', '.join(denied)}")
    return tree


def statement_remaining_s(plpy) -> float | None:
    """Compute the seconds left before the caller's ``statement_timeout`` cancels the statement.

    Elapsed time counts from ``statement_timestamp()`` to ``clock_timestamp()``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        float seconds (negative once the timeout has passed); None when ``statement_timeout`` is
        0 (no timeout set).
    """
    # current_setting shows the timeout with its unit ('2s', '500ms', '1min', '0'), which
    # interval input reads; pg_settings would materialize every setting (~2 ms)
    r = spi.query(plpy, "SELECT EXTRACT(epoch FROM pg_catalog.current_setting('statement_timeout')"
                        "::interval)::float8 AS s, EXTRACT(epoch FROM pg_catalog.clock_timestamp() "
                        "- pg_catalog.statement_timestamp())::float8 AS el")[0]
    if not r["s"]:
        return None
    return float(r["s"]) - float(r["el"])


def set_value_policy(plpy, tbl: str, send_values: bool, column_name: str | None) -> str:
    """Store a cell-value policy and re-index the table's values (``nl2sql.set_value_policy``).

    The policy is stored by ``value_policy.store_policy``; when the table is in the schema index,
    it is re-indexed now (``indexer.index_table`` with ``force=True``) so that its cell values
    follow the new policy.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        tbl: the table, as ``regclass`` text (e.g. ``public.heroes``).
        send_values: true opts the table's (or column's) values in, false keeps them out.
        column_name: one column of ``tbl``, or None for the whole table.

    Returns:
        JSON text of ``{"table": "schema.table", "column", "send_values", "reindexed"}``.

    Raises:
        plpy.Error: (through ``plpy.error``, the SQL error the caller sees) on a null
            ``send_values`` or a column the table does not have.
        plpy.SPIError: ``tbl`` names no relation.
    """
    from .indexer import index_table

    p = value_policy.store_policy(plpy, tbl, send_values, column_name)
    if p["indexed"]:
        index_table(plpy, p["schema"], p["table"], force=True)
    return json.dumps({"table": f"{p['schema']}.{p['table']}", "column": p["column"],
                       "send_values": p["send_values"], "reindexed": p["indexed"]})


def record_example_relations(plpy, example_id: int, tree: exp.Expression, schema: Schema) -> int:
    """Store which relations an example reads, in ``nl2sql.example_relation``.

    View ``nl2sql.visible_example`` then shows the example only to roles that may read all of
    them. The example's earlier rows are deleted first.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        example_id: int, the example's id (``nl2sql.example``).
        tree: the example's parsed SQL (sqlglot tree).
        schema: the schema the relations are resolved against (``catalog.load_schema``).

    Returns:
        int: how many distinct relations were recorded (those ``schema`` knows).
    """
    targets = sorted(set(relation_targets(tree, schema)))
    spi.query(plpy, "DELETE FROM nl2sql.example_relation WHERE example_id = $1", [example_id],
              ["int8"])
    ins = spi.plan(plpy, "INSERT INTO nl2sql.example_relation (example_id, schema_name, "
                         "table_name) VALUES ($1, $2, $3)", ["int8", "name", "name"])
    for s, t in targets:
        spi.execute(plpy, ins, [example_id, s, t])
    return len(targets)


def log_query(plpy, trace: dict) -> int | None:
    """Write the call's ``nl2sql.query_log`` row through ``nl2sql._log_query``.

    ``nl2sql._log_query`` is SECURITY DEFINER: ordinary roles cannot write the log table
    directly. On a server in recovery (a read replica) nothing is written.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        trace: the call's trace; its ``question``, ``sql``, ``confidence`` and ``error`` keys
            fill those columns and the whole trace is stored as JSON.

    Returns:
        The new row's id (int); None on a server in recovery.
    """
    if spi.query(plpy, "SELECT pg_catalog.pg_is_in_recovery() AS r")[0]["r"]:
        return None
    res = spi.query(plpy, "SELECT nl2sql._log_query(current_user, $1, $2, $3, $4, $5::jsonb) AS id",
                    [trace.get("question") or "", trace.get("sql"), trace.get("confidence"),
                     trace.get("error"), json.dumps(trace, default=str)],
                    ["text", "text", "float8", "text", "text"])
    return res[0]["id"]
