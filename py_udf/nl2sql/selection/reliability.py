"""Per-model reliability learned from judged answers, and the vote it weights.

A judged question is one whose right answer is known: in a deployment, a logged answer judged
with ``nl2sql.feedback`` or whose question has a verified example; in a benchmark, its gold SQL.
Each of its candidates is then right or wrong. From many judged questions this module learns

* a **weight per model** (and per PreSQL hardness level): the log-odds of the model's
  accuracy, ``log(p / (1 - p))`` with ``p`` smoothed towards 1/2 by one right and one wrong
  answer, a level's ``p`` shrunk towards the model's overall accuracy by ``SHRINK`` judged
  answers; weights are floored at ``MIN_WEIGHT`` (a model right less than half the time still
  counts a little). This is the weighted majority that is optimal for independent voters
  (Nitzan & Paroush 1982); the result groups' scores are the sums of their members' weights;
* **voter sets per hardness level** (PET-SQL's fine-grained voting, §3.4): for each level, the
  k most reliable models at that level vote, k chosen to maximise the learned vote's accuracy
  on the judged questions of that level (ties → more voters); a level with fewer than
  ``MIN_LEVEL_QUESTIONS`` judged questions keeps every model.

Sources: PET-SQL (Li et al. 2024) §3.4, cross-consistency and fine-grained voting by PreSQL
hardness; Nitzan & Paroush (1982), "Optimal decision rules in uncertain dichotomous choice
situations" (log-odds weights).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..core import spi
from ..core.errors import ConfigError
from ..core.types import Status

LEVELS = ("easy", "medium", "hard", "extra")
ALL = "all"
SHRINK = 10.0
MIN_WEIGHT = 0.05
MIN_LEVEL_QUESTIONS = 20


@dataclass
class Reliability:
    """What calibration learned: counts, weights and voter sets.

    Attributes:
        counts: (model, level) -> (judged, right); level is one of ``LEVELS`` or ``"all"``.
        weights: (model, level) -> weight (> 0).
        voters: level -> the models that vote at that level (absent: every model).
        questions: int, the judged questions learned from.
    """

    counts: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    weights: dict[tuple[str, str], float] = field(default_factory=dict)
    voters: dict[str, list[str]] = field(default_factory=dict)
    questions: int = 0

    def weight(self, model: str, level: str | None) -> float:
        """The weight of ``model``'s vote for a PreSQL of hardness ``level``.

        Args:
            model: the model's name.
            level: the PreSQL's hardness, or None when unknown.

        Returns:
            The learned weight at that level, else the model's overall weight, else 1.0 (a
            model never judged).
        """
        if level and (model, level) in self.weights:
            return self.weights[(model, level)]
        return self.weights.get((model, ALL), 1.0)

    def empty(self) -> bool:
        """Whether nothing was learned (no judged question).

        Returns:
            True when there are no weights.
        """
        return not self.weights

    def rows(self) -> list[dict[str, Any]]:
        """One dict per (model, level): the rows of ``nl2sql.model_reliability``.

        Returns:
            ``{"model", "level", "judged", "right", "weight", "voter"}`` dicts, sorted by model
            then level; ``voter`` is None for ``all`` and for levels without a learned set.
        """
        out = []
        for (m, lv), (n, r) in sorted(self.counts.items()):
            vs = self.voters.get(lv)
            out.append(
                {
                    "model": m,
                    "level": lv,
                    "judged": n,
                    "right": r,
                    "weight": round(self.weights.get((m, lv), 1.0), 6),
                    "voter": (m in vs) if vs is not None else None,
                }
            )
        return out


def from_rows(rows: list[dict[str, Any]]) -> Reliability:
    """Rebuild a Reliability from ``nl2sql.model_reliability`` rows.

    Args:
        rows: dicts with ``model``, ``level``, ``judged``, ``right``, ``weight``, ``voter``.

    Returns:
        The Reliability (``questions`` left 0: the table does not keep it).
    """
    rel = Reliability()
    for r in rows:
        key = (r["model"], r["level"])
        rel.counts[key] = (int(r["judged"]), int(r["right"]))
        rel.weights[key] = float(r["weight"])
        if r.get("voter") is not None:
            vs = rel.voters.setdefault(r["level"], [])
            if r["voter"]:
                vs.append(r["model"])
    rel.voters = {lv: vs for lv, vs in rel.voters.items() if vs}
    return rel


def _log_odds(right: float, judged: float) -> float:
    p = (right + 1.0) / (judged + 2.0)
    return max(MIN_WEIGHT, math.log(p / (1.0 - p)))


def _count(questions: list[dict[str, Any]]) -> dict[tuple[str, str], tuple[int, int]]:
    counts: dict[tuple[str, str], list[int]] = {}
    for q in questions:
        for c in q.get("candidates") or []:
            for lv in (ALL, q.get("level")):
                if lv:
                    n = counts.setdefault((c["model"], lv), [0, 0])
                    n[0] += 1
                    n[1] += bool(c.get("right"))
    return {k: (v[0], v[1]) for k, v in counts.items()}


def learn(questions: list[dict[str, Any]]) -> Reliability:
    """Learn weights and voter sets from judged questions.

    Source: PET-SQL (Li et al. 2024) §3.4, fine-grained voting; Nitzan & Paroush (1982),
    log-odds weights of a weighted majority.

    Args:
        questions: judged questions, each ``{"level": easy|medium|hard|extra|None,
            "candidates": [{"model": str, "group": hashable result id, "right": bool}]}``;
            only candidates that executed are listed.

    Returns:
        Reliability; empty (plain majority) for no judged candidate.
    """
    rel = Reliability(counts=_count(questions), questions=len(questions))
    for (m, lv), (n, r) in rel.counts.items():
        if lv == ALL:
            rel.weights[(m, lv)] = _log_odds(r, n)
    for (m, lv), (n, r) in rel.counts.items():
        if lv != ALL:
            an, ar = rel.counts[(m, ALL)]
            p_all = (ar + 1.0) / (an + 2.0)
            rel.weights[(m, lv)] = _log_odds(r + SHRINK * p_all, n + SHRINK)
    for lv in LEVELS:
        qs = [q for q in questions if q.get("level") == lv]
        if len(qs) >= MIN_LEVEL_QUESTIONS:
            rel.voters[lv] = _best_voters(qs, rel, lv)
    return rel


def _best_voters(qs: list[dict[str, Any]], rel: Reliability, lv: str) -> list[str]:
    """The k most reliable models at ``lv``, k maximising the vote's accuracy on ``qs``."""
    models = sorted(
        {c["model"] for q in qs for c in q["candidates"]}, key=lambda m: (-rel.weight(m, lv), m)
    )
    best, best_ok = models, -1
    for k in range(len(models), 0, -1):
        chosen = set(models[:k])
        ok = sum(weighted_choice(q, rel, chosen) for q in qs)
        if ok > best_ok:
            best, best_ok = models[:k], ok
    return best


def group_scores(
    candidates: list[dict[str, Any]],
    rel: Reliability,
    level: str | None,
    voters: set[str] | None = None,
) -> dict[Any, float]:
    """Score each result group: the sum of its members' weights.

    Args:
        candidates: ``{"model", "group"}`` dicts (executed candidates).
        rel: the learned reliability (empty: every weight 1, a plain majority).
        level: the PreSQL's hardness, or None.
        voters: the models that vote (None: every model).

    Returns:
        group -> score, groups in first-seen order.
    """
    out: dict[Any, float] = {}
    for c in candidates:
        if voters is not None and c["model"] not in voters:
            continue
        out[c["group"]] = out.get(c["group"], 0.0) + rel.weight(c["model"], level)
    return out


def weighted_choice(q: dict[str, Any], rel: Reliability, voters: set[str] | None = None) -> bool:
    """Whether the learned vote picks a right group for judged question ``q`` (offline check).

    Voters are ``voters`` when given, else the learned set for ``q``'s level (every model
    when none); when no voter executed, every candidate votes. Ties go to the group seen first
    (the candidates' order: the PreSQL writer first).

    Args:
        q: a judged question (``learn``'s form).
        rel: the learned reliability.
        voters: models that vote, or None.

    Returns:
        True when the chosen group's candidates are right.
    """
    cands = q.get("candidates") or []
    if not cands:
        return False
    lv = q.get("level")
    vs = voters if voters is not None else (set(rel.voters[lv]) if lv in rel.voters else None)
    scores = group_scores(cands, rel, lv, vs) or group_scores(cands, rel, lv)
    win = max(scores, key=lambda g: scores[g])  # max keeps the first of equal scores
    return any(c["right"] for c in cands if c["group"] == win)


MODES = ("majority", "weights", "weights+voters")


def _mode_choice(q: dict[str, Any], rel: Reliability, mode: str) -> bool:
    if mode == "majority":
        return weighted_choice(q, Reliability(), set())  # empty voters: everyone, weight 1
    if mode == "weights":
        return weighted_choice(q, rel, {c["model"] for c in q.get("candidates") or []})
    return weighted_choice(q, rel)


def cross_validate(questions: list[dict[str, Any]], folds: int = 5) -> dict[str, dict[str, int]]:
    """Score each vote mode on held-out judged questions (k-fold, question i in fold i mod k).

    Args:
        questions: judged questions (``learn``'s form).
        folds: int >= 2, the number of folds.

    Returns:
        mode (``MODES``) -> ``{"right": held-out questions whose vote picks a right group,
        "won": right where the plain majority is wrong, "lost": wrong where it is right}``.
    """
    out = {m: {"right": 0, "won": 0, "lost": 0} for m in MODES}
    for k in range(folds):
        train = [q for i, q in enumerate(questions) if i % folds != k]
        test = [q for i, q in enumerate(questions) if i % folds == k]
        rel = learn(train)
        for q in test:
            base = _mode_choice(q, rel, "majority")
            for m in MODES:
                ok = _mode_choice(q, rel, m)
                out[m]["right"] += ok
                out[m]["won"] += ok and not base
                out[m]["lost"] += base and not ok
    return out


def significant(won: int, lost: int, z: float = 2.0) -> bool:
    """Whether a mode beats the majority by more than chance on the questions they disagree on.

    Sign test (McNemar's test without continuity correction) on the discordant held-out
    questions: ``won - lost >= z * sqrt(won + lost)``, about 95 % one-sided at z = 2.

    Args:
        won: held-out questions the mode gets right and the majority wrong.
        lost: held-out questions the mode gets wrong and the majority right.
        z: the normal quantile to clear.

    Returns:
        True when the difference is significant (and positive).
    """
    return won > lost and (won - lost) >= z * math.sqrt(won + lost)


def calibrate_questions(
    questions: list[dict[str, Any]], folds: int = 5
) -> tuple[Reliability, str, dict[str, int]]:
    """Learn from judged questions and choose the vote mode that held out best.

    A learned vote is used only when it beats the plain majority on held-out questions
    (``cross_validate``) by more than chance (``significant``): weights alone, or weights
    with voter sets per hardness level, whichever is right more often.

    Source: PET-SQL (Li et al. 2024) §3.4 (fine-grained voting); the held-out check guards
    against weights fitted to too few judged answers.

    Args:
        questions: judged questions (``learn``'s form).
        folds: the folds of the held-out check.

    Returns:
        (Reliability learned on every question — its voter sets cleared unless the mode uses
        them; mode, one of ``MODES``; ``cross_validate``'s held-out figures per mode).
    """
    rel = learn(questions)
    if len(questions) >= folds:
        cv = cross_validate(questions, folds)
    else:
        cv = {m: {"right": 0, "won": 0, "lost": 0} for m in MODES}
    mode = "majority"
    for m in MODES[1:]:
        if significant(cv[m]["won"], cv[m]["lost"]) and (
            mode == "majority" or cv[m]["right"] > cv[mode]["right"]
        ):
            mode = m
    if mode != "weights+voters":
        rel.voters = {}
    return rel, mode, cv


# ------------------------------------------------------------------ in the database

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
        plpy: the PL/Python module of the calling backend (SPI access).
        sql: the verified SQL.
        search_path: the search_path its names resolve in.
        timeout_ms: the time limit (setting ``candidate_timeout_ms``).
        max_rows: rows fetched (setting ``max_rows``).
        max_bytes: bytes fetched (setting ``max_result_bytes``).

    Returns:
        The executed ``types.Candidate`` (source ``verified``): its ``result_hash`` is the right
        answer when its status is ``ok``.

    Raises:
        plpy.SPIError: the user cancelled.
    """
    from ..core.types import Candidate
    from ..generation.execute import run_candidate

    c = Candidate(source="verified", model="", raw_text=sql)
    c.sql = sql
    return run_candidate(plpy, c, search_path, timeout_ms, max_rows, max_bytes=max_bytes)


def judge_candidates(candidates: list[dict[str, Any]], right_hash: str) -> list[dict[str, Any]]:
    """Judge a trace's FinSQL candidates against the right result.

    A candidate is right when it executed and its result signature (``result_hash``: the
    result as a multiset of rows) equals the right one's.

    Args:
        candidates: the trace's ``candidates`` (``Candidate.to_json`` dicts).
        right_hash: the verified SQL's ``result_hash``.

    Returns:
        ``[{"model", "group", "right"}]`` (``learn``'s form) for every executed FinSQL
        candidate, in the trace's order.
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
    """Judged questions of this database: logged answers whose question has a verified example.

    A verified example is one of this database added by ``nl2sql.feedback`` (the logged SQL
    judged right, or the correction of a wrong one) or ``nl2sql.add_example``. Its SQL is
    executed (read-only, time-limited, like a candidate: ``run_verified``) and every executed
    candidate of the logged trace is right when its result signature equals the verified
    SQL's (``judge_candidates``). Log rows written by ``nl2sql.evaluate`` are left out: the
    last evaluation's judged candidates are read whole (``judged_from_evaluation``).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        timeout_ms: the time limit per verified SQL (setting ``candidate_timeout_ms``).
        max_rows: rows fetched per verified SQL (setting ``max_rows``).
        max_bytes: bytes fetched per verified SQL (setting ``max_result_bytes``).

    Returns:
        (judged questions in ``learn``'s form, oldest log row first; one line per logged
        answer skipped and why: its verified SQL failed).

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

    Each evaluated verified question whose verified SQL executed is one judged question: its
    FinSQL candidates, judged by ``judge_candidates`` when the run was made, and its PreSQL's
    hardness.

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
                and "group" in c
                for c in q["candidates"]
            )
        )
        if not ok:
            raise ConfigError(
                f'nl2sql.calibrate: judged item {i} is not {{"level": easy|medium|hard|extra|'
                f'null, "candidates": [{{"model": text, "group": id, "right": '
                f"boolean}}]}}: {json.dumps(q)[:200]}"
            )
    return data


def store(plpy, rel: Reliability, mode: str) -> None:
    """Replace the rows of ``nl2sql.model_reliability`` with what ``rel`` holds.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
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
        The Reliability, or None when nothing is calibrated or calibration chose the plain
        majority (rows not ``in_use``).
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

    Learns from this database's judged answers (``judged_from_log``), the last finished
    evaluation on the verified questions (``judged_from_evaluation``, ``nl2sql.evaluate``) and
    the judged questions given (``parse_judged``: another database's or a benchmark's), chooses the vote mode by
    the held-out check (``calibrate_questions``) and stores the result
    (``nl2sql.model_reliability``).

    Source: PET-SQL (Li et al. 2024) §3.4, fine-grained voting; Nitzan & Paroush (1982),
    weighted majority.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        judged: JSON text of judged questions, or None.
        timeout_ms, max_rows, max_bytes: limits for executing verified SQL.

    Returns:
        ``{"judged_questions", "from_log", "from_evaluation", "evaluation_run",
        "from_argument", "skipped", "mode", "held_out":
        {mode: {"right", "won", "lost"}}, "models": [rows of nl2sql.model_reliability]}``.

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
