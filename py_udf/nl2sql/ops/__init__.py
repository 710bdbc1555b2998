"""Operations: the reindex (schema, cell values, example pool), the DDL queue the event triggers
fill, Citus shards, and the value policy that decides which cell values may reach a model.
"""

__all__ = [
    "citus",
    "ddl_queue",
    "indexer",
    "value_policy",
]
