"""The question as asked and as the prompts show it: validation and ReBoost's query rewriting.

Used by both ``pipeline.answer()`` and ``context.retrieve()``; it imports neither, so the two
do not import each other.

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
        max_chars: the most characters allowed after stripping (setting
            ``question_max_chars``).

    Returns:
        The stripped question.

    Raises:
        QuestionError: for null, empty/whitespace, NUL bytes or more than ``max_chars``
            characters, saying what to change.
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
    """Rewrite the question as the prompts show it: relative time made explicit.

    When setting ``rewrite_time`` is on and the question has a vague time ("last year"), it is
    made explicit from the database's ``now()::date`` (see rewriting.py).

    Source: ReBoost (Sui et al. 2023) §3.1, query rewriting.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access; reads the date).
        q: the validated question.
        st: the settings (``rewrite_time``).
        trace: the call's trace, changed in place: ``trace["rewriting"]`` (original,
            rewritten, today, rewrites) is set when something was rewritten.

    Returns:
        The rewritten question (``q`` itself when nothing needed rewriting).

    Raises:
        plpy.SPIError: when the date cannot be read.
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
