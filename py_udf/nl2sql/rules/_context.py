"""What every repair rule is given (``Context``) and gives back (``Outcome``): the one signature
of ``Rule.run`` (docs/internals/generation.md "Repair")."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.types import Schema

__all__ = ["STATES", "Context", "Outcome"]

# a candidate's state as the rules read it: failed (an error, or refused, with SQL), empty (ran,
# no rows), rows (ran with rows)
STATES = ("failed", "empty", "rows")


@dataclass(frozen=True)
class Context:
    """One candidate as the rules read it, beside its SQL's parse (``Rule.run``'s ``tree``)."""

    sql: str | None  # the candidate's SQL (PostgreSQL)
    schema: Schema | None = None  # the schema it was written for (columns, keys); None: unknown
    question: str | None = None  # the user's question; None: not read
    sqlstate: str | None = None  # the SQLSTATE its execution failed with, if it failed
    state: str = "rows"  # one of ``STATES``


@dataclass(frozen=True)
class Outcome:
    """What one rule gives for a candidate: a rewrite (``sql``, with ``changes``), a finding
    (``sentence``, for the model), or both."""

    rule: str  # the rule's name (``Rule.name``)
    sql: str | None = None  # the rewritten SQL; None: no rewrite
    changes: tuple[str, ...] = ()  # what the rewrite changed, in words
    final: bool = False  # a rewrite that ends round 0 once it runs, rows or none
    sentence: str | None = None  # the problem, for the repair prompt (names only, no literal)
