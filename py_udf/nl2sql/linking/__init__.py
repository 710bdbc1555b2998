"""Schema linking (PET-SQL, Li et al. 2024, §3.3): the tables and columns a question needs, from
what the PreSQL reads, matched cell values, similar columns and the FK bridges between them; and
pruning the schema to the prompt's token budget before PreSQL.
"""

__all__ = [
    "presql_reading",
    "pruning",
    "schema_linking",
]
