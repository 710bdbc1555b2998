"""From model text to executed candidates: cleaning, SQLite semantics, checks, value alignment,
execution, repair, session state."""

__all__ = [
    "alignment",
    "candidates",
    "cleaning",
    "db_checks",
    "execute",
    "explain_sql",
    "repair",
]
