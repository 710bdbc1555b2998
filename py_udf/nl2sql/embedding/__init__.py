"""Embeddings: all-MiniLM-L6-v2 on ONNX Runtime (``encode``), the backend's client of the shared
embedding process (``client``) and that process (``server``: embeddings and relayed model calls).
"""

__all__ = [
    "client",
    "encode",
]
