"""Everything found before a model is asked: the question checked and rewritten, the masked
question, cell values, the example pool and DAIL selection, earlier turns of a conversation;
what retrieval gathers for a question and what the prompts show of it.
"""

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
