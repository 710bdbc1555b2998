"""What users curate and what is built on it: verified queries and templates (their parameters,
the fast path), business terms and instructions, feedback and approved mined pairs, query-log
mining, evaluation and its scoring, and answers in words (narrate).
"""

__all__ = [
    "business",
    "evaluate",
    "fast_path",
    "feedback",
    "mining",
    "narrate",
    "verified",
]
