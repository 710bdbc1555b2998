"""Judged answers and approved mined pairs become examples and verified queries."""

from __future__ import annotations

from ..core import spi
from ..core.errors import ConfigError
from ..core.sqlcheck import parse_one
from ..ops.example_store import add_example
from . import mining
from .verified import add_verified


def from_feedback(plpy, log_id: int, correct: bool, sql: str | None, verify: bool) -> int | None:
    """Add a judged answer to the pool (source ``feedback``) and, with ``verify``, as verified.

    Args:
        log_id: the ``nl2sql.query_log`` id (the trace's ``log_id``).
        correct: whether the logged SQL was right (it is used when so).
        sql: the corrected SQL, used when not ``correct``; or None.
        verify: also add the pair as a verified query.

    Returns:
        The example's id; None when incorrect and no correction was given.

    Raises:
        ConfigError: no log row has that id.
        CandidateRefused: the SQL does not parse or fails the check.
        NotIndexedError: nothing is indexed.
        EmbeddingError: the embedding model is missing.
    """
    rows = spi.query(
        plpy, "SELECT question, sql FROM nl2sql.query_log WHERE id = $1", [log_id], ["int8"]
    )
    if not rows:
        raise ConfigError(f"no query_log row with id {log_id}")
    question, use = rows[0]["question"], rows[0]["sql"] if correct else sql
    if not use:
        return None
    parse_one(use)
    eid = add_example(plpy, question, use, None, "postgres", "feedback")
    if verify:
        add_verified(plpy, question, use, "query", "postgres", "feedback")
    return eid


def approve_mined(plpy, mined_id: int, question: str | None) -> int:
    """Approve a mined pair: a query joins the pool and the verified queries, a template the
    verified queries (source ``mined``).

    Args:
        mined_id: the ``nl2sql.mined_query`` id.
        question: the question to keep instead of the model's, or None.

    Returns:
        The id of the verified query or template it became.

    Raises:
        ConfigError: no such id, approved already, or no question (the model wrote none and
            none was given; its ``hint`` says how to pass one).
        CandidateRefused: the pair fails the checks.
        NotIndexedError: nothing is indexed.
        EmbeddingError: the embedding model is missing.
    """
    row = mining.pending_row(plpy, mined_id)
    q = (question or row["question"] or "").strip()
    if not q:
        err = ConfigError(f"mined query {mined_id} has no question (the model wrote none)")
        err.hint = "pass one: SELECT nl2sql.approve_mined(id, 'question')"
        raise err
    eid = None
    if row["kind"] == "query":
        eid = add_example(plpy, q, row["sql"], None, "postgres", "mined")
    vid = add_verified(plpy, q, row["sql"], row["kind"], "postgres", "mined")
    mining.mark_approved(plpy, mined_id, q, eid, vid)
    return vid
