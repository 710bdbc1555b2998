"""The statements of a model reply that write or control the transaction or session: every
statement start of the reply is parsed with sqlglot, whatever its order among the others,
so that cleaning refuses such a reply instead of cutting it to its SELECT."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

# First words of the statements that write or control the transaction or session. A statement
# start whose first word is not one of these (SELECT, WITH, VALUES, TABLE, SHOW, EXPLAIN, prose)
# is never parsed here: the candidate check reads what remains.
WRITE_WORDS = frozenset(
    "INSERT UPDATE DELETE MERGE UPSERT REPLACE DROP CREATE ALTER TRUNCATE GRANT REVOKE COMMENT "
    "SECURITY IMPORT REFRESH CLUSTER REINDEX VACUUM ANALYZE CHECKPOINT LOAD REASSIGN COPY "
    "BEGIN START COMMIT END ROLLBACK ABORT SAVEPOINT RELEASE PREPARE EXECUTE DEALLOCATE SET "
    "RESET DISCARD LOCK LISTEN UNLISTEN NOTIFY DO CALL DECLARE FETCH MOVE CLOSE USE PRAGMA "
    "ATTACH DETACH".split()
)

# sqlglot's own statement types for writes and transaction control: a text that parses as one of
# these is a statement, wherever it ends. Another parse (sqlglot's fallback ``exp.Command``, or a
# bare word such as ``ABORT`` or ``SAVEPOINT a`` read as a column) counts only when a semicolon or
# the end of the reply closes it, so that a line of prose ("Set the limit to ten:") is not one.
_STATEMENT_TYPES = (
    exp.Insert,
    exp.Update,
    exp.Delete,
    exp.Merge,
    exp.Drop,
    exp.Create,
    exp.Alter,
    exp.TruncateTable,
    exp.Grant,
    exp.Revoke,
    exp.Commit,
    exp.Rollback,
    exp.Transaction,
    exp.Set,
    exp.Copy,
)

_STATEMENT_WORDS = WRITE_WORDS | {"SELECT", "WITH", "VALUES", "TABLE", "SHOW", "EXPLAIN"}
_QUOTED = (TokenType.IDENTIFIER, TokenType.STRING)  # "end", 'commit': names and literals
_AFTER_PROSE = (TokenType.COLON, TokenType.NOT)  # "Here: COMMIT;", "Sure! COMMIT;"

TOO_MANY = "too many statement starts to check"
"""``write_kinds``'s one kind past ``MAX_PARSED_CHARS`` (the reply is refused)."""

MAX_PARSED_CHARS = 400_000
"""Most characters parsed while looking for statement starts in one reply (the reply itself is
capped at 100,000 characters; a start is tried up to each later line start)."""


def _tokens(text: str):
    try:
        return sqlglot.Dialect.get_or_raise("postgres").tokenize(text)
    except (TokenError, ParseError, ValueError):
        return None


def _parse_one(text: str):
    """The one expression ``text`` parses as (PostgreSQL), or None."""
    try:
        trees = [t for t in sqlglot.parse(text, read="postgres") if t is not None]
    except (ParseError, TokenError, ValueError, RecursionError):
        return None
    return trees[0] if len(trees) == 1 else None


def _starts_and_stops(toks) -> tuple[list[int], set[int]]:
    """Token indexes that may start a statement (the first, one after a semicolon, the first of a
    line) and those that stop one (a semicolon, one past the last token)."""
    starts, stops = [0], {len(toks)}
    for i, tok in enumerate(toks):
        if tok.token_type == TokenType.SEMICOLON:
            stops.add(i)
            starts.append(i + 1)
        elif i and tok.line > toks[i - 1].line:
            starts.append(i)
    return sorted(set(starts) - {len(toks)}), stops


def _inside_expression(toks) -> set[int]:
    """Indexes of the tokens inside parentheses or an open CASE of their statement: the END that
    closes a CASE, or a word inside parentheses, starts no statement even at a line start."""
    inside: set[int] = set()
    parens = cases = 0
    for i, tok in enumerate(toks):
        kind = tok.token_type
        if kind == TokenType.SEMICOLON:
            parens = cases = 0
            continue
        if parens or cases:
            inside.add(i)
        if kind == TokenType.L_PAREN:
            parens += 1
        elif kind == TokenType.R_PAREN:
            parens = max(parens - 1, 0)
        elif kind == TokenType.CASE:
            cases += 1
        elif kind == TokenType.END and cases:
            cases -= 1
    return inside


def _kind_at(piece: str, toks, i: int, ends: list[int], stops: set[int], budget: list[int]):
    """The word naming the write or control statement that starts at token ``i``, or None."""
    word = toks[i].text.upper()
    for end in ends:
        text = piece[toks[i].start : toks[end - 1].end + 1]
        budget[0] -= len(text)
        if budget[0] < 0:  # past MAX_PARSED_CHARS: write_kinds says so
            return None
        tree = _parse_one(text)
        if isinstance(tree, exp.Query):
            return None
        closed = end in stops and end < len(toks)  # a semicolon closes it
        if tree is None and not closed:
            continue
        if tree is None or isinstance(tree, _STATEMENT_TYPES) or closed:
            return word
        # sqlglot's Command fallback reads any text: at a line start, a keyword in upper case
        # or the reply's end makes it a statement ("VACUUM t", not "Set the limit to ten:")
        return word if end in stops or toks[i].text.isupper() else None
    # no span parses (sqlglot lacks RELEASE SAVEPOINT, NOTIFY c, 'x'): a keyword in upper case
    return word if toks[i].text.isupper() else None


def _kinds_in(piece: str, budget: list[int]) -> list[str]:
    """Write and control statement words of one fence piece, in order of appearance."""
    toks = _tokens(piece)
    if toks is None:  # an apostrophe in prose: read each line that tokenizes on its own
        return [k for line in piece.splitlines() if _tokens(line) for k in _kinds_in(line, budget)]
    starts, stops = _starts_and_stops(toks)
    inside = _inside_expression(toks)
    kinds, covered = [], 0
    for i, tok in enumerate(toks):
        if budget[0] < 0:
            break
        if i < covered or tok.token_type in _QUOTED or tok.text.upper() not in WRITE_WORDS:
            continue
        stop = min(s for s in stops if s > i)
        if i and toks[i - 1].token_type == TokenType.SEMICOLON:
            kinds.append(tok.text.upper())  # a further statement: cleaning keeps it as one
            covered = stop
            continue
        if i in inside:  # CASE ... END, or a word inside parentheses, of an open statement
            continue
        if i in starts:  # first of the reply or of a line: tried up to each later line start
            ends = sorted({s for s in starts if i < s <= stop} | {stop})
        elif stop < len(toks) and toks[i - 1].token_type in _AFTER_PROSE:
            ends = [stop]  # mid-line after prose ("Sure! COMMIT;"): closed by a semicolon
        else:
            continue
        kind = _kind_at(piece, toks, i, ends, stops, budget)
        if kind is not None:
            kinds.append(kind)
            covered = stop
    return kinds


def write_kinds(text: str) -> list[str]:
    """The kinds of the statements in a model reply that write or control the transaction or
    session (``DELETE``, ``COMMIT``, ``SET`` ...), whatever their order among its statements.

    In each markdown fence piece, a word of ``WRITE_WORDS`` right after a semicolon counts (the
    candidate check would refuse it as a further statement). One that starts the piece or a line
    is parsed with sqlglot up to each later line start until one parses; one mid-line after
    ``:`` or ``!``, only up to a semicolon that closes it. It counts unless it parses as a query:
    when a semicolon closes it (parsed or not), when it parses as a write or control statement
    type, and, for another parse (sqlglot's ``exp.Command`` fallback, ``ABORT`` read as a
    column) or none (``RELEASE SAVEPOINT s``), when the reply's end closes it or its keyword is
    written in upper case (so that a line of prose such as "Set the limit to ten:" is not one).
    Parsing is bounded by
    ``MAX_PARSED_CHARS``.

    Args:
        text: the model's reply, as received (at most ``cleaning.MAX_ANSWER_CHARS`` characters).

    Returns:
        The statement kinds, upper case, each once, in order of appearance (``[]`` for a reply
        holding only queries and prose); ``[TOO_MANY]`` past the bound.
    """
    budget = [MAX_PARSED_CHARS]
    kinds: list[str] = []
    for piece in text.split("```"):
        kinds += _kinds_in(piece, budget)
        if budget[0] < 0:
            return [TOO_MANY]
    return list(dict.fromkeys(kinds))


def is_one_statement(text: str) -> bool:
    """Say whether a whole reply is one statement and nothing else (a trailing semicolon
    allowed; no later line starting with a statement word): such a reply is not cut by cleaning, and the candidate check refuses a write or
    control statement itself, naming its sqlglot type (``not a query: Drop``).

    Args:
        text: the model's reply, as received.

    Returns:
        True when sqlglot parses the reply as exactly one statement; never raises.
    """
    body = text.strip()
    toks = _tokens(body)
    if not toks or any(t.token_type == TokenType.SEMICOLON for t in toks[:-1]):
        return False
    for line in body.splitlines()[1:]:  # line by line: a Command's token runs to the end
        words = _tokens(line)
        if words and words[0].text.upper() in _STATEMENT_WORDS:
            return False  # a line that starts another statement: sqlglot may read both as one
    return _parse_one(body.rstrip(";")) is not None
