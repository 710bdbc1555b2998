"""Embeddings: ``encode`` (the model), ``client`` and ``_server`` (the shared process)."""

__all__ = [
    "client",
    "encode",
]
