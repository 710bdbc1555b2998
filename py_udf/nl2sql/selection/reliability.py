"""Per-model reliability: ``nl2sql.calibrate`` learns and stores the weighted vote; ``load``
reads it (docs/internals/selection.md "Learned reliability")."""

from __future__ import annotations

import json
from typing import Any

from ..core import spi
from ..core.errors import ConfigError
from ..core.types import Candidate, Status
from ..generation.execute import run_candidate
from .learned_vote import LEVELS, Reliability, calibrate_questions, from_rows

__all__ = [
    "Reliability",
    "calibrate",
    "judge_candidates",
    "judged_from_evaluation",
    "judged_from_log",
    "load",
    "parse_judged",
    "run_verified",
    "store",
]


_JUDGED_SQL = """
SELECT q.id, q.trace, e.sql AS verified
FROM nl2sql.query_log q
JOIN LATERAL (SELECT x.sql FROM nl2sql.example x
              WHERE x.db_id = 'local' AND x.source IN ('feedback', 'user')
                AND x.question = q.question
              ORDER BY x.id DESC LIMIT 1) e ON true
WHERE q.trace ? 'candidates' AND NOT q.trace ? 'evaluation_run'
ORDER BY q.id"""


def run_verified(plpy, sql: str, search_path: str, timeout_ms: int, max_rows: int, max_bytes: int):
    """Execute a verified SQL as a candidate is executed: read-only, time-limited, as the caller.

    Args:
        sql: the verified SQL.
        search_path: the search_path its names resolve in.
        timeout_ms: the time limit (setting ``candidate_timeout_ms``).
        max_rows: rows fetched (setting ``max_rows``).
        max_bytes: bytes fetched (setting ``max_result_bytes``).

    Returns:
        The executed ``types.Candidate`` (source ``verified``); its ``result_hash`` is the right
        answer when its status is ``ok``.

    Raises:
        plpy.SPIError: the user cancelled.
    """
    c = Candidate(source="verified", model="", raw_text=sql)
    c.sql = sql
    return run_candidate(plpy, c, search_path, timeout_ms, max_rows, max_bytes=max_bytes)


def judge_candidates(candidates: list[dict[str, Any]], right_hash: str) -> list[dict[str, Any]]:
    """Judge a trace's FinSQL candidates: right when executed with the right ``result_hash``.

    Args:
        candidates: the trace's ``candidates`` (``Candidate.to_json`` dicts).
        right_hash: the verified SQL's ``result_hash``.

    Returns:
        ``[{"model", "group", "right"}]`` (``learn``'s form) per executed FinSQL candidate.
    """
    return [
        {"model": c["model"], "group": c["result_hash"], "right": c["result_hash"] == right_hash}
        for c in candidates or []
        if c.get("status") == Status.OK
        and c.get("result_hash")
        and c.get("model")
        and str(c.get("source", "")).startswith("finsql:")
    ]


def judged_from_log(
    plpy, timeout_ms: int, max_rows: int, max_bytes: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """Judged questions of this database: logged answers whose question has a verified example
    (``nl2sql.feedback``, ``nl2sql.add_example``); ``nl2sql.evaluate``'s rows left out.

    Args:
        timeout_ms: the time limit per verified SQL (setting ``candidate_timeout_ms``).
        max_rows: rows fetched per verified SQL (setting ``max_rows``).
        max_bytes: bytes fetched per verified SQL (setting ``max_result_bytes``).

    Returns:
        (judged questions in ``learn``'s form, oldest first; a line per answer skipped and why).

    Raises:
        plpy.SPIError: the user cancelled.
    """
    out, skipped = [], []
    hashes: dict[tuple[str, str], str | None] = {}
    for r in spi.query(plpy, _JUDGED_SQL):
        trace = json.loads(r["trace"]) if isinstance(r["trace"], str) else r["trace"]
        key = (r["verified"], trace.get("search_path") or "")
        if key not in hashes:
            c = run_verified(plpy, r["verified"], key[1], timeout_ms, max_rows, max_bytes)
            hashes[key] = c.result_hash if c.status == Status.OK else None
            if hashes[key] is None:
                skipped.append(f"log {r['id']}: verified SQL {c.status}: {str(c.reason)[:200]}")
        right = hashes[key]
        if right is None:
            continue
        out.append(
            {
                "log_id": r["id"],
                "level": (trace.get("hardness") or {}).get("presql"),
                "candidates": judge_candidates(trace.get("candidates"), right),
            }
        )
    return out, skipped


_EVALUATION_SQL = """
SELECT e.run_id, e.verified_query_id, e.level, e.candidates::text AS candidates
FROM nl2sql.evaluation_result e
WHERE e.run_id = (SELECT max(r.id) FROM nl2sql.evaluation_run r WHERE r.finished_at IS NOT NULL)
  AND e."right" IS NOT NULL
ORDER BY e.verified_query_id"""


def judged_from_evaluation(plpy) -> tuple[list[dict[str, Any]], int | None]:
    """Judged questions of the last finished ``nl2sql.evaluate`` run.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        (judged questions in ``learn``'s form, the run's id or None when no run finished).
    """
    rows = spi.query(plpy, _EVALUATION_SQL)
    out = [
        {
            "evaluation_run": r["run_id"],
            "verified_query": r["verified_query_id"],
            "level": r["level"],
            "candidates": json.loads(r["candidates"]),
        }
        for r in rows
    ]
    return out, (rows[0]["run_id"] if rows else None)


def parse_judged(text: str | None) -> list[dict[str, Any]]:
    """Read judged questions given to ``nl2sql.calibrate(judged)``.

    Args:
        text: JSON text: an array of ``{"level": easy|medium|hard|extra|null, "candidates":
            [{"model": text, "group": text or number, "right": boolean}, …]}``; None for none.

    Returns:
        The judged questions (extra keys kept).

    Raises:
        ConfigError: the text is not such an array; the message names the first bad item.
    """
    if text is None:
        return []
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"nl2sql.calibrate: judged is not JSON ({e})") from None
    except RecursionError:
        raise ConfigError("nl2sql.calibrate: judged is nested too deeply to read") from None
    if not isinstance(data, list):
        raise ConfigError("nl2sql.calibrate: judged must be a JSON array of judged questions")
    for i, q in enumerate(data):
        ok = (
            isinstance(q, dict)
            and q.get("level") in (None, *LEVELS)
            and isinstance(q.get("candidates"), list)
            and all(
                isinstance(c, dict)
                and isinstance(c.get("model"), str)
                and c["model"]
                and isinstance(c.get("right"), bool)
                and isinstance(c.get("group", []), (str, int, float))  # a key of the vote
                for c in q["candidates"]
            )
        )
        if not ok:
            raise ConfigError(
                f'nl2sql.calibrate: judged item {i} is not {{"level": easy|medium|hard|extra|'
                f'null, "candidates": [{{"model": text, "group": text or number, "right": '
                f"boolean}}]}}: {_start_of(q)}"
            )
    return data


def _start_of(value: Any) -> str:
    """The first 200 characters of a JSON value's text (its type when it cannot be written)."""
    try:
        return json.dumps(value)[:200]
    except (RecursionError, TypeError, ValueError):
        return f"a JSON {type(value).__name__} nested too deeply to show"


def store(plpy, rel: Reliability, mode: str) -> None:
    """Replace the rows of ``nl2sql.model_reliability`` with what ``rel`` holds.

    Args:
        rel: the learned reliability.
        mode: the chosen vote mode (``MODES``); the rows are ``in_use`` unless ``majority``.

    Raises:
        plpy.SPIError: the write failed (e.g. the role may not write the table).
    """
    spi.query(plpy, "DELETE FROM nl2sql.model_reliability")
    for r in rel.rows():
        spi.query(
            plpy,
            'INSERT INTO nl2sql.model_reliability (model, level, judged, "right", '
            "weight, voter, in_use) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            [
                r["model"],
                r["level"],
                r["judged"],
                r["right"],
                r["weight"],
                r["voter"],
                mode != "majority",
            ],
            ["text", "text", "int4", "int4", "float8", "bool", "bool"],
        )


def load(plpy) -> Reliability | None:
    """Read the calibrated reliability the vote uses.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        The Reliability; None when nothing is calibrated or the plain majority was chosen.
    """
    rows = spi.query(
        plpy,
        'SELECT model, level, judged, "right", weight, voter, in_use FROM nl2sql.model_reliability',
    )
    if not rows or not all(r["in_use"] for r in rows):
        return None
    return from_rows(list(rows))


def calibrate(
    plpy, judged: str | None, timeout_ms: int, max_rows: int, max_bytes: int
) -> dict[str, Any]:
    """Recompute the per-model reliability: backs ``nl2sql.calibrate(judged) → jsonb``.

    Judged answers from the log, the last evaluation and ``judged``; the mode chosen held out.

    Source: PET-SQL (Li et al. 2024) §3.4; Nitzan & Paroush (1982).

    Args:
        judged: JSON text of judged questions, or None.
        timeout_ms, max_rows, max_bytes: limits for executing verified SQL.

    Returns:
        ``{"judged_questions", "from_log", "from_evaluation", "evaluation_run",
        "from_argument", "skipped", "mode", "held_out": {mode: {"right", "won", "lost"}},
        "models": [rows of nl2sql.model_reliability]}``.

    Raises:
        ConfigError: ``judged`` is malformed.
        plpy.SPIError: the user cancelled, or the table could not be written.
    """
    given = parse_judged(judged)
    logged, skipped = judged_from_log(plpy, timeout_ms, max_rows, max_bytes)
    evaluated, run_id = judged_from_evaluation(plpy)
    questions = logged + evaluated + given
    rel, mode, cv = calibrate_questions(questions)
    store(plpy, rel, mode)
    return {
        "judged_questions": len(questions),
        "from_log": len(logged),
        "from_evaluation": len(evaluated),
        "evaluation_run": run_id,
        "from_argument": len(given),
        "skipped": skipped,
        "mode": mode,
        "held_out": cv,
        "models": rel.rows(),
    }
