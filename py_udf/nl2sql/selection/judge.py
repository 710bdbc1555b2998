"""A judge where the vote is unsure: a model compares the vote's top two result groups pairwise,
in both orders, ties allowed (setting ``selection = judge``; docs/pipeline.md "The judge").

Source: DeepEye-SQL (Li et al. 2025), its selection step (HKUSTDial/DeepEye-SQL,
``app/pipeline/sql_selection/sql_selection.py``): a shortcut keeps the top group when its share
of the consistent candidates reaches a threshold (the issue's 0.6; that file's code default is
0.8); otherwise the top groups are compared pairwise by a model that answers
``<result>A|B|TIE</result>`` over a few samples, a win counting 1, a tie 0.5, and each group's
mean win rate is multiplied by its share of the vote. Here every pair is asked in both orders
(A/B then B/A) so that a judge that always names the first-shown option ends in a tie, and a
reply that names no verdict counts for nothing: with no usable verdict in either order the
vote's choice stands. Pure functions: the calls are made by ``stages.judge``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..core.types import Vote
from ..model.prompts import QUESTION_MARKER, shown_sql

__all__ = ["SKIP_SHARE", "SAMPLES", "SYSTEM", "Judgement", "decide", "judge_prompt"]
__all__ += ["apply_judgement", "parse_verdict", "skip_reason", "top_share"]

SKIP_SHARE = 0.6
"""The top group's share of the vote weight at or above which the judge is not asked."""
SAMPLES = 2
"""Samples asked per order (one request with ``n``): 2 per order, 4 verdicts per question."""
MAX_ROWS = 5
"""Result rows shown per group (each cut at ``_ROW_CHARS`` characters)."""
_ROW_CHARS = 200
SYSTEM = (
    "You are a PostgreSQL expert who judges which of two SQL queries answers a question "
    "correctly. You answer with <result>A</result>, <result>B</result> or <result>TIE</result>."
)
_TAG = re.compile(r"<result>\s*(A|B|TIE)\s*</result>", re.IGNORECASE)
_BARE = re.compile(r"^\W*(A|B|TIE)\W*$", re.IGNORECASE)
ORDERS = ("AB", "BA")
"""``AB``: the vote's top group shown as A; ``BA``: the second group shown as A."""


@dataclass
class Judgement:
    """What the judge did for one question (the trace's ``judge``)."""

    model: str
    skipped: str | None = None  # why the judge was not asked (None: it was)
    top_share: float = 0.0  # the vote's top group's share of the vote weight, 0..1
    prompts: dict[str, str] = field(default_factory=dict)  # order -> the user message sent
    replies: dict[str, list[str | None]] = field(default_factory=dict)  # order -> sample texts
    errors: dict[str, str] = field(default_factory=dict)  # order -> the call's error
    verdicts: dict[str, list[str | None]] = field(default_factory=dict)  # order -> A/B/TIE/None
    wins: list[float] = field(default_factory=list)  # [top, second]: mean win rate, 0..1
    scores: list[float] = field(default_factory=list)  # [top, second]: wins x share
    winner: str = "vote"  # ``vote`` (the vote's choice stands) or ``second``
    why: str = ""  # one line for the vote's reason
    calls: list[Any] = field(default_factory=list)  # the ``LLMReply`` of each order (tokens)

    def to_json(self) -> dict[str, Any]:
        """The judgement as the trace shows it.

        Returns:
            A JSON-able dict of every field.
        """
        return {
            "model": self.model,
            "skipped": self.skipped,
            "top_share": round(self.top_share, 4),
            "prompts": dict(self.prompts),
            "replies": {k: list(v) for k, v in self.replies.items()},
            "errors": dict(self.errors),
            "verdicts": {k: list(v) for k, v in self.verdicts.items()},
            "wins": list(self.wins),
            "scores": list(self.scores),
            "winner": self.winner,
            "why": self.why,
        }


def _own(g: dict[str, Any]) -> float:
    return float(g.get("own_score", g.get("score", g.get("size", 0))))


def top_share(v: Vote) -> tuple[float, float]:
    """The vote weight's shares of the vote's first two groups.

    Args:
        v: the vote (``groups`` best first; ``dropped`` count in the total).

    Returns:
        ``(top, second)`` in 0..1: each group's own score over the summed own score of every
        kept and dropped group (second 0.0 when there is one group).
    """
    total = sum(_own(g) for g in [*v.groups, *v.dropped])
    if total <= 0 or not v.groups:
        return 0.0, 0.0
    second = _own(v.groups[1]) / total if len(v.groups) > 1 else 0.0
    return _own(v.groups[0]) / total, second


def skip_reason(v: Vote, threshold: float = SKIP_SHARE) -> str | None:
    """Why the judge is not asked, or None when it is.

    Args:
        v: the vote.
        threshold: the top group's share at or above which the vote is sure enough.

    Returns:
        A sentence (no executed candidate; one group; the top share at least ``threshold``), or
        None when there are two groups or more and the top share is below it.
    """
    if v.sql is None or not v.groups:
        return "no candidate executed"
    if len(v.groups) < 2:
        return "one result group: nothing to compare"
    share, _ = top_share(v)
    if share + 1e-12 >= threshold:
        return f"the top group holds {share:.2f} of the vote (at least {threshold:g})"
    return None


def judge_prompt(
    question: str, schema_text: str, evidence: str | None, shown: list[dict[str, Any]]
) -> str:
    """The user message of one pairwise comparison.

    Args:
        question: the question as the prompts show it.
        schema_text: the schema as the prompts show it (gated).
        evidence: BIRD-style external knowledge, or None.
        shown: two dicts, A then B: ``sql`` (through ``Gate.sql``), ``rows`` (through
            ``Gate.rows``: row texts), ``note`` (what the gate withheld, or None),
            ``row_count`` (int or None).

    Returns:
        The text: schema, hint, the two candidates with their first rows, the instruction, and
        the question after ``QUESTION_MARKER``.
    """
    parts = ["/* Given the following database schema: */", schema_text]
    if evidence:
        parts.append(f"/* Hint: {evidence.strip()} */")
    parts.append(
        "/* Two candidate SQL queries and the first rows each returned. Compare them and judge "
        "which one answers the question correctly. */"
    )
    for label, c in zip("AB", shown):
        lines = [f"-- Candidate {label} ({c.get('row_count')} rows)", shown_sql(c["sql"]) + ";"]
        for r in (c.get("rows") or [])[:MAX_ROWS]:
            lines.append(f"--   row: {r[:_ROW_CHARS]}")
        if c.get("note"):
            lines.append(f"--   ({c['note']})")
        parts.append("\n".join(lines))
    parts.append(
        "/* Answer <result>A</result> if A is correct and B is not, <result>B</result> if B is "
        "correct and A is not, <result>TIE</result> if both or neither are. */"
    )
    parts.append(f"{QUESTION_MARKER}{question.strip()} */")
    return "\n\n".join(parts)


def parse_verdict(text: str | None) -> str | None:
    """Read a judge's verdict: ``<result>A</result>`` (the last such tag), or a reply that is
    only ``A``, ``B`` or ``TIE``.

    Args:
        text: one sample's text, or None.

    Returns:
        ``A``, ``B`` or ``TIE``; None when the reply names none (garbage, a refusal, empty).
    """
    if not text:
        return None
    tags = _TAG.findall(text)
    if tags:
        return tags[-1].upper()
    m = _BARE.match(text.strip())
    return m.group(1).upper() if m else None


def _points(order: str, verdict: str) -> tuple[float, float]:
    """``(top, second)`` points of one verdict given in ``order``."""
    if verdict == "TIE":
        return 0.5, 0.5
    first_wins = verdict == "A"
    top_wins = first_wins if order == "AB" else not first_wins
    return (1.0, 0.0) if top_wins else (0.0, 1.0)


def decide(j: Judgement, shares: tuple[float, float]) -> Judgement:
    """Score the verdicts in ``j.verdicts`` and name the winner, in place.

    Args:
        j: its ``verdicts`` filled (order -> list of A/B/TIE/None).
        shares: ``top_share``'s ``(top, second)``.

    Returns:
        ``j``: ``wins`` (mean points per usable verdict), ``scores`` (wins x share), ``winner``
        (``second`` only when its score is strictly higher and both orders gave a usable
        verdict; else ``vote``) and ``why``.
    """
    usable = {o: [x for x in j.verdicts.get(o, []) if x is not None] for o in ORDERS}
    if not all(usable.values()):
        missing = [o for o in ORDERS if not usable[o]]
        j.why = f"judge {j.model}: no usable verdict in order {'/'.join(missing)}; vote kept"
        return j
    pts = [_points(o, x) for o in ORDERS for x in usable[o]]
    j.wins = [round(sum(p[i] for p in pts) / len(pts), 4) for i in (0, 1)]
    j.scores = [round(j.wins[i] * shares[i], 4) for i in (0, 1)]
    said = ", ".join(f"{o}: {'/'.join(usable[o])}" for o in ORDERS)
    if j.scores[1] > j.scores[0]:
        j.winner = "second"
        j.why = f"judge {j.model} ({said}): the second group wins, score {j.scores[1]:g} > "
        j.why += f"{j.scores[0]:g}"
    else:
        j.why = f"judge {j.model} ({said}): the vote's choice stands, score {j.scores[0]:g} >= "
        j.why += f"{j.scores[1]:g}"
    return j


def apply_judgement(v: Vote, j: Judgement) -> Vote:
    """Make the judge's winner the vote's answer, in place.

    Args:
        v: the vote (two groups or more when the judge was asked).
        j: the decided judgement (``decide``).

    Returns:
        ``v``: with ``winner == "second"`` the second group first (``sql``, ``winner_hash``,
        ``confidence`` its own; ``method`` ``judge``); else unchanged but for the reason (and
        ``method`` ``majority (judge kept the vote)``).
    """
    if j.skipped is not None:
        return v
    v.reason += f"; {j.why}"
    if j.winner != "second":
        v.method = f"{v.method} (judge kept the vote)"
        return v
    g = v.groups[1]
    v.groups = [g, v.groups[0], *v.groups[2:]]
    v.sql, v.winner_hash, v.confidence = g["sql"], g["result_hash"], g["confidence"]
    v.method = "judge"
    return v
