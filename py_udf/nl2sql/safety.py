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
    """Lower-cased names under which PostgreSQL may resolve each function call in ``tree``.

    An unknown function (``exp.Anonymous``) contributes its own name (schema qualification
    dropped: ``pg_catalog.pg_sleep`` → ``pg_sleep``). A function sqlglot knows contributes every
    name sqlglot maps to that node (e.g. ``exp.Rand`` → ``rand``, ``random``), so that a
    volatile PostgreSQL function hidden behind a portable node is still looked up.
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
    """Those of ``names`` for which ``pg_proc`` holds at least one volatile function of that
    name (in any schema: conservative, overloads and schemas are not told apart)."""
    names = sorted(set(names))
    if not names:
        return set()
    rows = spi.query(plpy, "SELECT DISTINCT proname::text AS n FROM pg_catalog.pg_proc "
                           "WHERE proname = ANY($1::name[]) AND provolatile = 'v'",
                     [names], ["text[]"])
    return {r["n"] for r in rows}


def check_functions(tree: exp.Expression, volatile: Callable[[set[str]], set[str]]) -> None:
    """Refuse a candidate that calls a volatile function not on ``VOLATILE_ALLOWLIST``.

    ``volatile(names)`` returns the volatile ones among ``names`` (``volatile_functions`` bound
    to ``plpy`` inside the server). Raises CandidateRefused naming the functions."""
    bad = sorted(volatile(function_names(tree) - VOLATILE_ALLOWLIST) - VOLATILE_ALLOWLIST)
    if bad:
        raise CandidateRefused(
            f"calls volatile function(s) {', '.join(f + '()' for f in bad)}: only non-volatile "
            f"functions (pg_proc.provolatile 'i' or 's') and {', '.join(sorted(VOLATILE_ALLOWLIST))} "
            f"are allowed")


def relation_targets(tree: exp.Expression, schema: Schema) -> list[tuple[str, str]]:
    """(schema, table) of every relation ``tree`` reads that ``schema`` (the caller's visible
    schema) knows, by prompt name or ``schema.table``."""
    by_name: dict[str, tuple[str, str]] = {}
    for t in schema.tables:
        by_name[t.name.lower()] = (t.schema, t.table)
        by_name[f"{t.schema}.{t.table}".lower()] = (t.schema, t.table)
    return [by_name[n] for n in referenced_tables(tree) if n in by_name]


def unreadable_relations(plpy, targets: Iterable[tuple[str, str]]) -> list[str]:
    """``schema.table`` names among ``targets`` on which the current role may SELECT no column
    (or that no longer exist). Column-level privileges are the database's to enforce when the
    candidate runs."""
    targets = list(dict.fromkeys(targets))
    if not targets:
        return []
    rels = [plpy.quote_ident(s) + "." + plpy.quote_ident(t) for s, t in targets]
    rows = spi.query(plpy, "SELECT COALESCE(pg_catalog.has_any_column_privilege("
                           "pg_catalog.to_regclass(r), 'SELECT'), false) AS ok FROM unnest($1::text[]) "
                           "WITH ORDINALITY AS u(r, n) ORDER BY n", [rels], ["text[]"])
    return [f"{s}.{t}" for (s, t), r in zip(targets, rows) if not r["ok"]]


def check_candidate_in_db(plpy, sql: str, schema: Schema) -> exp.Expression:
    """The full candidate check (issue 4, item 1): ``sqlcheck.check_candidate`` (one
    SELECT/WITH/set operation, no data-modifying node, no SELECT INTO, no locking clause, known
    relations only — ``schema`` is what the calling role may see), then every function
    non-volatile in pg_proc or allowlisted, then SELECT privilege on every relation for the
    current role. Returns the parsed tree; raises CandidateRefused with the reason."""
    from .catalog import known_relations

    tree = check_candidate(sql, known_relations(schema))
    check_functions(tree, lambda names: volatile_functions(plpy, names))
    denied = unreadable_relations(plpy, relation_targets(tree, schema))
    if denied:
        raise CandidateRefused(f"the calling role may not SELECT {', '.join(denied)}")
    return tree


def statement_remaining_s(plpy) -> float | None:
    """Seconds left before the caller's ``statement_timeout`` cancels the current statement;
    None when no statement_timeout is set. Elapsed time counts from ``statement_timestamp()``."""
    # current_setting shows the timeout with its unit ('2s', '500ms', '1min', '0'), which
    # interval input reads; pg_settings would materialize every setting (~2 ms)
    r = spi.query(plpy, "SELECT EXTRACT(epoch FROM pg_catalog.current_setting('statement_timeout')"
                        "::interval)::float8 AS s, EXTRACT(epoch FROM pg_catalog.clock_timestamp() "
                        "- pg_catalog.statement_timestamp())::float8 AS el")[0]
    if not r["s"]:
        return None
    return float(r["s"]) - float(r["el"])


def set_value_policy(plpy, tbl: str, send_values: bool, column_name: str | None) -> str:
    """``nl2sql.set_value_policy(tbl, send_values, column_name)``: store the policy
    (``value_policy.store_policy``) and re-index the table's values now (when it is indexed).

    Args:
        plpy: PL/Python's module.
        tbl: the table, as ``regclass`` text.
        send_values: true opts the table's (or column's) values in, false keeps them out.
        column_name: one column, or None for the whole table.

    Returns:
        ``{"table", "column", "send_values", "reindexed"}`` as JSON.

    Raises:
        plpy.Error (through ``plpy.error``): on an unknown column or a null flag.
    """
    from .indexer import index_table

    p = value_policy.store_policy(plpy, tbl, send_values, column_name)
    if p["indexed"]:
        index_table(plpy, p["schema"], p["table"], force=True)
    return json.dumps({"table": f"{p['schema']}.{p['table']}", "column": p["column"],
                       "send_values": p["send_values"], "reindexed": p["indexed"]})


def record_example_relations(plpy, example_id: int, tree: exp.Expression, schema: Schema) -> int:
    """Store which relations an example of this database reads (``nl2sql.example_relation``),
    so that view ``nl2sql.visible_example`` shows it only to roles that may read them all.
    Returns how many relations were recorded."""
    targets = sorted(set(relation_targets(tree, schema)))
    spi.query(plpy, "DELETE FROM nl2sql.example_relation WHERE example_id = $1", [example_id],
              ["int8"])
    ins = spi.plan(plpy, "INSERT INTO nl2sql.example_relation (example_id, schema_name, "
                         "table_name) VALUES ($1, $2, $3)", ["int8", "name", "name"])
    for s, t in targets:
        spi.execute(plpy, ins, [example_id, s, t])
    return len(targets)


def log_query(plpy, trace: dict) -> int | None:
    """Write the call's ``nl2sql.query_log`` row through ``nl2sql._log_query`` (SECURITY DEFINER:
    ordinary roles cannot write the log table directly); returns its id, or None on a server in
    recovery (read replica), where nothing is written."""
    if spi.query(plpy, "SELECT pg_catalog.pg_is_in_recovery() AS r")[0]["r"]:
        return None
    res = spi.query(plpy, "SELECT nl2sql._log_query(current_user, $1, $2, $3, $4, $5::jsonb) AS id",
                    [trace.get("question") or "", trace.get("sql"), trace.get("confidence"),
                     trace.get("error"), json.dumps(trace, default=str)],
                    ["text", "text", "float8", "text", "text"])
    return res[0]["id"]
