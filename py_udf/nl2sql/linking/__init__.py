"""Schema linking (PET-SQL, Li et al. 2024, §3.3) and pruning the schema to the prompt's
token budget before PreSQL."""

__all__ = [
    "names",
    "presql_reading",
    "pruning",
    "schema_linking",
]
