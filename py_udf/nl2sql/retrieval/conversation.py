"""Follow-up questions: earlier turns from the caller's own log (``nl2sql.my_query_log``).
Source: SParC, CoSQL (Yu et al. 2019); CoE-SQL (Zhang et al. 2024)."""

from __future__ import annotations

import sqlglot
from sqlglot.errors import SqlglotError

from ..core import spi
from ..core.errors import QuestionError
from ..core.names import resolve
from ..core.types import Schema, Turn

KEY_MAX_CHARS = 200
"""Longest conversation key accepted (keys are labels, not content)."""


def validate_key(key: str | None) -> str | None:
    """Check a conversation key.

    Args:
        key: the caller's key, or None for a question outside any conversation.

    Returns:
        The key unchanged, or None.

    Raises:
        QuestionError: the key is empty, holds a NUL byte, or is over ``KEY_MAX_CHARS`` characters.
    """
    if key is None:
        return None
    if not key.strip() or "\x00" in key or len(key) > KEY_MAX_CHARS:
        raise QuestionError(
            f"nl2sql: the conversation key must be 1 to {KEY_MAX_CHARS} characters of text "
            f"(got {len(key)} characters); pass the same key, e.g. conversation => 'sales-1', "
            f"with every question of one conversation, or NULL for none"
        )
    return key


def earlier_turns(plpy, key: str | None, limit: int) -> list[Turn]:
    """Read the last turns of the caller's conversation ``key`` that chose an SQL.

    Args:
        key: the conversation key, or None.
        limit: most turns returned (setting ``conversation_turns``).

    Returns:
        Up to ``limit`` turns, oldest first; empty for no key or ``limit`` 0.
    """
    if key is None or limit <= 0:
        return []
    rows = spi.query(
        plpy,
        "SELECT id, question, sql FROM nl2sql.my_query_log "
        "WHERE conversation = $1 AND sql IS NOT NULL ORDER BY id DESC LIMIT $2",
        [key, limit],
        ["text", "int4"],
    )
    return [Turn(r["id"], r["question"], r["sql"]) for r in reversed(rows)]


def visible_turns(turns: list[Turn], schema: Schema) -> list[Turn]:
    """Keep the turns whose SQL reads only relations the role may read now (privileges and
    tables change after a turn was chosen).

    Args:
        turns: the earlier turns (``earlier_turns``).
        schema: the calling role's schema (``catalog.load_schema``).

    Returns:
        The turns whose every relation is a table of ``schema``, in order.
    """
    known = set()
    for t in schema.tables:
        known.update({t.name.lower(), t.table.lower(), f"{t.schema}.{t.table}".lower()})
    out = []
    for turn in turns:
        try:
            keys = resolve(sqlglot.parse_one(turn.sql, read="postgres")).keys()
        except SqlglotError:
            continue
        if all(k in known for k in keys):
            out.append(turn)
    return out
