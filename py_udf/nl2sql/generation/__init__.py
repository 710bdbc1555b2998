"""From model text to executed candidates: cleaning, SQLite semantics, the read-only and privilege
checks, value alignment, time-limited execution, repair rounds, and the session state a candidate
could leave behind.
"""

__all__ = [
    "alignment",
    "candidates",
    "cleaning",
    "db_checks",
    "execute",
    "repair",
]
