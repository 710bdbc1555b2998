"""Model output cleaning: an answer text → one SQL statement, every step named
(docs/internals/generation.md "Cleaning"). Sources: DAIL-SQL (Gao et al. 2023) §3.1;
OpenSearch-SQL (Xie et al. 2024) §3.5."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import sqlglot
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from ..core.errors import CandidateRefused, ConfigError
from ..core.sqlcheck import DIALECT as _PG
from ..core.sqlcheck import parse_shared, parse_single, transpile
from ..core.types import Schema
from ._sqlite.rules import apply_sqlite_rules
from ._statement_kinds import TOO_MANY, is_one_statement, write_kinds

TARGET = "postgres"
DIALECTS = ("postgres", "sqlite", "mysql")
# Dialects tried, in order, when the text does not parse as PostgreSQL.
FALLBACK_DIALECTS = ("sqlite", "mysql")

# Caps checked by ``_bounded`` before any parse. A real answer is far smaller (the largest
# recorded BIRD prediction is about 2,000 characters, 400 tokens, 8 levels of parentheses);
# every later step (sqlglot's parser, the candidate check, the skeleton, the hardness count,
# value alignment) is linear in the text at best, and a model that loops (an IN list of 200,000
# items, 50,000 nested parentheses) would otherwise hold the backend for seconds to minutes
# while pg_cancel_backend is not noticed (Python does not check for it) — or overflow the
# parser's recursion. The caps bound that work to well under a second per answer.
MAX_ANSWER_CHARS = 100_000
"""Most characters of a model answer (before any cleaning)."""
MAX_ANSWER_TOKENS = 20_000
"""Most sqlglot tokens of a model answer."""
MAX_NESTING = 100
"""Deepest nesting of parentheses in a model answer. sqlglot's recursive-descent parser and
generator recurse a few frames per level and reach Python's recursion limit (1,000) at about
400 levels."""

_SQL_START = re.compile(r"^\s*(select|with)\b", re.IGNORECASE | re.MULTILINE)
_LANG_TAGS = {"sql", "postgresql", "postgres", "pgsql", "sqlite", "mysql", ""}


@dataclass
class Cleaned:
    """The outcome of cleaning one model answer (``clean``)."""

    sql: str  # stripped, no trailing semicolon; PostgreSQL unless transpiling failed; may be ""
    steps: list[str] = field(default_factory=list)  # steps applied, in order, each once
    dialect: str = TARGET  # the dialect the text was read as
    reason: str | None = None  # why there is no SQL to check (steps then end with "refused")


def _strip_lang_tag(piece: str) -> str:
    first, sep, rest = piece.partition("\n")
    return rest if sep and first.strip().lower() in _LANG_TAGS else piece


def _tokens(text: str, dialect: str = TARGET):
    """sqlglot tokens of ``text`` (None when it does not tokenize, e.g. an open quote)."""
    try:
        return sqlglot.Dialect.get_or_raise(dialect).tokenize(text)
    except (TokenError, ParseError, ValueError):
        return None


@lru_cache(maxsize=512)
def parses_as(text: str, dialect: str) -> bool:
    """Say whether ``text`` parses as exactly one statement of ``dialect`` (cached, 512 entries;
    PostgreSQL through ``sqlcheck.parse_shared``).

    Args:
        text: the SQL text to try.
        dialect: a sqlglot dialect name (``postgres``, ``sqlite``, ``mysql``).

    Returns:
        True when it parses as exactly one statement; never raises.
    """
    try:
        # PostgreSQL text through the shared cache, whose tree the candidate check reuses
        parse_shared(text) if dialect == TARGET else parse_single(text, dialect)
        return True
    except (CandidateRefused, ValueError, RecursionError):
        return False


def _nesting(toks) -> int:
    """Deepest nesting of parentheses among sqlglot tokens (one pass)."""
    depth = deepest = 0
    for tok in toks:
        if tok.token_type == TokenType.L_PAREN:
            depth += 1
            deepest = max(deepest, depth)
        elif tok.token_type == TokenType.R_PAREN:
            depth = max(depth - 1, 0)
    return deepest


def _char_nesting(text: str) -> int:
    """Deepest nesting of ``(`` characters (an upper bound, for text that does not tokenize)."""
    depth = deepest = 0
    for ch in text:
        if ch == "(":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch == ")" and depth:
            depth -= 1
    return deepest


def bound_answer(text: str) -> str | None:
    """Check a model answer against the caps in linear time, before anything parses it: a NUL
    byte, ``MAX_ANSWER_CHARS``, ``MAX_ANSWER_TOKENS``, ``MAX_NESTING``.

    Args:
        text: the model's answer text.

    Returns:
        None within every cap, else the reason (``answer too large: 200007 tokens > cap 20000``).
    """
    if "\x00" in text:
        return "answer holds a NUL byte (U+0000), which PostgreSQL text cannot hold"
    if len(text) > MAX_ANSWER_CHARS:
        return f"answer too large: {len(text)} characters > cap {MAX_ANSWER_CHARS}"
    toks = _tokens(text)
    if toks is not None and len(toks) > MAX_ANSWER_TOKENS:
        return f"answer too large: {len(toks)} tokens > cap {MAX_ANSWER_TOKENS}"
    depth = _nesting(toks) if toks is not None else _char_nesting(text)
    if depth > MAX_NESTING:
        return f"answer nested too deeply: {depth} levels of parentheses > cap {MAX_NESTING}"
    return None


# reasoning a model writes inline before its answer (DeepSeek-R1, Qwen3 and others served
# without a reasoning parser): never read as the answer; an unclosed block was cut mid-thought
_REASONING = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|\Z)", re.IGNORECASE | re.DOTALL)


def _drop_reasoning(t: str, steps: list[str]) -> str:
    """``t`` without its ``<think>``/``<thinking>``/``<reasoning>`` blocks (step ``reasoning``)."""
    if "<" not in t:
        return t
    out = _REASONING.sub("", t)
    if out != t:
        steps.append("reasoning")
    return out


def _unfence(t: str, steps: list[str]) -> str:
    if "```" not in t:
        return t
    pieces = [_strip_lang_tag(p) for p in t.split("```")]
    sqlish = [p for p in pieces if _SQL_START.match(p)]
    fenced = [p for i, p in enumerate(pieces) if i % 2 == 1 and p.strip()]
    chosen = (sqlish or fenced or [t])[0]
    steps.append("fence")
    before, _, after = t.partition(chosen)
    if after.strip(" \n`"):
        steps.append("trailing_prose")
    return chosen.strip()


def _cut_leading_prose(t: str, steps: list[str]) -> str:
    m = _SQL_START.search(t)
    if m:
        start = m.start()
        while start < len(t) and t[start].isspace():
            start += 1
    else:  # SQL starting mid-line after prose ("Here it is: SELECT ...")
        low = t.lower()
        cands = [
            i for i in (low.find("select "), low.find("select\n"), low.find("with ")) if i >= 0
        ]
        start = min(cands) if cands else 0
    if start > 0 and t[:start].strip():
        steps.append("leading_prose")
    return t[start:]


# First words of SQL statements: text after a semicolon that starts with one of these is a
# further statement, not prose; it is kept, so that the check refuses the answer as several
# statements instead of cleaning silently picking one.
_STATEMENT_WORDS = {
    "SELECT",
    "WITH",
    "INSERT",
    "UPDATE",
    "DELETE",
    "MERGE",
    "DROP",
    "CREATE",
    "ALTER",
    "TRUNCATE",
    "GRANT",
    "REVOKE",
    "COPY",
    "SET",
    "RESET",
    "DO",
    "CALL",
    "VALUES",
    "TABLE",
    "EXPLAIN",
    "VACUUM",
    "ANALYZE",
    "LOCK",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SHOW",
    "PREPARE",
    "EXECUTE",
    "DECLARE",
    "LISTEN",
    "NOTIFY",
    "UNLISTEN",
    "LOAD",
    "REFRESH",
    "CLUSTER",
    "REINDEX",
    "COMMENT",
    "SECURITY",
    "IMPORT",
    "DISCARD",
    "CHECKPOINT",
    "SAVEPOINT",
    "RELEASE",
    "START",
    "END",
    "ABORT",
    "FETCH",
    "MOVE",
    "CLOSE",
    "DEALLOCATE",
    "REASSIGN",
    "USE",
    "PRAGMA",
    "ATTACH",
    "DETACH",
    "REPLACE",
    "UPSERT",
}


def _is_statement(rest: str) -> bool:
    """True when ``rest`` (text after a semicolon) begins with a SQL statement (not prose)."""
    toks = _tokens(rest)
    return bool(toks) and toks[0].text.upper() in _STATEMENT_WORDS


def _cut_after_statement(t: str, steps: list[str]) -> str:
    """Cut at the first top-level semicolon when prose follows (a further statement is kept, so
    the check refuses it)."""
    toks = _tokens(t)
    if toks is None:
        # the text does not tokenize as a whole (e.g. an apostrophe in the prose after the
        # query): cut at the first ";" whose prefix is a complete statement
        i = t.find(";")
        while i >= 0:
            head = t[:i]
            if _is_statement(t[i + 1 :]):
                return t
            if _tokens(head) is not None and any(parses_as(head, d) for d in DIALECTS):
                steps.append("trailing_prose" if t[i + 1 :].strip() else "trailing_semicolon")
                return head.rstrip()
            i = t.find(";", i + 1)
        return t
    for tok in toks:
        if tok.token_type == TokenType.SEMICOLON:
            rest = t[tok.end + 1 :]
            if _is_statement(rest):
                return t
            if rest.strip():
                steps.append("trailing_prose")
            else:
                steps.append("trailing_semicolon")
            return t[: tok.start].rstrip()
    return t


def _cut_trailing_paragraphs(t: str, steps: list[str]) -> str:
    """Drop trailing paragraphs until the text parses (an explanation after the query)."""
    if "\n\n" not in t.strip() or parses_as(t, TARGET):
        return t
    paras = t.strip().split("\n\n")
    for k in range(len(paras) - 1, 0, -1):
        head = "\n\n".join(paras[:k]).strip()
        if any(parses_as(head, d) for d in DIALECTS):
            steps.append("trailing_prose")
            return head
    return t


def _cut_hash_comments(t: str, steps: list[str]) -> str:
    """Cut MySQL ``#`` comments (tokens outside literals), only when the text does not parse as
    PostgreSQL as it is (there ``#`` is XOR)."""
    if "#" not in t or parses_as(t, TARGET):
        return t
    toks = _tokens(t)
    if toks is None:
        return t
    cuts = [tok.start for tok in toks if tok.token_type == TokenType.HASH]
    if not cuts:
        return t
    out, pos = [], 0
    for c in cuts:
        if c < pos:
            continue
        out.append(t[pos:c])
        nl = t.find("\n", c)
        pos = len(t) if nl < 0 else nl
    out.append(t[pos:])
    cut = "".join(out).strip()
    if parses_as(cut, TARGET) or any(parses_as(cut, d) for d in FALLBACK_DIALECTS):
        steps.append("hash_comment")
        return cut
    return t


def transpile_to_postgres(sql: str, read: str) -> str:
    """Transpile one statement from dialect ``read`` to PostgreSQL (sqlglot).

    Args:
        sql: one statement in dialect ``read``.
        read: the sqlglot dialect name to read it as (``sqlite``, ``mysql``).

    Returns:
        The statement as PostgreSQL text.

    Raises:
        CandidateRefused: it does not parse as ``read`` or is not exactly one statement.
    """
    return transpile(sql, read)


def sqlite_to_postgres(sql: str, schema: Schema, steps: list[str]) -> tuple[str, str | None]:
    """Transpile one SQLite statement to PostgreSQL keeping SQLite's meaning
    (``_sqlite.rules.apply_sqlite_rules``).

    Args:
        sql: one statement in SQLite dialect.
        schema: the tables the calling role may read.
        steps: the cleaning steps so far; ``transpile:sqlite`` and each rule applied are appended
            (``sqlite:rules_skipped`` when the rules failed and only the syntax was transpiled).

    Returns:
        ``(sql, reason)``: the PostgreSQL text, and the reason when SQLite's meaning cannot be
        kept (then ``sql`` is the transpiled text as is).

    Raises:
        CandidateRefused: the text does not parse as one SQLite statement.
    """
    tree = parse_single(sql, "sqlite")
    steps.append("transpile:sqlite")
    try:
        rw = apply_sqlite_rules(tree, schema)
    except Exception:  # noqa: BLE001 - a tree the rules do not foresee: syntax-only transpile
        steps.append("sqlite:rules_skipped")
        return transpile(sql, "sqlite"), None
    steps.extend(rw.steps)
    return rw.tree.sql(dialect=_PG), rw.reason


def clean(text: str | None, dialect: str = TARGET, schema: Schema | None = None) -> Cleaned:
    """Clean one model answer into one SQL statement, recording every step. Source: DAIL-SQL (Gao et
    al. 2023) §3.1; OpenSearch-SQL (Xie et al. 2024) §3.5.

    Args:
        text: the model's answer text; ``None`` or blank gives an empty ``sql``.
        dialect: the dialect the model is configured to write (``postgres``, ``sqlite``,
            ``mysql``); another than PostgreSQL is transpiled.
        schema: with it, SQLite text keeps SQLite's meaning (``sqlite_to_postgres``).

    Returns:
        ``Cleaned(sql, steps, dialect, reason)``; ``reason`` set (and ``sql`` empty) when the
        answer was refused: past a cap, only a comment, or holding, beside other text, a
        statement that writes or controls the transaction (``_statement_kinds.write_kinds``),
        wherever it stands (a reply that is one such statement alone is left to the check). Text that cannot be cleaned comes back as it is.

    Raises:
        ConfigError: ``dialect`` is unknown (a text that cannot be cleaned never raises).
    """
    if dialect not in DIALECTS:
        raise ConfigError(f"unknown SQL dialect {dialect!r}; one of {', '.join(DIALECTS)}")
    steps: list[str] = []
    if not text or not text.strip():
        return Cleaned("", steps, dialect)
    why = bound_answer(text)
    if why is not None:
        return Cleaned("", ["refused"], dialect, why)
    text = _drop_reasoning(text, steps)
    if not text.strip():
        return Cleaned("", [*steps, "refused"], dialect, "answer is only reasoning: no SQL")
    writes = write_kinds(text)
    if writes and not is_one_statement(text):  # never cut to the query it also holds
        why = f"the reply writes or controls the transaction: {', '.join(writes)}"
        if writes == [TOO_MANY]:
            why = f"answer has {TOO_MANY} for a write or transaction control"
        return Cleaned("", ["refused"], dialect, why)
    t = _unfence(text.strip(), steps)
    if t.strip() and _tokens(t) == []:  # tokenizes to nothing: only comments
        return Cleaned("", [*steps, "refused"], dialect, "answer is only a comment: no SQL to run")
    t = _cut_to_statement(t, steps)
    return _to_postgres(t, dialect, schema, steps)


def _cut_to_statement(t: str, steps: list[str]) -> str:
    """Unfenced answer text cut to its statement (each step applied appended to ``steps``)."""
    if "\\_" in t or "\\*" in t:
        t = t.replace("\\_", "_").replace("\\*", "*")
        steps.append("markdown_escape")
    t = _cut_leading_prose(t, steps)
    t = _cut_after_statement(t, steps)
    t = _cut_trailing_paragraphs(t, steps)
    t = _cut_hash_comments(t, steps)
    t = t.strip()
    if t.endswith(";"):  # left when the tokenizer could not read the text
        t = t.rstrip(";").strip()
        steps.append("trailing_semicolon")
    return t


def _to_postgres(t: str, dialect: str, schema: Schema | None, steps: list[str]) -> Cleaned:
    """``clean``'s last step: read as ``dialect`` (for ``postgres``, the first fallback dialect
    that parses) and transpile to PostgreSQL; text that does not transpile is kept."""
    read = dialect
    if dialect == TARGET and t and not parses_as(t, TARGET):
        read = next((d for d in FALLBACK_DIALECTS if parses_as(t, d)), TARGET)
    if read == "sqlite" and schema is not None:
        try:
            t, why = sqlite_to_postgres(t, schema, steps)
        except ValueError:
            read = dialect
        else:
            if why is not None:
                return Cleaned("", [*_unique(steps), "refused"], read, why)
    elif read != TARGET:
        try:
            t = transpile_to_postgres(t, read)
            steps.append(f"transpile:{read}")
        except ValueError:
            read = dialect
    return Cleaned(t, _unique(steps), read)


def _unique(steps: list[str]) -> list[str]:
    """The steps de-duplicated in order (e.g. trailing_prose found twice)."""
    seen: list[str] = []
    for s in steps:
        if s not in seen:
            seen.append(s)
    return seen


def clean_model_output(text: str | None) -> str:
    """Turn a model's chat answer into SQL text, as ``clean`` does for a PostgreSQL model.

    Args:
        text: the model's answer text (``None`` or empty gives ``""``).

    Returns:
        The stripped SQL text (may be empty); never raises.
    """
    return clean(text).sql
