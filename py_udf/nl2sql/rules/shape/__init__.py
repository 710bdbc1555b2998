"""Repair rules on what a query's own shape shows: a join condition comparing a column with
itself, an output named twice, a WHERE no row satisfies, either value where the question asks
for both, counts over groups of one row, one row where it asks for each, and a failed query's
error read for its one reading. One rule a module; ``rules.RULES`` orders them."""

__all__ = [
    "fix_by_sqlstate",
    "grouped_by_key",
    "repeated_output",
    "self_compared_join",
    "split_both",
    "split_contradiction",
    "ungrouped_each",
]
