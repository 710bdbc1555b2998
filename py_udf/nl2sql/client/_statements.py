"""The statements of the extension's SQL sources that a database without PL/Python can run,
read with PostgreSQL's own parser (pglast: libpg_query), never with patterns."""

from __future__ import annotations

from dataclasses import dataclass, field

import pglast
from pglast import ast
from pglast.stream import RawStream

__all__ = ["STUB_HINTS", "Kept", "kept_statements"]

EXTENSION_ONLY_CALLS = frozenset({"pg_extension_config_dump"})
"""Functions that only a script run by CREATE EXTENSION may call."""

STUB_BODY = """
BEGIN
    RAISE EXCEPTION 'nl2sql: %() runs in PL/Python, which this database does not have (nl2sql is installed beside it)', {name}
        USING ERRCODE = 'feature_not_supported',
              HINT = {hint};
END
"""

DEFAULT_HINT = (
    "use the nl2sql command or its Python API (nl2sql ask, nl2sql reindex --dsn ...); SQL "
    'clients: nl2sql.submit() and nl2sql.answer() (docs/install.md, "PostgreSQL without '
    'PL/Python")'
)
_QUESTION_HINT = (
    "run {cmd} --dsn ... or Client.{method}() of the Python API (docs/client.md); SQL "
    "clients: nl2sql.submit() and nl2sql.answer()"
)
_ADMIN_HINT = "run {cmd} --dsn ... or Client.{method}() of the Python API (docs/client.md)"
_API_HINT = "call Client.{method}() of the Python API (nl2sql.connect(dsn), docs/client.md)"

# what a stub's HINT names: the command and the Client method that do its work beside the
# database; a function not here gets DEFAULT_HINT
STUB_HINTS = {
    "nl2sql._nl2sql": _QUESTION_HINT.format(cmd="nl2sql ask", method="sql"),
    "nl2sql._ask": _QUESTION_HINT.format(cmd="nl2sql ask", method="ask"),
    "nl2sql._explain": _QUESTION_HINT.format(cmd="nl2sql explain", method="explain"),
    "nl2sql._narrate": _QUESTION_HINT.format(cmd="nl2sql narrate", method="narrate"),
    "nl2sql._chart": _QUESTION_HINT.format(cmd="nl2sql ask --chart out.png", method="chart"),
    "nl2sql._explain_sql": _ADMIN_HINT.format(cmd="nl2sql explain-sql", method="explain_sql"),
    "nl2sql._retrieve": _API_HINT.format(method="retrieve"),
    "nl2sql._doctor": _ADMIN_HINT.format(cmd="nl2sql doctor", method="doctor"),
    "nl2sql._evaluate": _ADMIN_HINT.format(cmd="nl2sql evaluate", method="evaluate"),
    "nl2sql.reindex": _ADMIN_HINT.format(cmd="nl2sql reindex", method="reindex"),
    "nl2sql.export_semantic_model": _ADMIN_HINT.format(
        cmd="nl2sql export-semantic-model", method="export_semantic_model"
    ),
    "nl2sql.mine_queries": _API_HINT.format(method="mine_queries"),
    "nl2sql.calibrate": _API_HINT.format(method="calibrate"),
}


@dataclass
class Kept:
    """What ``kept_statements`` kept of one source file.

    Attributes:
        statements: the SQL text of each statement to run, in order.
        skipped: a few words per statement left out, for the install's output.
        stubbed: the qualified names of PL/Python functions turned into stubs.
        outside: (schema, name) of each function created outside schema nl2sql (``nl2sql()``
            is ``public.nl2sql``): the install needs CREATE there and uninstall drops them.
    """

    statements: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    stubbed: list[str] = field(default_factory=list)
    outside: set[tuple[str, str]] = field(default_factory=set)


def _option(stmt: ast.CreateFunctionStmt, name: str) -> ast.DefElem | None:
    """The ``name`` option (language, as, …) of a CREATE FUNCTION statement."""
    return next((o for o in stmt.options or () if o.defname == name), None)


def _qualified(names) -> str:
    """``schema.name`` from a parser name list."""
    return ".".join(n.sval for n in names)


def _calls(node) -> set[str]:
    """The unqualified names of every function called anywhere in ``node``."""
    found: set[str] = set()

    def walk(n) -> None:
        if isinstance(n, ast.FuncCall):
            found.add(n.funcname[-1].sval)
        if isinstance(n, ast.Node):
            for attr in n:
                walk(getattr(n, attr))
        elif isinstance(n, tuple | list):
            for x in n:
                walk(x)

    walk(node)
    return found


def _literal(text: str) -> str:
    """``text`` as an SQL string literal (the names and hints are ours, not input)."""
    return "'" + text.replace("'", "''") + "'"


def _stub(stmt: ast.CreateFunctionStmt) -> str:
    """The statement, as a PL/pgSQL function of the same signature and privileges that says
    where the PL/Python function runs instead (it is replaced by sql/beside/ where that has a
    PL/pgSQL version)."""
    name = _qualified(stmt.funcname)
    quoted = _literal(name)
    hint = _literal(STUB_HINTS.get(name, DEFAULT_HINT))
    for o in stmt.options:
        if o.defname == "language":
            o.arg = ast.String(sval="plpgsql")
        elif o.defname == "as":
            o.arg = (ast.String(sval=STUB_BODY.format(name=quoted, hint=hint)),)
    return RawStream()(stmt)


def _why_skipped(stmt) -> str | None:
    """Why a statement is left out of the install without PL/Python, or None to keep it."""
    if isinstance(stmt, ast.CreateExtensionStmt | ast.AlterExtensionStmt):
        return f"extension statement ({stmt.extname})"
    if isinstance(stmt, ast.AlterExtensionContentsStmt):
        return f"ALTER EXTENSION {stmt.extname}"
    if isinstance(stmt, ast.SelectStmt) and _calls(stmt) & EXTENSION_ONLY_CALLS:
        return "pg_extension_config_dump (pg_dump dumps the tables of a plain schema whole)"
    return None


def kept_statements(text: str) -> Kept:
    """Split one SQL source into statements and keep those a database without PL/Python runs:
    extension statements and ``pg_extension_config_dump`` calls left out, ``LANGUAGE
    plpython3u`` functions turned into stubs, ``@extschema@`` read as ``nl2sql``.

    Args:
        text: the file's SQL text.

    Returns:
        The statements to run and what was left out or stubbed.

    Raises:
        pglast.parser.ParseError: the text is not valid SQL.
    """
    text = text.replace("@extschema@", "nl2sql")
    out = Kept()
    for rs in pglast.parse_sql(text):
        stmt = rs.stmt
        why = _why_skipped(stmt)
        if why:
            out.skipped.append(why)
            continue
        if isinstance(stmt, ast.CreateFunctionStmt):
            names = [n.sval for n in stmt.funcname]
            if len(names) == 2 and names[0] != "nl2sql":
                out.outside.add((names[0], names[1]))
            lang = _option(stmt, "language")
            if lang is not None and lang.arg.sval == "plpython3u":
                out.stubbed.append(_qualified(stmt.funcname))
                out.statements.append(_stub(stmt))
                continue
        # pglast gives the locations in characters of ``text`` (libpg_query's are in bytes)
        end = rs.stmt_location + rs.stmt_len if rs.stmt_len else len(text)
        out.statements.append(text[rs.stmt_location : end].strip())
    return out
