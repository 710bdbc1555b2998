"""Follow-up questions: the earlier turns of a conversation, read from the caller's own log.

A conversation is a key the caller chooses (any text); its turns are the ``nl2sql.query_log``
rows of the calling role that carry that key (``nl2sql(question, conversation => key)``). They
are read through the view ``nl2sql.my_query_log`` (rows whose ``role_name`` is
``current_user``: the role ``nl2sql._log_query`` attributes a call's row to), so a role never
sees another role's turns, even under the same key. The last ``conversation_turns`` turns that
chose an SQL go into the PreSQL and FinSQL prompts (``prompts.render_turns``), so that "and
only those from France?" is read against the previous question and its SQL.

Source: multi-turn text-to-SQL (SParC, Yu et al. 2019; CoSQL, Yu et al. 2019) concatenates the
interaction's earlier questions with the current one; CoE-SQL (Zhang et al. 2024) shows the
earlier turns' SQL as well, which is what is done here.
"""

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
        QuestionError: the key is empty, whitespace only, holds a NUL byte, or is longer than
            ``KEY_MAX_CHARS`` characters.
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
        plpy: the PL/Python module of the calling backend (SPI access).
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
    """Keep the turns whose SQL reads only relations the role may read now.

    A turn's SQL was checked when it was chosen; since then the role may have lost a
    privilege or a table may be gone. A turn naming a relation outside the role's schema is
    left out of the prompts, so that no prompt names a table the role cannot read.

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
