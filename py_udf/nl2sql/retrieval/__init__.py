"""Everything found before a model is asked, below the stages that gather it: the question,
cell values, examples, conversation turns."""

__all__ = [
    "conversation",
    "example_pool",
    "example_selection",
    "question",
    "rewriting",
    "values",
]
