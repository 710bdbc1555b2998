"""What users curate and what is built on it: verified queries and templates, business terms and
instructions, query-log mining, evaluation, and answers in words (narrate).
"""

__all__ = [
    "business",
    "evaluate",
    "mining",
    "narrate",
    "verified",
]
