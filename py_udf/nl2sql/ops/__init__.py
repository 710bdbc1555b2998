"""Operations: the reindex, the DDL queue, Citus shards, the value policy
(docs/internals/ops.md)."""

__all__ = [
    "doctor",
    "example_store",
    "index_maintenance",
    "indexer",
    "table_index",
    "table_state",
    "value_policy",
]
