"""One rule of ``rules.RULES`` applied to SQL text, as repair applies it: the tests' one door."""

from __future__ import annotations

from nl2sql.rules import RULES, Context, Outcome, finding
from nl2sql.rules._sql import parsed_sql

BY_NAME = {r.name: r for r in RULES}


def apply(name, sql, schema=None, question=None, sqlstate=None, state="rows") -> Outcome | None:
    """Rule ``name``'s outcome for a candidate with ``sql`` in ``state``."""
    ctx = Context(sql, schema, question, sqlstate, state)
    assert state in BY_NAME[name].states, f"{name} is not for {state}"
    out = BY_NAME[name].run(parsed_sql(sql), ctx)
    assert out is None or out.rule == name
    return out


def said(sql, schema=None, question=None, state="rows") -> str | None:
    """The table's first finding's sentence for a candidate (``rules.finding``)."""
    found = finding(Context(sql, schema, question, state=state))
    return found.sentence if found else None
