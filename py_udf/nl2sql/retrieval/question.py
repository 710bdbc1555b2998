"""The question as asked and as the prompts show it: validation and ReBoost's rewriting.
Used by both ``pipeline`` and ``context``, importing neither.

Source: ReBoost (Sui et al. 2023) §3.1 (query rewriting: vague time made explicit).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from ..core import spi
from ..core.errors import QuestionError
from ..core.settings import Settings
from .rewriting import needs_rewrite, rewrite_relative_time


def validate_question(question: str | None, max_chars: int) -> str:
    """Strip and check the question before any work is done.

    Args:
        question: the text the caller passed (may be None).
        max_chars: the most characters allowed after stripping (setting ``question_max_chars``).

    Returns:
        The stripped question.

    Raises:
        QuestionError: null, empty, a NUL byte or over ``max_chars``, saying what to change.
    """
    if question is None:
        raise QuestionError("nl2sql: the question is NULL; pass a question as text")
    q = question.strip()
    if not q:
        raise QuestionError(
            "nl2sql: the question is empty; ask something about the data, "
            "e.g. SELECT nl2sql('How many singers do we have?')"
        )
    if "\x00" in q:
        raise QuestionError("nl2sql: the question contains a NUL byte")
    if len(q) > max_chars:
        raise QuestionError(
            f"nl2sql: the question is {len(q)} characters long, over the limit of {max_chars}; "
            f"shorten it or raise it with SELECT nl2sql.set_setting('question_max_chars', '...')"
        )
    return q


def rewrite_question(plpy, q: str, st: Settings, trace: dict[str, Any]) -> str:
    """Rewrite the question as the prompts show it: relative time made explicit from the
    database's ``now()::date`` when setting ``rewrite_time`` is on.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access; reads the date).
        q: the validated question.
        st: the settings (``rewrite_time``).
        trace: the call's trace; ``trace["rewriting"]`` (original, rewritten, today, rewrites) is
            set when something was rewritten.

    Returns:
        The rewritten question (``q`` itself when nothing needed rewriting).

    Raises:
        plpy.SPIError: the date cannot be read.
    """
    if not st.rewrite_time or not needs_rewrite(q):
        return q
    today = spi.query(plpy, "SELECT (pg_catalog.now())::date::text AS d")[0]["d"]
    rw = rewrite_relative_time(q, date.fromisoformat(today))
    if rw.rewrites:
        trace["rewriting"] = {
            "original": q,
            "rewritten": rw.question,
            "today": rw.today,
            "rewrites": [r.__dict__ for r in rw.rewrites],
        }
    return rw.question
