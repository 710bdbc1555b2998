"""Choosing among candidates: vote, multiple choice, the judge, hardness, reliability, abstention."""

__all__ = [
    "abstain",
    "consensus",
    "hardness",
    "judge",
    "learned_vote",
    "multiple_choice",
    "reliability",
]
