"""Making the embedding model files: the ONNX export of all-MiniLM-L6-v2 (checked against torch)
and its int8 quantization; the command line ``python -m nl2sql.embedding.export`` that
scripts/install.sh runs (docs/install.md)."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import EmbeddingError
from . import static
from .encode import OnnxEncoder, engine, fp32_session, get_model, model_dir, onnx_path


def quantize_onnx(src: Path | None = None, dest: Path | None = None) -> Path:
    """Write the int8 model: ``src`` quantized dynamically, weights int8 per channel (ONNX
    Runtime's ``quantize_dynamic``; needs the ``onnx`` package). ``dest`` is replaced only on
    success.

    Args:
        src: the fp32 ONNX file; default ``onnx_path("fp32")``.
        dest: the file to write; default ``onnx_path("int8")``.

    Returns:
        Path of the written file.

    Raises:
        EmbeddingError: no fp32 file, or ``onnx`` / the quantizer is missing or failed.
    """
    src, dest = Path(src or onnx_path("fp32")), Path(dest or onnx_path("int8"))
    if not src.exists():
        raise EmbeddingError(f"nl2sql: no fp32 ONNX model {src} to quantize; export it first")
    tmp = dest.with_suffix(".tmp")
    try:
        # heavy (onnx): the install step only
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(src, tmp, per_channel=True, weight_type=QuantType.QInt8)
        tmp.replace(dest)
    except Exception as e:  # onnx missing, or the quantizer failed: say how to go on
        tmp.unlink(missing_ok=True)
        raise EmbeddingError(
            f"nl2sql: int8 quantization failed ({type(e).__name__}: {e}); pip install onnx "
            "into the venv and rerun, or SELECT nl2sql.set_setting('embedding_precision', 'fp32')"
        ) from e
    return dest


def write_static(dest: Path | None = None) -> Path:
    """Write the static table of cell values (``static.distill`` of the fp32 ONNX model, ~15 s
    on 2 cores); ``dest`` is replaced only on success.

    Args:
        dest: the ``.npy`` file; default ``static.static_path(onnx_path("fp32"))``.

    Returns:
        Path of the written file.

    Raises:
        EmbeddingError: no fp32 ONNX model, or onnxruntime is missing.
    """
    # heavy: the install step only
    import numpy as np
    from tokenizers import Tokenizer

    dest = Path(dest or static.static_path(onnx_path("fp32")))
    tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    cls_id, sep_id = (tok.token_to_id(t) for t in ("[CLS]", "[SEP]"))
    table = static.distill(fp32_session(), tok.get_vocab_size(), cls_id, sep_id)
    tmp = dest.with_name(dest.name + ".tmp")
    with open(tmp, "wb") as f:
        np.save(f, table)
    tmp.replace(dest)
    return dest


def export_onnx(dest: Path | None = None, check: bool = True) -> Path:
    """Export all-MiniLM-L6-v2's transformer to ONNX for ``OnnxEncoder`` (TorchScript exporter,
    opset 17, dynamic axes; needs ``onnx``); ``dest`` is replaced only on success.

    Args:
        dest: path of the ONNX file to write; default ``onnx_path()`` (parents created).
        check: compare a few texts' vectors with torch's; discard unless every cosine ≥ 0.9999.

    Returns:
        Path of the written ONNX file.

    Raises:
        EmbeddingError: the model package is missing, the export failed, or the check failed.
    """
    dest = Path(dest or onnx_path("fp32"))
    dest.parent.mkdir(parents=True, exist_ok=True)
    model = get_model()
    hidden = _last_hidden_state(model[0].auto_model.eval())
    sample = model[0].tokenizer(["an example sentence", "two"], padding=True, return_tensors="pt")
    tmp = dest.with_suffix(".tmp")
    try:
        _export_to(hidden, sample, tmp)
        if check:
            _check_export(model, tmp)
        tmp.replace(dest)
    except EmbeddingError:
        tmp.unlink(missing_ok=True)
        raise
    except Exception as e:  # exporter or onnx package problems: say how to go on
        tmp.unlink(missing_ok=True)
        raise EmbeddingError(
            f"ONNX export failed ({e}); pip install onnx onnxruntime into "
            f"the venv, or keep using torch (nothing else is needed)"
        ) from e
    return dest


_ONNX_INPUTS = ["input_ids", "attention_mask", "token_type_ids"]


def _last_hidden_state(transformer):
    """A torch module returning the transformer's last hidden state (what ONNX exports)."""
    import torch  # heavy: the export only

    class _Hidden(torch.nn.Module):
        def __init__(self, tf):
            super().__init__()
            self.tf = tf

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.tf(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    return _Hidden(transformer)


def _export_to(hidden, sample, path: Path) -> None:
    """Export ``hidden`` to ONNX at ``path``, tracing it on the tokenized ``sample``."""
    import torch  # heavy: the export only

    with torch.inference_mode():
        torch.onnx.export(
            hidden,
            tuple(sample[n] for n in _ONNX_INPUTS),
            str(path),
            input_names=_ONNX_INPUTS,
            output_names=["last_hidden_state"],
            dynamic_axes={
                n: {0: "batch", 1: "tokens"} for n in _ONNX_INPUTS + ["last_hidden_state"]
            },
            opset_version=17,
            dynamo=False,
        )


def _check_export(model, path: Path) -> None:
    """Raise EmbeddingError unless the ONNX vectors match torch's (every cosine ≥ 0.9999)."""
    texts = [
        "How many singers do we have?",
        "USA",
        "Marvel Comics",
        "What is the average age of singers from each country? " * 3,
    ]
    got = OnnxEncoder(path, model_dir()).encode(texts)
    ref = model.encode(
        texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    worst = float((got * ref).sum(1).min())
    if worst < 0.9999:
        raise EmbeddingError(f"ONNX export differs from torch (cosine {worst:.6f})")


def main(argv: list[str] | None = None) -> int:
    """Command line ``python -m nl2sql.embedding.export [--export-onnx] [--quantize] [--static]
    [--force] [--engine]``.

    Args:
        argv: command-line arguments without the program name; None reads ``sys.argv``.

    Returns:
        The process exit status, 0.

    Raises:
        EmbeddingError: the model package is missing or the export failed.
    """
    import argparse  # the command line only, kept off the question path

    ap = argparse.ArgumentParser(prog="python -m nl2sql.embedding.export", description=main.__doc__)
    ap.add_argument("--export-onnx", action="store_true")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--quantize", action="store_true", help="write the int8 model (if missing)")
    ap.add_argument("--static", action="store_true", help="write the static value table")
    ap.add_argument("--engine", action="store_true")
    args = ap.parse_args(argv)
    if args.export_onnx:
        path = onnx_path("fp32")
        if path.exists() and not args.force:
            print(f"ONNX model present: {path}")
        else:
            print(f"ONNX model exported and checked: {export_onnx(path)}")
    if args.quantize:
        path = onnx_path("int8")
        if path.exists() and not args.force:
            print(f"int8 ONNX model present: {path}")
        else:
            print(f"int8 ONNX model written: {quantize_onnx(onnx_path('fp32'), path)}")
    if args.static:
        path = static.static_path(onnx_path("fp32"))
        if path.exists() and not args.force:
            print(f"static value table present: {path}")
        else:
            print(f"static value table written: {write_static(path)}")
    if args.engine:
        print(engine())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
