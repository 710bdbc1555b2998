"""Setting embedding_precision (issue 33): declared once, the model file each precision loads,
the int8 file made by quantization (skipped without ``onnx``), a missing int8 file a clear
error, the shared process serving both model names. The index's record: tests/db."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from nl2sql.core.errors import EmbeddingError
from nl2sql.core.settings import lookup
from nl2sql.embedding import _server, encode, export, index_model


@pytest.fixture
def fresh(monkeypatch):
    """No encoder loaded and no precision chosen in this process."""
    monkeypatch.setattr(encode, "_ONNX", {})
    monkeypatch.setattr(encode, "_PRECISION", [None])
    monkeypatch.delenv("NL2SQL_EMBEDDING_PRECISION", raising=False)


def test_the_setting_is_declared_with_both_precisions():
    decl = lookup("embedding_precision")
    assert set(decl.choices) == set(encode.FILES) == set(encode.MODEL_NAMES)
    assert decl.default in decl.choices
    with pytest.raises(Exception, match="unknown setting"):
        lookup(index_model.KEY)  # the record is not a setting a user could set


def test_each_precision_names_its_own_file(fresh, monkeypatch, tmp_path):
    monkeypatch.setenv("NL2SQL_ONNX_MODEL", str(tmp_path / "m.onnx"))
    assert encode.onnx_path("fp32") == tmp_path / "m.onnx"
    assert encode.onnx_path("int8") == tmp_path / "m.int8.onnx"
    encode.set_precision("int8")
    assert encode.precision() == "int8" and encode.onnx_path() == tmp_path / "m.int8.onnx"
    encode.set_precision(None)
    monkeypatch.setenv("NL2SQL_EMBEDDING_PRECISION", "int8")
    assert encode.precision() == "int8"
    monkeypatch.setenv("NL2SQL_EMBEDDING_PRECISION", "fp16")
    assert encode.precision() == lookup("embedding_precision").default
    with pytest.raises(EmbeddingError, match="^nl2sql: unknown embedding precision"):
        encode.set_precision("fp16")


def test_a_missing_int8_file_is_a_clear_error(fresh, monkeypatch, tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"fp32 file")
    monkeypatch.setenv("NL2SQL_ONNX_MODEL", str(tmp_path / "m.onnx"))
    with pytest.raises(EmbeddingError, match="^nl2sql: no int8 embedding model.*--quantize"):
        encode.embed(["USA"], prec="int8", cache=False)


def test_record_names_map_back_to_their_precision():
    for prec, name in encode.MODEL_NAMES.items():
        assert index_model.precision_of(name) == prec
    assert index_model.precision_of(None) == "fp32"  # indexes made before the setting existed


@pytest.mark.skipif(not importlib.util.find_spec("onnx"), reason="no onnx package: no quantizer")
def test_quantize_writes_an_int8_model_close_to_fp32(fresh, tmp_path):
    src = encode.onnx_path("fp32")
    if not src.exists():
        pytest.skip("no fp32 model file: scripts/install.sh exports it")
    out = export.quantize_onnx(src, tmp_path / "q.onnx")
    assert out.exists() and not (tmp_path / "q.tmp").exists()
    assert out.stat().st_size < src.stat().st_size / 2  # int8 weights
    texts = ["Marvel Comics", "USA", "How many singers do we have?"]
    ref = encode.OnnxEncoder(src, encode.model_dir()).encode(texts)
    got = encode.OnnxEncoder(out, encode.model_dir()).encode(texts)
    cos = (ref * got).sum(1)
    assert np.all(cos > 0.9) and not np.allclose(ref, got)


def test_quantize_without_a_source_says_so(tmp_path):
    with pytest.raises(EmbeddingError, match="^nl2sql: no fp32 ONNX model"):
        export.quantize_onnx(tmp_path / "none.onnx", tmp_path / "q.onnx")


def test_the_shared_process_serves_both_model_names():
    for name in encode.MODEL_NAMES.values():
        assert _server._embeddings_problem(["USA"], name) is None
    assert "unknown model" in _server._embeddings_problem(["USA"], "other-model")
