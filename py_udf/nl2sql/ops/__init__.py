"""Operations: the reindex, the DDL queue, Citus shards, the value policy
(docs/internals/ops.md)."""

__all__ = [
    "example_store",
    "index_maintenance",
    "indexer",
    "quota",
    "table_index",
    "table_state",
    "value_policy",
]
