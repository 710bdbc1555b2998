"""Everything found before a model is asked: the question checked and rewritten, the masked
question, cell values, the example pool and DAIL selection, schema linking, earlier turns of a
conversation, and the retrieval stages as the pipeline runs them.
"""

__all__ = [
    "context",
    "conversation",
    "example_pool",
    "example_selection",
    "linking",
    "masking",
    "question",
    "rewriting",
    "values",
]
