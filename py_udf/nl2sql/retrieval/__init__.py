"""Everything found before a model is asked: the question checked and rewritten, the masked
question, cell values, the example pool and DAIL selection, schema pruning and linking (what
PreSQL reads, the join graph), earlier turns of a conversation, and the retrieval stages as the
pipeline runs them.
"""

__all__ = [
    "context",
    "conversation",
    "example_pool",
    "example_selection",
    "linking",
    "masking",
    "presql_reading",
    "pruning",
    "question",
    "rewriting",
    "schema_graph",
    "values",
]
