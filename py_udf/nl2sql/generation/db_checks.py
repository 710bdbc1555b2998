"""The candidate's checks that need the database (docs/safety.md): refused and volatile
functions, SELECT privilege, the statement's time left."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlglot import exp

from ..core import spi
from ..core.catalog import known_relations
from ..core.errors import CandidateRefused
from ..core.sqlcheck import check_candidate, referenced_tables
from ..core.types import Schema

# Volatile functions a candidate may still call: they read no data and change nothing but the
# values they return. Documented in docs/safety.md.
VOLATILE_ALLOWLIST = frozenset({"random", "clock_timestamp", "timeofday"})


def function_names(tree: exp.Expression) -> set[str]:
    """List the lower-cased names under which PostgreSQL may resolve each function call in ``tree``.

    Args:
        tree: the parsed candidate.

    Returns:
        The lower-cased names.
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
    name (in any schema: conservative, overloads and schemas are not told apart).

    Args:
        names: lower-case function names.

    Returns:
        The volatile ones.
    """
    names = sorted(set(names))
    if not names:
        return set()
    rows = spi.query(
        plpy,
        "SELECT DISTINCT proname::text AS n FROM pg_catalog.pg_proc "
        "WHERE proname = ANY($1::name[]) AND provolatile = 'v'",
        [names],
        ["text[]"],
    )
    return {r["n"] for r in rows}


# sqlglot nodes that stand for a PostgreSQL operator, with that operator's name: a user-defined
# operator of the same name (another argument type) calls its own function (pg_operator.oprcode).
OPERATOR_NODES: dict[type, str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.Pow: "^",
    exp.DPipe: "||",
    exp.BitwiseAnd: "&",
    exp.BitwiseOr: "|",
    exp.BitwiseXor: "#",
    exp.BitwiseLeftShift: "<<",
    exp.BitwiseRightShift: ">>",
    exp.Like: "~~",
    exp.ILike: "~~*",
    exp.RegexpLike: "~",
    exp.RegexpILike: "~*",
    exp.MatchAgainst: "@@",
    exp.Distance: "<->",
    exp.ArrayContainsAll: "@>",
    exp.ArrayContainedBy: "<@",
    exp.ArrayOverlaps: "&&",
    exp.JSONBContains: "?",
    exp.Neg: "-",
    exp.BitwiseNot: "~",
}


def operator_names(tree: exp.Expression) -> set[str]:
    """The names of the operators a parsed candidate uses: ``OPERATOR(schema.op)`` spelled
    out (``exp.Operator``) and the operator nodes of ``OPERATOR_NODES`` (``a @@ b``).

    Args:
        tree: the parsed candidate.

    Returns:
        Operator names without schema, e.g. ``{"=", "@@", "###"}``.
    """
    names: set[str] = set()
    for node in tree.walk():
        if isinstance(node, exp.Operator):
            names.add(str(node.args.get("operator") or "").rsplit(".", 1)[-1].strip())
        elif type(node) in OPERATOR_NODES:
            names.add(OPERATOR_NODES[type(node)])
    names.discard("")
    return names


def column_notation_names(tree: exp.Expression) -> set[str]:
    """The names of the qualified columns of a parsed candidate (``t.x``): in PostgreSQL
    ``t.fn`` also calls a function ``fn`` that takes ``t``'s row type (column notation).

    Args:
        tree: the parsed candidate.

    Returns:
        Lower-case column names that carry a table qualifier.
    """
    return {c.name.lower() for c in tree.find_all(exp.Column) if c.table and c.name}


def volatile_operators(plpy, names: Iterable[str]) -> dict[str, str]:
    """Those of ``names`` for which ``pg_operator`` holds an operator of that name (any schema,
    any argument types: conservative) whose function (``oprcode``) is volatile.

    Args:
        names: operator names.

    Returns:
        ``{operator: function name}`` for the volatile ones.
    """
    names = sorted(set(names))
    if not names:
        return {}
    rows = spi.query(
        plpy,
        # each operator's function by pg_proc's oid index (a join scanned all of pg_proc:
        # 1.0 ms against 0.3 ms, docs/benchmarks.md "A question's own cost")
        "SELECT op, min(fn) AS fn FROM (SELECT o.oprname::text AS op, "
        "(SELECT p.proname::text FROM pg_catalog.pg_proc p WHERE p.oid = o.oprcode "
        "AND p.provolatile = 'v') AS fn FROM pg_catalog.pg_operator o "
        "WHERE o.oprname = ANY($1::name[])) x WHERE fn IS NOT NULL GROUP BY 1",
        [names],
        ["text[]"],
    )
    return {r["op"]: r["fn"] for r in rows}


def volatile_row_functions(plpy, names: Iterable[str]) -> set[str]:
    """Those of ``names`` for which ``pg_proc`` holds a volatile function of one argument of a
    composite (row) type: what ``t.name`` calls in column notation.

    Args:
        names: lower-case column names (``column_notation_names``).

    Returns:
        The names of such functions.
    """
    names = sorted(set(names))
    if not names:
        return set()
    rows = spi.query(
        plpy,
        "SELECT DISTINCT p.proname::text AS n FROM pg_catalog.pg_proc p "
        "JOIN pg_catalog.pg_type t ON t.oid = p.proargtypes[0] "
        "WHERE p.proname = ANY($1::name[]) AND p.pronargs = 1 "
        "AND t.typtype = 'c' AND p.provolatile = 'v'",
        [names],
        ["text[]"],
    )
    return {r["n"] for r in rows}


def check_operators(
    tree: exp.Expression,
    volatile_ops: Callable[[set[str]], dict[str, str]],
    volatile_row_fns: Callable[[set[str]], set[str]],
) -> None:
    """Refuse a candidate that calls a volatile function through an operator (``a @@ b``,
    ``OPERATOR(s.###)``) or in column notation (``t.fn``): the calls ``check_functions``
    does not see.

    Args:
        tree: the parsed candidate.
        volatile_ops: ``volatile_ops(names)`` → ``{operator: function}`` for the operators
            whose function is volatile (``volatile_operators`` bound to ``plpy``).
        volatile_row_fns: ``volatile_row_fns(names)`` → the volatile functions of a row
            argument among ``names`` (``volatile_row_functions`` bound to ``plpy``).

    Raises:
        CandidateRefused: naming the operators and functions.
    """
    bad = [
        f"operator {op} ({fn}())" for op, fn in sorted(volatile_ops(operator_names(tree)).items())
    ]
    bad += [
        f"{fn}() in column notation"
        for fn in sorted(volatile_row_fns(column_notation_names(tree)) - VOLATILE_ALLOWLIST)
    ]
    if bad:
        raise CandidateRefused(
            f"calls volatile function(s) through {', '.join(bad)}: only non-volatile functions "
            f"(pg_proc.provolatile 'i' or 's') are allowed"
        )


# Argument types that name a relation, function, operator or cursor: a function taking one
# reaches that object by name, past the relation check (``table_to_xml('pg_authid', ...)``,
# ``pg_relation_filepath``, ``cursor_to_xml``). A name with any overload taking one is refused.
RELATION_ARG_TYPES = frozenset(
    {"regclass", "regproc", "regprocedure", "regoper", "regoperator", "refcursor"}
)
# Object identifiers: a function every overload of which takes one is about catalog objects, not
# values (``obj_description(oid)``, ``format_type``); ``max(oid)`` beside ``max(int)`` is not.
OBJECT_ID_TYPES = RELATION_ARG_TYPES | frozenset(
    {"oid", "regnamespace", "regrole", "regtype", "regcollation", "regconfig", "regdictionary"}
)
# Name families refused in every schema (docs/safety.md), as (prefix, why).
DENIED_PREFIXES = (
    (
        "pg_",
        "a pg_* function reports on the server, other sessions, files, relations or the "
        "catalog (pg_stat_*, pg_ls_*, pg_read_*, pg_file_*, pg_*_size, pg_get_*, ...)",
    ),
    ("lo_", "large-object functions reach objects by identifier"),
    ("dblink", "dblink reaches other databases"),
)
DENIED_INFIXES = (
    (
        "_to_xml",
        "the *_to_xml family reads tables, queries, cursors, schemas or the database by name",
    ),
)
# pg_* functions over values only (not about the server): allowed despite the prefix.
PG_VALUE_FUNCTIONS = frozenset({"pg_typeof", "pg_size_pretty", "pg_size_bytes", "pg_column_size"})


def denied_by_name(name: str) -> str | None:
    """Why a function name is in a refused family, or None.

    Args:
        name: the lower-case function name, schema qualification dropped.

    Returns:
        The family's reason, or None when the name is in no refused family.
    """
    if name in PG_VALUE_FUNCTIONS:
        return None
    for prefix, why in DENIED_PREFIXES:
        if name.startswith(prefix):
            return why
    for part, why in DENIED_INFIXES:
        if part in name:
            return why
    return None


def denied_by_signature(overloads: Iterable[Iterable[str]]) -> str | None:
    """Why a function's argument types make it refused, or None.

    Args:
        overloads: the input argument types of every ``pg_proc`` row of that name (any schema),
            each as ``format_type`` names (``regclass``, ``integer``, ...).

    Returns:
        The reason when any overload takes a ``RELATION_ARG_TYPES`` argument, or every
        overload takes an ``OBJECT_ID_TYPES`` argument; else None.
    """
    sigs = [set(a) for a in overloads]
    for a in sigs:
        hit = sorted(a & RELATION_ARG_TYPES)
        if hit:
            return (
                f"it takes a {hit[0]} argument, which reaches a relation, function or cursor "
                f"by name past the relation check"
            )
    if sigs and all(a & OBJECT_ID_TYPES for a in sigs):
        return "it takes object identifiers (oid, reg*): it is about catalog objects, not values"
    return None


def denied_functions(plpy, names: Iterable[str]) -> dict[str, str]:
    """The refused ones among ``names``, read from ``pg_proc``, with why.

    Args:
        names: lower-case function names (``function_names``).

    Returns:
        ``{name: reason}`` for each name in a refused family (``denied_by_name``) or whose
        ``pg_proc`` overloads (every schema) are refused by ``denied_by_signature``.
    """
    names = sorted(set(names))
    out = {n: why for n in names if (why := denied_by_name(n))}
    rest = [n for n in names if n not in out]
    if not rest:
        return out
    rows = spi.query(
        plpy,
        "SELECT p.proname::text AS n, ARRAY(SELECT pg_catalog.format_type(t, "
        "NULL) FROM pg_catalog.unnest(p.proargtypes::pg_catalog.oid[]) AS t) AS a "
        "FROM pg_catalog.pg_proc p WHERE p.proname = ANY($1::name[])",
        [rest],
        ["text[]"],
    )
    sigs: dict[str, list[list[str]]] = {}
    for r in rows:
        sigs.setdefault(r["n"], []).append(list(r["a"] or []))
    for n, overloads in sigs.items():
        why = denied_by_signature(overloads)
        if why:
            out[n] = why
    return out


def check_functions(
    tree: exp.Expression,
    volatile: Callable[[set[str]], set[str]],
    denied: Callable[[set[str]], dict[str, str]] | None = None,
) -> None:
    """Refuse a candidate that calls a function of a refused family or a volatile function.

    Args:
        tree: the parsed candidate.
        volatile: ``volatile(names)`` returns the volatile ones among ``names``
            (``volatile_functions`` bound to ``plpy`` inside the server).
        denied: ``denied(names)`` returns ``{name: reason}`` for the refused ones
            (``denied_functions`` bound to ``plpy``); None applies the name families only.

    Raises:
        CandidateRefused: naming the functions and why.
    """
    names = function_names(tree)
    bad = {n: why for n in names if (why := denied_by_name(n))}
    if denied is not None:
        bad.update(denied(names - set(bad)))
    if bad:
        by_why: dict[str, list[str]] = {}
        for n in sorted(bad):
            by_why.setdefault(bad[n], []).append(f"{n}()")
        raise CandidateRefused(
            "calls "
            + "; ".join(f"{', '.join(fs)}: {why}" for why, fs in by_why.items())
            + "; only functions over values (string, math, date/time, aggregates, window, json, "
            "array, regex) are allowed"
        )
    bad_v = sorted(volatile(names - VOLATILE_ALLOWLIST) - VOLATILE_ALLOWLIST)
    if bad_v:
        raise CandidateRefused(
            f"calls volatile function(s) {', '.join(f + '()' for f in bad_v)}: only non-volatile "
            f"functions (pg_proc.provolatile 'i' or 's') and {', '.join(sorted(VOLATILE_ALLOWLIST))} "
            f"are allowed"
        )


def relation_targets(tree: exp.Expression, schema: Schema) -> list[tuple[str, str]]:
    """(schema, table) of every relation ``tree`` reads that ``schema`` (the caller's visible
    schema) knows, by prompt name or ``schema.table``.

    Args:
        tree: the parsed candidate.
        schema: the calling role's visible schema.

    Returns:
        The (schema, table) pairs, in the order read.
    """
    by_name: dict[str, tuple[str, str]] = {}
    for t in schema.tables:
        by_name[t.name.lower()] = (t.schema, t.table)
        by_name[f"{t.schema}.{t.table}".lower()] = (t.schema, t.table)
    return [by_name[n] for n in referenced_tables(tree) if n in by_name]


def unreadable_relations(plpy, targets: Iterable[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """``schema.table`` names among ``targets`` on which the current role may SELECT no column,
    and those that no longer exist (dropped or renamed since the schema was read).

    Args:
        targets: (schema, table) pairs.

    Returns:
        ``(denied, gone)``: the relations the role may not read, and the missing ones.
    """
    targets = list(dict.fromkeys(targets))
    if not targets:
        return [], []
    rels = [plpy.quote_ident(s) + "." + plpy.quote_ident(t) for s, t in targets]
    rows = spi.query(
        plpy,
        "SELECT pg_catalog.to_regclass(r) IS NOT NULL AS present, "
        "COALESCE(pg_catalog.has_any_column_privilege("
        "pg_catalog.to_regclass(r), 'SELECT'), false) AS ok FROM unnest($1::text[]) "
        "WITH ORDINALITY AS u(r, n) ORDER BY n",
        [rels],
        ["text[]"],
    )
    named = [(f"{s}.{t}", r) for (s, t), r in zip(targets, rows)]
    denied = [n for n, r in named if r["present"] and not r["ok"]]
    return denied, [n for n, r in named if not r["present"]]


def gone_refusal(gone: list[str]) -> str:
    """The refusal of a candidate that reads relations which no longer exist.

    Args:
        gone: the missing relations, as ``schema.table``.

    Returns:
        The reason: they went away since the schema was read, and what to do.
    """
    return (
        f"{', '.join(gone)} no longer exists: dropped or renamed by another session since "
        "this call read the schema; ask again (SELECT nl2sql.reindex() refreshes the index "
        "if the old name still appears)"
    )


class CheckMemo:
    """One question's catalog answers for its candidates' checks, by name: a function, operator
    or column-notation name is looked up once per question, not once per candidate (a candidate
    runs read-only and rolled back: it cannot change them; docs/benchmarks.md, "A question's own
    cost")."""

    def __init__(self, plpy):
        self.plpy = plpy
        self._known: dict[tuple[str, str], object] = {}

    def ask(self, kind: str, lookup: Callable, names: Iterable[str]) -> dict[str, object]:
        """``lookup(plpy, names)`` for the names not asked before; the found ones of ``names``.

        Args:
            kind: what is asked (keeps the answers of each lookup apart).
            lookup: ``volatile_functions``, ``denied_functions``, ``volatile_operators`` or
                ``volatile_row_functions`` (a set or a ``{name: why}`` of the found ones).
            names: the names.

        Returns:
            ``{name: why}`` (``why`` the name itself for a set's lookup) of the found ones.
        """
        names = set(names)
        new = sorted(n for n in names if (kind, n) not in self._known)
        if new:
            got = lookup(self.plpy, new)
            got = got if isinstance(got, dict) else {n: n for n in got}
            self._known.update({(kind, n): got.get(n) for n in new})
        return {n: why for n in names if (why := self._known[(kind, n)]) is not None}


def check_candidate_in_db(
    plpy, sql: str, schema: Schema, memo: CheckMemo | None = None
) -> exp.Expression:
    """The full candidate check: ``sqlcheck.check_candidate``, ``check_functions``,
    ``check_operators``, then SELECT privilege on every relation.

    Args:
        sql: the candidate's text.
        schema: the calling role's visible schema.
        memo: the question's ``CheckMemo`` (None: every name is looked up).

    Returns:
        The parsed tree.

    Raises:
        CandidateRefused: with the reason.
    """
    tree = check_candidate(sql, known_relations(schema))
    memo = memo or CheckMemo(plpy)
    check_functions(
        tree,
        lambda names: set(memo.ask("volatile", volatile_functions, names)),
        lambda names: memo.ask("denied", denied_functions, names),
    )
    check_operators(
        tree,
        lambda names: memo.ask("operator", volatile_operators, names),
        lambda names: set(memo.ask("row", volatile_row_functions, names)),
    )
    denied, gone = unreadable_relations(plpy, relation_targets(tree, schema))
    if gone:
        raise CandidateRefused(gone_refusal(gone))
    if denied:
        raise CandidateRefused(f"the calling role may not SELECT {', '.join(denied)}")
    return tree


def statement_remaining_s(plpy) -> float | None:
    """Seconds left before the caller's ``statement_timeout`` cancels the current statement;
    None when no statement_timeout is set. Elapsed time counts from ``statement_timestamp()``.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        Seconds left (negative when already past), or None.
    """
    own = getattr(plpy, "statement_remaining_s", None)
    if own is not None:  # beside the database: the call's clock (client/_plpy.py)
        return own()
    # current_setting shows the timeout with its unit ('2s', '500ms', '1min', '0'), which
    # interval input reads; pg_settings would materialize every setting (~2 ms)
    r = spi.query(
        plpy,
        "SELECT EXTRACT(epoch FROM pg_catalog.current_setting('statement_timeout')"
        "::interval)::float8 AS s, EXTRACT(epoch FROM pg_catalog.clock_timestamp() "
        "- pg_catalog.statement_timestamp())::float8 AS el",
    )[0]
    if not r["s"]:
        return None
    return float(r["s"]) - float(r["el"])
