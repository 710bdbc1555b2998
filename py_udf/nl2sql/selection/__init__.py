"""Choosing among candidates: result signatures and the vote, MCS-SQL multiple choice, Spider
hardness, learned per-model reliability, clarify-or-abstain.
"""

__all__ = [
    "abstain",
    "hardness",
    "learned_vote",
    "multiple_choice",
    "reliability",
    "vote",
]
