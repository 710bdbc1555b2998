"""A static embedding of all-MiniLM-L6-v2 for cell values: one vector per vocabulary token,
distilled once from the ONNX model, a text's vector the mean of its tokens' vectors
(docs/embedding-models.md "Cell values"). Source: Model2Vec (Tulkens & van Dongen 2024): each
token's output embedding from the transformer, PCA, then Zipf-estimated SIF weights.

A cell value is a few words with no sentence around them, which a transformer's context adds
little to; the static table embeds ~30,000 of them a second on one core where the transformer
embeds ~1,000 (docs/benchmarks.md "Indexing at scale")."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..core.errors import EmbeddingError

__all__ = ["DIM", "NAME", "StaticEmbedder", "distill", "load", "static_path"]

DIM = 128  # PCA components kept (Model2Vec keeps 256; 128 lost 1 of 300 lookups, docs)
NAME = "all-MiniLM-L6-v2-static128"  # what the index records (index_model.VALUE_KEY)
FILE = "all-MiniLM-L6-v2.static128.npy"
SIF = 1e-4  # Model2Vec's sif_coefficient
MAX_TOKENS = 256  # as the transformer cuts a text
_BATCH = 2048  # vocabulary tokens per distillation run
_LOADED: list = [None]
_LOCK = threading.Lock()


def static_path(onnx_fp32: Path) -> Path:
    """The static table's file beside the fp32 ONNX model it is distilled from.

    Args:
        onnx_fp32: the fp32 ONNX file (``encode.onnx_path("fp32")``).

    Returns:
        ``<its directory>/all-MiniLM-L6-v2.static128.npy``.
    """
    return Path(onnx_fp32).with_name(FILE)


def distill(session, vocab_size: int, cls_id: int, sep_id: int):
    """The static table: every vocabulary token alone (``[CLS] token [SEP]``) through the
    transformer, its three outputs mean-pooled, reduced by PCA to ``DIM`` components (signs
    fixed: each component's largest coordinate positive, so that every machine gets the same
    table) and weighted by SIF under Zipf's law on the token's rank.

    Args:
        session: an ONNX Runtime session of the fp32 model (``OnnxEncoder.session``).
        vocab_size: the tokenizer's vocabulary size (30,522).
        cls_id, sep_id: the ids of ``[CLS]`` and ``[SEP]``.

    Returns:
        numpy float32 array (vocab_size, DIM).
    """
    import numpy as np  # heavy: the indexer only

    ids = np.arange(vocab_size, dtype=np.int64)
    out = np.empty((vocab_size, 384), dtype=np.float32)
    for i in range(0, vocab_size, _BATCH):
        b = ids[i : i + _BATCH]
        seq = np.stack([np.full_like(b, cls_id), b, np.full_like(b, sep_id)], axis=1)
        ones = np.ones_like(seq)
        hidden = session.run(
            None, {"input_ids": seq, "attention_mask": ones, "token_type_ids": np.zeros_like(seq)}
        )[0]
        out[i : i + len(b)] = hidden.mean(axis=1)
    centred = out - out.mean(axis=0)
    _u, _s, vt = np.linalg.svd(centred, full_matrices=False)
    comps = vt[:DIM]
    comps *= np.sign(comps[np.arange(DIM), np.abs(comps).argmax(axis=1)])[:, None]
    table = centred @ comps.T
    inv_rank = 1.0 / np.arange(2, vocab_size + 2)
    proba = inv_rank / inv_rank.sum()
    return (table * (SIF / (SIF + proba))[:, None]).astype(np.float32)


class StaticEmbedder:
    """Texts to unit vectors by the static table (``distill``), with the model's tokenizer.

    Args:
        table: float32 array (vocabulary, DIM).
        tokenizer_file: the model's ``tokenizer.json``.
    """

    def __init__(self, table, tokenizer_file: Path):
        from tokenizers import Tokenizer  # heavy: loaded on first use

        self.table = table
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.unk = self.tokenizer.token_to_id("[UNK]") or 0

    def encode(self, texts: list[str]):
        """Embed texts: the mean of their tokens' rows, L2-normalised (a text with no token,
        e.g. only spaces, gets ``[UNK]``'s).

        Args:
            texts: the texts (cut at 256 tokens each).

        Returns:
            numpy float32 array (len(texts), DIM), unit rows, in input order.
        """
        import numpy as np  # heavy: the indexer only

        enc = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        lens = np.array([max(1, len(e.ids)) for e in enc])
        flat = np.fromiter(
            (i for e in enc for i in (e.ids or [self.unk])), dtype=np.int64, count=int(lens.sum())
        )
        rows = np.repeat(np.arange(len(enc)), lens)
        out = np.zeros((len(enc), self.table.shape[1]), dtype=np.float32)
        np.add.at(out, rows, self.table[flat])
        return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)


def load(onnx_fp32: Path, model_files: Path, session_of) -> StaticEmbedder:
    """This process's static embedder: the table read from ``static_path`` (memory-mapped, shared
    by the backends through the page cache), else distilled now (~15 s) and written there when
    the directory is writable.

    Args:
        onnx_fp32: the fp32 ONNX file.
        model_files: the directory of ``tokenizer.json``.
        session_of: called with no arguments, returns the fp32 ONNX Runtime session (only
            when the table must be distilled).

    Returns:
        The StaticEmbedder (kept for the process).

    Raises:
        EmbeddingError: no table and no fp32 model to distil it from.
    """
    with _LOCK:
        if _LOADED[0] is not None:
            return _LOADED[0]
        import numpy as np  # heavy: the indexer only

        path = static_path(onnx_fp32)
        if path.exists():
            table = np.load(path, mmap_mode="r")
        elif Path(onnx_fp32).exists():
            from tokenizers import Tokenizer  # heavy: only when the table must be distilled

            tok = Tokenizer.from_file(str(model_files / "tokenizer.json"))
            ids = [tok.token_to_id(t) for t in ("[CLS]", "[SEP]")]
            table = distill(session_of(), tok.get_vocab_size(), ids[0], ids[1])
            _save(path, table)
        else:
            raise EmbeddingError(
                f"nl2sql: no static value table {path} and no ONNX model {onnx_fp32} to distil "
                "it from; run scripts/install.sh, or SELECT nl2sql.set_setting("
                "'value_embedding', 'model') and reindex(force => true)"
            )
        _LOADED[0] = StaticEmbedder(table, model_files / "tokenizer.json")
        return _LOADED[0]


def _save(path: Path, table) -> None:
    """Write the table atomically where the directory allows; else keep it in memory only."""
    import numpy as np  # heavy: the indexer only

    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.save(f, table)
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)
