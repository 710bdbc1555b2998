"""The question: validation and query rewriting. Source: ReBoost (Sui et al. 2023) §3.1."""

from __future__ import annotations

from datetime import date

from ..core import spi
from ..core.errors import QuestionError
from ..core.settings import Settings
from .rewriting import Rewritten, needs_rewrite, rewrite_relative_time


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


def rewrite_question(plpy, q: str, st: Settings) -> tuple[str, Rewritten | None]:
    """Rewrite the question as the prompts show it: relative time made explicit.

    Source: ReBoost (Sui et al. 2023) §3.1, query rewriting.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access; reads the date).
        q: the validated question.
        st: the settings (``rewrite_time``).

    Returns:
        ``(question, rewriting)``: the rewritten question (``q`` itself when nothing needed
        rewriting), and the rewriting when something was rewritten (the trace's
        ``rewriting``), else None.

    Raises:
        plpy.SPIError: when the date cannot be read.
    """
    if not st.rewrite_time or not needs_rewrite(q):
        return q, None
    today = spi.query(plpy, "SELECT (pg_catalog.now())::date::text AS d")[0]["d"]
    rw = rewrite_relative_time(q, date.fromisoformat(today))
    return rw.question, (rw if rw.rewrites else None)
