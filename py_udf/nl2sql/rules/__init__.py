"""Repair's rules (docs/internals/generation.md "Repair"), one rule a module, ordered by one
table: ``RULES`` (``_table``), each rule's ``run(tree, ctx)`` giving a rewrite for round 0 (no
model), a finding for the model, or both. ``rewrite`` and ``finding`` walk the table; ``Context``
and ``Outcome`` are what a rule reads and gives. The rules read the SQL, the schema and the
question: this floor imports only ``core``, ``linking`` and sqlglot. ``joins``: how a query
relates its tables; ``shape``: what its own shape shows."""

from ._context import STATES, Context, Outcome
from ._table import RULES, Rule, finding, rewrite, rules_off, shown_wrong

__all__ = [
    "RULES",
    "STATES",
    "Context",
    "Outcome",
    "Rule",
    "finding",
    "joins",
    "rewrite",
    "rules_off",
    "shape",
    "shown_wrong",
]
