"""Choosing among candidates: vote, multiple choice, hardness, reliability, abstention."""

__all__ = [
    "abstain",
    "hardness",
    "learned_vote",
    "multiple_choice",
    "reliability",
]
