"""Relative time made explicit from the database's date (docs/internals/retrieval.md
"Relative time"). Source: ReBoost (Sui et al. 2023) §3.1."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from datetime import date, timedelta

_UNITS = {
    "day": "day",
    "days": "day",
    "week": "week",
    "weeks": "week",
    "month": "month",
    "months": "month",
    "year": "year",
    "years": "year",
    "quarter": "quarter",
    "quarters": "quarter",
}
_NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "twelve": 12,
}

# Verbs of state that "currently"/"now"/"presently" may qualify ("students who currently live
# in", "players now playing for", "staff presently employed"): the database stores the present
# state as it is, so such a phrase is the subject's attribute, not a time filter, and is left
# alone. Besides these, any word ending in -ing after the adverb is read as such a verb.
_STATE_VERBS = (
    "live",
    "lives",
    "lived",
    "reside",
    "resides",
    "resided",
    "work",
    "works",
    "stay",
    "stays",
    "study",
    "studies",
    "attend",
    "attends",
    "hold",
    "holds",
    "own",
    "owns",
    "have",
    "has",
    "belong",
    "belongs",
    "serve",
    "serves",
    "play",
    "plays",
    "teach",
    "teaches",
    "use",
    "uses",
    "employed",
    "enrolled",
    "located",
    "based",
    "registered",
    "married",
    "assigned",
    "housed",
    "stationed",
    "signed",
    "hired",
    "listed",
    "stored",
    "kept",
)
_NOT_TIME = r"(?!\s+(?:" + "|".join(_STATE_VERBS) + r"|\w{2,}ing)\b)"

# Longest phrases first; each alternative is a whole-word match (case-insensitive).
_PATTERN = re.compile(
    r"\b(?:"
    r"(?P<lastn>(?:in\s+)?(?:the\s+)?(?:last|past|previous)\s+(?P<n>\d+|one|two|three|four|five|"
    r"six|seven|eight|nine|ten|twelve)\s+(?P<nunit>days?|weeks?|months?|years?|quarters?))"
    r"|(?P<rel>(?P<which>this|last|previous|next|current)\s+(?P<unit>week|month|year|quarter))"
    r"|(?P<day>today|yesterday|tomorrow)"
    r"|(?P<ytd>year[\s-]to[\s-]date)"
    r"|(?P<now>(?:right\s+now|now|currently|at\s+present|presently)" + _NOT_TIME + ")"
    r")\b",
    re.IGNORECASE,
)


@dataclass
class Rewrite:
    """One relative-time phrase and its explicit range.

    Attributes:
        phrase: the phrase as written in the question, e.g. ``this month``.
        start: first day of the range, ISO date (``YYYY-MM-DD``), inclusive.
        end: last day of the range, ISO date, inclusive.
        text: what was added after the phrase in parentheses, e.g.
            ``from 2024-05-01 to 2024-05-31``, ``on 2024-05-16``, ``as of 2024-05-17``.
    """

    phrase: str
    start: str
    end: str
    text: str


@dataclass
class Rewritten:
    """The result of ``rewrite_relative_time``.

    Attributes:
        question: the rewritten question (the original when nothing matched).
        today: the date used, ISO; None when nothing matched.
        rewrites: one ``Rewrite`` per matched phrase, in order; empty when nothing matched.
    """

    question: str
    today: str | None = None
    rewrites: list[Rewrite] = field(default_factory=list)


def needs_rewrite(question: str) -> bool:
    """Tell whether a question holds a relative-time phrase (then the date is needed).

    Args:
        question: the question (natural language); None counts as empty.

    Returns:
        True when ``rewrite_relative_time`` would rewrite something.
    """
    return bool(_PATTERN.search(question or ""))


def _add_months(d: date, months: int) -> date:
    y, m = divmod(d.month - 1 + months, 12)
    y += d.year
    return date(y, m + 1, min(d.day, calendar.monthrange(y, m + 1)[1]))


def _period(unit: str, today: date, offset: int) -> tuple[date, date]:
    """The calendar ``unit`` containing ``today`` shifted by ``offset`` units (weeks start on
    Monday, ISO)."""
    if unit == "day":
        d = today + timedelta(days=offset)
        return d, d
    if unit == "week":
        start = today - timedelta(days=today.weekday()) + timedelta(weeks=offset)
        return start, start + timedelta(days=6)
    if unit == "month":
        first = _add_months(today.replace(day=1), offset)
        return first, first.replace(day=calendar.monthrange(first.year, first.month)[1])
    if unit == "quarter":
        q0 = (today.month - 1) // 3 * 3 + 1
        first = _add_months(date(today.year, q0, 1), 3 * offset)
        last = _add_months(first, 2)
        return first, last.replace(day=calendar.monthrange(last.year, last.month)[1])
    y = today.year + offset
    return date(y, 1, 1), date(y, 12, 31)


def _explicit(m: re.Match, today: date) -> tuple[date, date, str]:
    if m.group("lastn"):
        raw = m.group("n").lower()
        n = int(raw) if raw.isdigit() else _NUMBER_WORDS[raw]
        unit = _UNITS[m.group("nunit").lower()]
        if unit == "day":
            start = today - timedelta(days=n)
        elif unit == "week":
            start = today - timedelta(weeks=n)
        else:
            start = _add_months(
                today, -n * (12 if unit == "year" else 3 if unit == "quarter" else 1)
            )
        return start, today, f"from {start.isoformat()} to {today.isoformat()}"
    if m.group("rel"):
        which = m.group("which").lower()
        offset = {"this": 0, "current": 0, "last": -1, "previous": -1, "next": 1}[which]
        s, e = _period(m.group("unit").lower(), today, offset)
        return s, e, f"from {s.isoformat()} to {e.isoformat()}"
    if m.group("day"):
        offset = {"today": 0, "yesterday": -1, "tomorrow": 1}[m.group("day").lower()]
        d = today + timedelta(days=offset)
        return d, d, f"on {d.isoformat()}"
    if m.group("ytd"):
        s = date(today.year, 1, 1)
        return s, today, f"from {s.isoformat()} to {today.isoformat()}"
    return today, today, f"as of {today.isoformat()}"


def rewrite_relative_time(question: str, today: date) -> Rewritten:
    """Add explicit dates after each relative-time phrase of a question (ReBoost §3.1).

    Phrases: today / yesterday / tomorrow; this / current / last / previous / next week, month,
    quarter, year (calendar periods, weeks from Monday); (in the) last / past / previous N units;
    year to date; now / currently / at present, except before a verb of state ("who currently live
    in"). Ranges are inclusive ISO dates.

    Args:
        question: the question (natural language).
        today: the reference date, the database's ``now()::date`` in the session's time zone.

    Returns:
        ``Rewritten`` with the new question, ``today`` (ISO) and one ``Rewrite`` per phrase; the
        question unchanged, ``today`` None and no rewrites when nothing matched.
    """
    rewrites: list[Rewrite] = []
    out: list[str] = []
    pos = 0
    for m in _PATTERN.finditer(question):
        s, e, text = _explicit(m, today)
        out.append(question[pos : m.end()])
        out.append(f" ({text})")
        pos = m.end()
        rewrites.append(
            Rewrite(phrase=m.group(0), start=s.isoformat(), end=e.isoformat(), text=text)
        )
    if not rewrites:
        return Rewritten(question=question)
    out.append(question[pos:])
    return Rewritten(question="".join(out), today=today.isoformat(), rewrites=rewrites)


_ADDED = re.compile(
    r" \((?:as of|on) \d{4}-\d{2}-\d{2}\)| \(from \d{4}-\d{2}-\d{2} to \d{4}-\d{2}-\d{2}\)"
)


def original_question(question: str) -> str:
    """Undo ``rewrite_relative_time``: drop the ranges it added in parentheses (text of
    exactly that form only), e.g. to match a rewritten question against a recorded one.

    Args:
        question: a question, possibly rewritten.

    Returns:
        The question without the added ranges (unchanged when it holds none).
    """
    return _ADDED.sub("", question or "")
