"""The entry points of the agent door: ``execute_sql``, ``search_values``, ``describe_table``,
``semantic_context`` (``nl2sql.agent``; docs/mcp.md)."""

from __future__ import annotations

import json

from ..core.errors import CandidateRefused, EmbeddingError, NotIndexedError, QuestionError
from ._door import entry_point, fail

_HINT = "docs/mcp.md, 'The agent's own SQL', says what is run and what is refused"


def _call(plpy, what: str, fn, *args) -> str:
    """``fn(plpy, *args)`` as JSON text; its input errors as one SQL error naming
    ``nl2sql.<what>``."""
    try:
        return json.dumps(fn(plpy, *args), default=str)
    except (CandidateRefused, QuestionError, NotIndexedError) as e:
        fail(plpy, f"nl2sql.{what}: {e}", getattr(e, "hint", None) or _HINT)
    except EmbeddingError as e:
        fail(plpy, f"nl2sql: {e}")


@entry_point
def execute_sql(
    plpy, sql: str | None, max_rows: int, dry_run: bool, for_model: bool, search_path: str
) -> str:
    """Back ``nl2sql.execute_sql(sql, max_rows, dry_run, for_model, search_path) → jsonb``.

    Args:
        plpy: PL/Python's module.
        sql: one read-only query.
        max_rows: most rows returned (1..1000).
        dry_run: plan it only.
        for_model: the reader is a model (``agent.view``).
        search_path: the caller's search_path text.

    Returns:
        ``agent.execute.execute_sql``'s dict as JSON text (a refusal is a result, logged).

    Raises:
        plpy.Error: (through ``plpy.error``) ``max_rows`` out of range, nothing indexed.
    """
    from ..agent import execute  # not loaded by a backend that only asks questions

    args = (sql, search_path, max_rows, bool(dry_run), bool(for_model))
    return _call(plpy, "execute_sql", execute.execute_sql, *args)


@entry_point
def search_values(plpy, text: str | None, k: int, search_path: str) -> str:
    """Back ``nl2sql.search_values(text, k, search_path) → jsonb``.

    Args:
        plpy: PL/Python's module.
        text: the literal looked up.
        k: most matches.
        search_path: the caller's search_path text.

    Returns:
        ``agent.lookup.search_values``' dict as JSON text.

    Raises:
        plpy.Error: (through ``plpy.error``) an empty or long text, nothing indexed, no
            embedding model.
    """
    from ..agent import lookup  # not loaded by a backend that only asks questions

    return _call(plpy, "search_values", lookup.search_values, text, k, search_path)


@entry_point
def describe_table(plpy, name: str | None, for_model: bool, search_path: str) -> str:
    """Back ``nl2sql.describe_table(name, for_model, search_path) → jsonb``.

    Args:
        plpy: PL/Python's module.
        name: the table.
        for_model: the reader is a model (sample values gated).
        search_path: the caller's search_path text.

    Returns:
        ``agent.lookup.describe_table``'s dict as JSON text.

    Raises:
        plpy.Error: (through ``plpy.error``) no such table the role may read.
    """
    from ..agent import lookup  # not loaded by a backend that only asks questions

    args = (name, search_path, bool(for_model))
    return _call(plpy, "describe_table", lookup.describe_table, *args)


@entry_point
def semantic_context(plpy, question: str | None, k: int, for_model: bool, search_path: str) -> str:
    """Back ``nl2sql.semantic_context(question, k, for_model, search_path) → jsonb``.

    Args:
        plpy: PL/Python's module.
        question: the question, or None.
        k: most verified queries.
        for_model: the reader is a model (expressions and verified SQL gated).
        search_path: the caller's search_path text.

    Returns:
        ``agent.lookup.semantic_context``'s dict as JSON text.

    Raises:
        plpy.Error: (through ``plpy.error``) ``k`` out of range, nothing indexed.
    """
    from ..agent import lookup  # not loaded by a backend that only asks questions

    args = (question, k, search_path, bool(for_model))
    return _call(plpy, "semantic_context", lookup.semantic_context, *args)
