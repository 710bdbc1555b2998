"""Operations: the reindex (``indexer`` drives ``table_state``, ``table_index``,
``example_store`` and ``index_maintenance``; ``_table_reader`` and ``_cell_values`` are the
table work inside ``table_index``), the DDL queue the event triggers fill, Citus shards, and the
value policy that decides which cell values may reach a model.
"""

__all__ = [
    "example_store",
    "index_maintenance",
    "indexer",
    "table_index",
    "table_state",
    "value_policy",
]
