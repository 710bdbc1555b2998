"""Everything found before a model is asked: question, masking, cell values, examples,
conversation turns, and what the prompts show of it."""

__all__ = [
    "conversation",
    "example_pool",
    "example_selection",
    "gather",
    "masking",
    "prompt_parts",
    "question",
    "rewriting",
    "values",
]
