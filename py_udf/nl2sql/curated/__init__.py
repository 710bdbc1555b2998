"""What users curate and what is built on it: verified queries and templates, the fast path,
business context, feedback and mining, evaluation, narrate."""

__all__ = [
    "business",
    "evaluate",
    "fast_path",
    "feedback",
    "mining",
    "narrate",
    "verified",
]
