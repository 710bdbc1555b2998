"""Choosing among candidates: vote, multiple choice, hardness, reliability, abstention."""

__all__ = [
    "abstain",
    "consensus",
    "hardness",
    "learned_vote",
    "multiple_choice",
    "reliability",
]
