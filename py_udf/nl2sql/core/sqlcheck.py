"""Candidate SQL: parsing (sqlglot), the read-only shape check (the first line of defence only;
``generation.execute`` runs candidates read-only), table extraction, transpiling, constants of
every form (docs/internals/core.md "Candidate SQL")."""

from __future__ import annotations

import re
from functools import lru_cache

import sqlglot
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, SqlglotError, TokenError
from sqlglot.tokens import TokenType

from .errors import CandidateRefused
from .names import resolve

DIALECT = "postgres"

# Statement kinds whose presence anywhere in the tree refuses the candidate.
_FORBIDDEN_NODES: tuple[type[exp.Expression], ...] = tuple(
    t
    for t in (
        exp.Insert,
        exp.Update,
        exp.Delete,
        exp.Merge,
        exp.Create,
        exp.Drop,
        exp.Alter,
        exp.Command,
        exp.Set,
        exp.Into,
        exp.Lock,
        exp.Copy,
        exp.TruncateTable,
        getattr(exp, "Grant", None),
        getattr(exp, "Revoke", None),
    )
    if t is not None
)

# Functions refused by name even though a SELECT may call them (``db_checks`` adds the check of
# pg_proc volatility; the database's read-only mode is the backstop).
_FORBIDDEN_FUNCTIONS = {
    "pg_sleep",
    "pg_sleep_for",
    "pg_sleep_until",
    "pg_read_file",
    "pg_read_binary_file",
    "pg_ls_dir",
    "pg_stat_file",
    "pg_terminate_backend",
    "pg_cancel_backend",
    "nextval",
    "setval",
    "set_config",
    "lo_import",
    "lo_export",
    "dblink",
    "dblink_exec",
    "pg_reload_conf",
    "pg_rotate_logfile",
    "pg_advisory_lock",
    "pg_advisory_xact_lock",
    "txid_current",
    "pg_switch_wal",
    "query_to_xml",
    "pg_logical_emit_message",
}


STRING_FORMS: tuple[type[exp.Expression], ...] = (
    exp.ByteString,  # E'…' (escapes decoded)
    exp.UnicodeString,  # U&'…' [UESCAPE '…'] (escapes kept)
    exp.RawString,  # $$…$$, $tag$…$tag$
    exp.BitString,  # B'…', 0b…
    exp.HexString,  # X'…', 0x…
    exp.National,  # N'…'
)
"""The nodes sqlglot's postgres dialect makes of PostgreSQL's string constants other than
``'…'`` (``exp.Literal``, as are numbers): every one is a value (docs/safety.md)."""


def literal_value(node: exp.Expression) -> str:
    """The text a constant stands for: a ``U&'…'`` string's escapes decoded (``\\0041``,
    ``\\+000041``, its ``UESCAPE`` character), any other as sqlglot read it.

    Args:
        node: an ``exp.Literal`` or a node of ``STRING_FORMS``.

    Returns:
        The value's text (the escaped text itself when an escape is malformed).
    """
    text = str(node.this)
    if not isinstance(node, exp.UnicodeString):
        return text
    esc = node.args.get("escape")
    esc = str(esc.this) if isinstance(esc, exp.Expression) else "\\"
    out, i = [], 0
    while i < len(text):
        if text[i] != esc or not esc:
            out.append(text[i])
            i += 1
            continue
        if text.startswith(esc, i + 1):
            out.append(esc)
            i += 2
            continue
        wide = text.startswith("+", i + 1)
        start = i + 1 + wide
        digits = text[start : start + (6 if wide else 4)]
        try:
            out.append(chr(int(digits, 16)))
        except ValueError:
            return text
        i = start + len(digits)
    return "".join(out)


def constant_values(tree: exp.Expression) -> list[str]:
    """The text of every constant of a parsed query, any form (``literal_value``), JSON keys
    (``c ->> 'key'``) included: what a question asking for it may name.

    Args:
        tree: the parsed query (not changed).

    Returns:
        The non-empty texts, in tree order.
    """
    nodes = tree.find_all(exp.Literal, exp.JSONPathKey, *STRING_FORMS)
    return [v for v in (literal_value(n) for n in nodes) if v]


MAX_PARSE_NESTING = 1000
"""Deepest nesting (parentheses and CASE ... END) handed to sqlglot. Its compiled parser
(sqlglotc) recurses in C: on Python 3.11 a deep text raises RecursionError, on Python 3.13 (the
Python Debian 13's PL/Python embeds) 5,000 nested parentheses or CASEs overflow the C stack and
kill the process — a backend, so the server restarts every session. 3,000 levels parsed on 3.13
(measured in a fresh process on the main thread's 8 MiB stack); no real query comes near 1,000."""

_NESTING_RE = re.compile(r"[()]|\b(?:case|end)\b", re.IGNORECASE)


def nesting_depth(sql: str) -> int:
    """Deepest nesting of parentheses and ``CASE ... END`` in ``sql`` (characters, one pass; an
    upper bound: parentheses inside string literals count too).

    Args:
        sql: SQL text.

    Returns:
        The greatest number of open parentheses and CASEs at any point, 0 for none.
    """
    depth = deepest = 0
    for m in _NESTING_RE.finditer(sql):
        if m.group() in "()":
            depth += 1 if m.group() == "(" else -1
        else:
            depth += 1 if m.group().lower() == "case" else -1
        deepest = max(deepest, depth)
    return deepest


def parse_single(sql: str, read: str = DIALECT) -> exp.Expression:
    """Parse ``sql`` as exactly one statement of dialect ``read`` with sqlglot.

    Args:
        sql: SQL text.
        read: sqlglot dialect name (``postgres``, ``sqlite``, ``mysql``).

    Returns:
        The statement's tree.

    Raises:
        CandidateRefused: empty text, a parse error (or nesting too deep), not one statement.
    """
    if not sql or not sql.strip():
        raise CandidateRefused("empty SQL")
    depth = nesting_depth(sql)
    if depth > MAX_PARSE_NESTING:
        raise CandidateRefused(
            f"does not parse: nested too deeply ({depth} levels of parentheses or CASE > "
            f"{MAX_PARSE_NESTING})"
        )
    try:
        statements = [s for s in sqlglot.parse(sql, read=read) if s is not None]
    except (ParseError, TokenError, ValueError) as e:
        name = "PostgreSQL" if read == DIALECT else read
        raise CandidateRefused(
            f"does not parse as {name}: {str(e).splitlines()[0][:300]}"
        ) from None
    except RecursionError:
        raise CandidateRefused("does not parse: nested too deeply (recursion limit)") from None
    if len(statements) != 1:
        raise CandidateRefused(f"expected exactly one statement, got {len(statements)}")
    return statements[0]


# What a text that closes its expression may go on with: the statements sqlglot parses (its
# ``exp.Command`` fallback included). A word sqlglot reads as a column (CHECKPOINT, ABORT) is
# no statement here; after a semicolon, any token is one.
_STATEMENTS: tuple[type[exp.Expression], ...] = (
    exp.Query,
    exp.DDL,
    exp.DML,
    exp.Command,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    *_FORBIDDEN_NODES,
    *(
        t
        for t in (getattr(exp, n, None) for n in ("Analyze", "Use", "Comment", "Describe"))
        if t is not None
    ),
)
_STATEMENT_STARTS = {TokenType.COMMAND, TokenType.SELECT, TokenType.WITH, TokenType.VALUES}
MAX_STATEMENT_TRIES = 50
"""Most statement words of an unparsable expression text tried as the start of a statement."""


def statement_in_expression(text: str) -> str | None:
    """Find a statement in a text that should be one SQL expression: the shapes "expression,
    semicolon, statement" and "close the expression, then a statement" (``amount); DROP TABLE
    t; --``, ``x) DELETE FROM t``). Read with sqlglot's PostgreSQL tokenizer, which lexes as
    PostgreSQL does: comments (nested ones too), string literals (``E'...'`` escapes,
    ``$tag$...$tag$``) and quoted names are single tokens, so a semicolon or keyword inside
    them is none; a text whose literal or comment never closes holds no statement (everything
    after its opening is inside it).

    Args:
        text: the expression as written.

    Returns:
        What was found, for a message (``a second statement after ';': DROP TABLE t``, ``a
        statement after the expression: DELETE FROM t``), or None: no statement (the text may
        still fail to parse, or parse as a statement itself: the caller checks its kind).
    """
    try:
        toks = sqlglot.Dialect.get_or_raise(DIALECT).tokenize(text)
    except (TokenError, ParseError, ValueError):
        return None
    for i, tok in enumerate(toks):
        if tok.token_type == TokenType.SEMICOLON:
            rest = [t for t in toks[i + 1 :] if t.token_type != TokenType.SEMICOLON]
            if rest:
                return f"a second statement after ';': {_shown(text[rest[0].start :])}"
            return None
    try:
        if len([s for s in sqlglot.parse(text, read=DIALECT) if s is not None]) == 1:
            return None  # it parses: its kind is the caller's check
    except (ParseError, TokenError, ValueError, RecursionError):
        pass
    parens = cases = tries = 0
    for tok in toks:
        kind = tok.token_type
        if kind == TokenType.L_PAREN:
            parens += 1
        elif kind == TokenType.R_PAREN:
            parens -= 1  # below 0: the text closed its expression
        elif kind == TokenType.CASE:
            cases += 1
        elif kind == TokenType.END and cases:
            cases -= 1
        elif parens <= 0 and not cases and _starts_statement(kind):
            tries += 1
            if tries > MAX_STATEMENT_TRIES:
                return f"more than {MAX_STATEMENT_TRIES} statement words outside parentheses"
            tree = _parsed(text[tok.start :])
            if isinstance(tree, _STATEMENTS):
                return f"a statement after the expression: {_shown(text[tok.start :])}"
    return None


def _starts_statement(kind: TokenType) -> bool:
    """Whether a token of this type may start a statement (sqlglot's statement parsers)."""
    parser = sqlglot.Dialect.get_or_raise(DIALECT).parser_class
    return kind in _STATEMENT_STARTS or kind in parser.STATEMENT_PARSERS


def _parsed(text: str) -> exp.Expression | None:
    """The first statement ``text`` parses as (PostgreSQL), or None."""
    try:
        trees = [t for t in sqlglot.parse(text, read=DIALECT) if t is not None]
    except (ParseError, TokenError, ValueError, RecursionError):
        return None
    return trees[0] if trees else None


def _shown(text: str) -> str:
    """The start of a statement text for a message: one line, at most 80 characters."""
    return " ".join(text.split())[:80]


def parse_one(sql: str) -> exp.Expression:
    """Parse ``sql`` as exactly one PostgreSQL statement (a fresh tree on every call).

    Args:
        sql: SQL text.

    Returns:
        The statement's sqlglot tree.

    Raises:
        CandidateRefused: as ``parse_single``.
    """
    return parse_single(sql, DIALECT)


@lru_cache(maxsize=256)
def parse_shared(sql: str) -> exp.Expression:
    """Parse ``sql`` as one PostgreSQL statement, cached (LRU, 256 texts) and shared: read the
    tree, or copy it before changing anything.

    Args:
        sql: SQL text.

    Returns:
        The statement's sqlglot tree, the same object for the same text while cached.

    Raises:
        CandidateRefused: as ``parse_one`` (a failed parse is not cached).
    """
    return parse_one(sql)


def referenced_tables(tree: exp.Expression) -> list[str]:
    """List the relations a query reads, each once, in order (PET-SQL, Li et al. 2024, §3.3).

    Args:
        tree: the parsed query (sqlglot tree); not changed.

    Returns:
        ``schema.table`` or ``table`` names, lower-cased; CTEs and derived tables excluded.
    """
    return resolve(tree).keys()


def check_candidate(sql: str, known_tables: set[str]) -> exp.Expression:
    """Check that a candidate is one read-only query over known relations only.

    Volatility and privileges: ``db_checks.check_candidate_in_db`` (docs/safety.md).

    Args:
        sql: the candidate's SQL text (PostgreSQL).
        known_tables: lower-cased relation names the caller may use (``catalog.known_relations``).

    Returns:
        The parsed tree, SHARED (``parse_shared``): copy it before changing it.

    Raises:
        CandidateRefused: not one statement, or a rule above broken; the message names the rule.
    """
    tree = parse_shared(sql)
    if not isinstance(tree, (exp.Select, exp.Union, exp.Intersect, exp.Except, exp.Subquery)):
        raise CandidateRefused(f"not a query: {type(tree).__name__} statement")
    for node in tree.walk():
        if isinstance(node, _FORBIDDEN_NODES):
            raise CandidateRefused(f"{type(node).__name__} is not allowed in a candidate")
        if isinstance(node, exp.Lock) or (isinstance(node, exp.Select) and node.args.get("locks")):
            raise CandidateRefused("locking clause (FOR UPDATE/SHARE) is not allowed")
        if isinstance(node, exp.Func):
            fname = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
            if fname in _FORBIDDEN_FUNCTIONS:
                raise CandidateRefused(f"function {fname}() is not allowed")
    unknown = [t for t in referenced_tables(tree) if t not in known_tables]
    if unknown:
        raise CandidateRefused(f"unknown relation(s): {', '.join(unknown)}")
    return tree


def to_sql(tree: exp.Expression) -> str:
    """Render a checked tree as PostgreSQL text: what is executed is exactly what was checked.

    Args:
        tree: a sqlglot tree (as ``check_candidate`` returns it).

    Returns:
        The tree's SQL text in the PostgreSQL dialect.
    """
    return tree.sql(dialect=DIALECT)


def has_top_level_order(sql: str) -> bool:
    """Tell whether the outermost statement (a set operation itself) has an ORDER BY.

    Args:
        sql: SQL text of one PostgreSQL statement.

    Returns:
        True when it has one; an ORDER BY only inside a subquery or CTE does not count.

    Raises:
        CandidateRefused: as ``parse_one``.
    """
    return top_level_order(parse_one(sql))


def top_level_order(tree: exp.Expression) -> bool:
    """``has_top_level_order`` of a tree already parsed (the check's), without parsing again.

    Args:
        tree: the statement's tree (``parse_one``, ``check_candidate``).

    Returns:
        True when the outermost statement has an ORDER BY.
    """
    return tree.args.get("order") is not None


def _quoted_strings_to_literals(tree: exp.Expression) -> exp.Expression:
    """SQLite's lenient quoting: a double-quoted, unqualified name compared with a column
    (=, <>, LIKE, IN list) becomes a string literal."""
    cmp_types = (exp.EQ, exp.NEQ, exp.Like, exp.ILike, exp.GT, exp.GTE, exp.LT, exp.LTE)

    def fix(node: exp.Expression) -> exp.Expression:
        if not (isinstance(node, exp.Column) and not node.table):
            return node
        ident = node.this
        if not (isinstance(ident, exp.Identifier) and ident.quoted):
            return node
        parent = node.parent
        if (
            isinstance(parent, cmp_types)
            and parent.expression is node
            and isinstance(parent.this, exp.Column)
        ):
            return exp.Literal.string(ident.name)
        if (
            isinstance(parent, exp.In)
            and node in parent.expressions
            and isinstance(parent.this, exp.Column)
        ):
            return exp.Literal.string(ident.name)
        return node

    return tree.transform(fix)


def transpile(sql: str, read: str) -> str:
    """Transpile one statement from dialect ``read`` to PostgreSQL with sqlglot (SQLite's
    double-quoted strings compared with a column become string literals).

    Args:
        sql: SQL text of one statement in dialect ``read``.
        read: sqlglot dialect name of ``sql`` (``sqlite``, ``mysql``, ``postgres``, ...).

    Returns:
        The statement as PostgreSQL text.

    Raises:
        CandidateRefused: as ``parse_single``.
    """
    tree = parse_single(sql, read)
    if read == "sqlite":
        tree = _quoted_strings_to_literals(tree)
    return tree.sql(dialect=DIALECT)


# the token types of constants: '…', E'…', U&'…', $$…$$, $tag$…$tag$, B'…', X'…', N'…', numbers
_CONSTANTS = frozenset(
    t for t in TokenType if t.name in ("STRING", "NUMBER") or t.name.endswith("_STRING")
)
_PLACEHOLDERS = {(TokenType.STRING, "value"), (TokenType.NUMBER, "0")}


def without_constants(tree: exp.Expression, text: str) -> exp.Expression | None:
    """A query (or expression) as it may be shown while values are withheld: every constant of
    every form replaced, checked by tokenizing the result again (docs/safety.md).

    Args:
        tree: the parsed text (not changed: it may be ``parse_shared``'s shared tree).
        text: the text ``tree`` was parsed from.

    Returns:
        A copy of ``tree`` without comments whose constants are ``'value'`` (strings of every
        form) or 0 (numbers); None when its PostgreSQL text, tokenized again, still holds another
        constant, a comment, or a word of ``text``'s constants outside a constant (a form sqlglot
        reads as something else): the caller then withholds the text whole.
    """
    out = tree.copy()
    for node in out.walk():
        node.comments = None
    out = out.transform(_blank, copy=False)
    try:
        before = Postgres().tokenize(text)
        after = Postgres().tokenize(out.sql(dialect=DIALECT))
    except (SqlglotError, RecursionError, ValueError):
        return None
    words = {w for t in before if t.token_type in _CONSTANTS for w in t.text.lower().split()}
    words -= {t.text.lower() for t in before if t.token_type not in _CONSTANTS}
    for t in after:
        if t.comments or (
            (t.token_type, t.text) not in _PLACEHOLDERS
            if t.token_type in _CONSTANTS
            else t.text.lower() in words
        ):
            return None
    return out


def _blank(node: exp.Expression) -> exp.Expression:
    """A constant of any form as ``'value'`` or 0 (an interval without its unit, a JSON path
    operand as one key ``'value'``); any other node as is."""
    if isinstance(node, exp.Literal):
        return exp.Literal.string("value") if node.is_string else exp.Literal.number(0)
    if isinstance(node, STRING_FORMS):
        return exp.Literal.string("value")
    if isinstance(node, exp.Interval):  # INTERVAL '5 days': sqlglot moves "days" to the unit
        return exp.Interval(this=exp.Literal.string("value"))
    if isinstance(node, exp.JSONPath):  # c ->> 'key' keeps the key outside exp.Literal
        return exp.JSONPath(expressions=[exp.JSONPathRoot(), exp.JSONPathKey(this="value")])
    return node
