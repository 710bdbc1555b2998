"""The one ordered table of repair's rules (``RULES``), as sqlglot's ``optimizer.RULES`` and
``pipeline.STAGES`` are tables: each rule's name, its ``run`` (one signature: the candidate's
shared parse and ``Context`` in, an ``Outcome`` or None out), the candidate states it applies
to, whether its finding reads what the query means, and where it came from. ``rewrite`` takes
the first rewrite in table order (repair's round 0, no model), ``finding`` the first sentence
(the problem shown to the model); both skip the rules named in ``off`` (setting ``rules_off``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from ..core.errors import ConfigError
from ..core.types import Schema
from ..linking.names import snap_names
from ._context import STATES, Context, Outcome
from ._sql import parsed_sql
from .joins import anti_joined, bridged, off_key_link, outer_bound, rehomed, unjoined
from .shape import (
    fix_by_sqlstate,
    grouped_by_key,
    repeated_output,
    self_compared_join,
    split_both,
    split_contradiction,
    ungrouped_each,
)

__all__ = ["RULES", "Rule", "finding", "rewrite", "rules_off", "shown_wrong"]


@dataclass(frozen=True)
class Rule:
    """One repair rule: ``run(tree, ctx)`` for a candidate in one of ``states``."""

    name: str  # unique; what ``rules_off`` and a repair entry's ``rule`` name
    run: Callable[[exp.Expression | None, Context], Outcome | None]
    states: frozenset[str]  # of ``STATES``: failed, empty, rows
    source: str  # where the rule came from (a benchmark's misses, a paper, an error code)
    # its finding reads the schema or the question (what the query means, whoever wrote its
    # text): looked for after a round-0 rewrite too (``finding(..., meaning=True)``)
    meaning: bool = True


def _snap_names(tree: exp.Expression | None, ctx: Context) -> Outcome | None:
    """``linking.names.snap_names`` as a rule: a failed query's unknown names snapped to the one
    real name each must have meant (it reads the SQL's text itself; it also serves the repair
    prompt's name hints, so it stays in ``linking``)."""
    fixed = snap_names(ctx.sql, ctx.schema) if ctx.schema is not None else None
    return Outcome("snap_names", fixed[0], tuple(fixed[1])) if fixed else None


_FAILED, _EMPTY, _ROWS = frozenset({"failed"}), frozenset({"empty"}), frozenset({"rows"})
_RAN = frozenset({"empty", "rows"})
_LIVE = "bench/live.py's answers of Qwen2.5-Coder-0.5B/1.5B-Instruct on Spider dev"

RULES: tuple[Rule, ...] = (
    # a failed candidate (round 0): a join not needed first, snapping its ON would only join more
    Rule("unjoined", unjoined.run, _FAILED, _LIVE),
    Rule("snap_names", _snap_names, _FAILED, f"{_LIVE}: misspelt, shortened, mis-aliased names"),
    Rule(
        "fix_by_sqlstate",
        fix_by_sqlstate.run,
        _FAILED,
        f"PostgreSQL SQLSTATE 21000, 42803; {_LIVE}",
    ),
    # what the query's own text shows (findings, the schema and question unread)
    Rule("self_compared_join", self_compared_join.run, _ROWS, _LIVE, meaning=False),
    Rule("repeated_output", repeated_output.run, _ROWS, _LIVE, meaning=False),
    # round 0's rewrites of a query that ran: an empty contradiction, the question's "both"
    Rule("split_contradiction", split_contradiction.run, _EMPTY, f"{_LIVE}; Spider's INTERSECT"),
    Rule("split_both", split_both.run, _ROWS, f"{_LIVE}; Spider's INTERSECT (Yu et al. 2018)"),
    # tables related the wrong way (rewrite and sentence, rows or empty)
    Rule("off_key_link", off_key_link.run, _RAN, f"{_LIVE}; the catalog's foreign keys"),
    Rule("bridged", bridged.run, _RAN, f"{_LIVE}; the catalog's foreign keys"),
    Rule("anti_joined", anti_joined.run, _RAN, f"{_LIVE}; the anti-join idiom"),
    Rule("rehomed", rehomed.run, _RAN, f"{_LIVE}; the catalog's foreign keys"),
    Rule("outer_bound", outer_bound.run, _RAN, f"{_LIVE}; SQL's outer references"),
    # against the schema's keys and the question's words (sentences only)
    Rule("grouped_by_key", grouped_by_key.run, _ROWS, f"{_LIVE}; the catalog's primary keys"),
    Rule("ungrouped_each", ungrouped_each.run, _ROWS, f"{_LIVE}; Spider dev's 68 'each' questions"),
    # split_both's sentence: last among the findings, where its rewrite is first in round 0
    Rule(
        "split_both_said", split_both.said, _ROWS, f"{_LIVE}; Spider's INTERSECT (Yu et al. 2018)"
    ),
)

if len({r.name for r in RULES}) != len(RULES) or any(not r.states <= set(STATES) for r in RULES):
    raise ConfigError("rules.RULES: a name twice, or a state that is none of failed/empty/rows")


def _outcomes(ctx: Context, off: frozenset[str], meaning: bool = False):
    """Each rule's outcome for ``ctx``, in table order (those in ``off``, not for its state, or
    without ``meaning`` when it is asked, skipped; None outcomes left out)."""
    tree = parsed_sql(ctx.sql)
    for rule in RULES:
        if ctx.state in rule.states and rule.name not in off and (rule.meaning or not meaning):
            found = rule.run(tree, ctx)
            if found is not None:
                yield found


def rewrite(ctx: Context, off: frozenset[str] = frozenset()) -> Outcome | None:
    """The first rewrite in table order for the candidate's state (repair's round 0).

    Args:
        ctx: the candidate (its SQL, schema, question, SQLSTATE and state).
        off: rule names to skip (setting ``rules_off``).

    Returns:
        The first outcome with ``sql``, or None when no rule rewrites it.
    """
    return next((o for o in _outcomes(ctx, off) if o.sql is not None), None)


def finding(
    ctx: Context, off: frozenset[str] = frozenset(), meaning: bool = False
) -> Outcome | None:
    """The first finding in table order for the candidate's state (the repair prompt's problem).

    Args:
        ctx: the candidate (its SQL, schema, question and state).
        off: rule names to skip (setting ``rules_off``).
        meaning: only the rules whose finding reads the schema or the question (``Rule.meaning``:
            what the query means, whoever wrote its text, as after a round-0 rewrite).

    Returns:
        The first outcome with a ``sentence``, or None when no rule finds anything.
    """
    return next((o for o in _outcomes(ctx, off, meaning) if o.sentence is not None), None)


def rules_off(text: str | None) -> frozenset[str]:
    """Read setting ``rules_off``: the rules repair skips (ablation: bench/live.py).

    Args:
        text: comma-separated names of ``RULES``' entries; empty or None for none.

    Returns:
        The names.

    Raises:
        ConfigError: a name that is no rule's, naming the known ones.
    """
    names = frozenset(n.strip() for n in (text or "").split(",") if n.strip())
    unknown = sorted(names - {r.name for r in RULES})
    if unknown:
        raise ConfigError(
            f"setting 'rules_off': unknown rule(s) {', '.join(unknown)}; the rules are "
            f"{', '.join(r.name for r in RULES)}"
        )
    return names


def shown_wrong(
    sql: str | None, schema: Schema | None = None, question: str | None = None
) -> str | None:
    """What a query that ran with rows shows wrong in its own text (and, given them, against the
    schema's keys and the question's words): the first finding for a result with rows (bench/
    live.py's ``went_to_repair``). No sentence quotes a literal (it may be an aligned cell value).

    Args:
        sql: the candidate's SQL (PostgreSQL), or None.
        schema: the schema the candidate was written for (its keys), or None.
        question: the user's question, or None.

    Returns:
        One sentence on the problem, or None when the text shows none.
    """
    found = finding(Context(sql, schema, question, state="rows"))
    return found.sentence if found is not None else None
