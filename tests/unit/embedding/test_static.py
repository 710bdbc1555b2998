"""The static value table (setting ``value_embedding = 'static'``): distillation's shape, sign
rule and weights on a stand-in transformer; the embedder's vectors (unit rows, the mean of the
tokens' rows, [UNK] for a text without tokens); a single-token text equal to the transformer's
own vector before PCA; the table file written once and loaded after; value_vectors' dispatch.
The index's record and the value column's dimensions: tests/db/test_value_embedding.py."""

from __future__ import annotations

import numpy as np
import pytest

from nl2sql.core.errors import EmbeddingError
from nl2sql.core.settings import lookup
from nl2sql.embedding import encode, static, value_vectors

VOCAB = 300


class _Session:
    """A stand-in for the ONNX session: token t's three outputs are fixed random rows."""

    def __init__(self):
        self.rows = np.random.default_rng(5).normal(size=(VOCAB, 384)).astype(np.float32)
        self.calls = 0

    def run(self, _outputs, feeds):
        self.calls += 1
        ids = feeds["input_ids"]
        assert ids.shape[1] == 3 and (feeds["attention_mask"] == 1).all()
        return [self.rows[ids]]


@pytest.fixture(scope="module")
def table():
    return static.distill(_Session(), VOCAB, 1, 2)


def _expected(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Model2Vec's steps by hand: the pooled outputs, PCA components (sign rule applied) and
    the SIF weights of Zipf's law on the rank."""
    pooled = (rows[1] + rows + rows[2]) / 3  # [CLS] t [SEP], mean-pooled
    centred = pooled - pooled.mean(0)
    comps = np.linalg.svd(centred, full_matrices=False)[2][: static.DIM]
    comps *= np.sign(comps[np.arange(static.DIM), np.abs(comps).argmax(1)])[:, None]
    inv = 1.0 / np.arange(2, VOCAB + 2)
    weights = static.SIF / (static.SIF + inv / inv.sum())
    return centred @ comps.T, weights


def test_distillation_is_pca_then_sif_with_fixed_signs(table):
    assert table.shape == (VOCAB, static.DIM) and table.dtype == np.float32
    projected, weights = _expected(_Session().rows.astype(np.float64))
    assert np.allclose(table, projected * weights[:, None], atol=1e-3)
    assert weights[0] < weights[-1]  # frequent (low-rank) tokens weigh less
    assert np.array_equal(table, static.distill(_Session(), VOCAB, 1, 2))  # every run the same


@pytest.fixture(scope="module")
def embedder():
    """The real table and tokenizer of the installed model (distilled if missing: ~15 s)."""
    try:
        return value_vectors._static()
    except EmbeddingError as e:
        pytest.skip(f"no ONNX model here: {e}")


def test_vectors_are_unit_rows_of_the_table_means(embedder):
    texts = ["Marvel Comics", "Northern Star", "x"]
    got = embedder.encode(texts)
    assert got.shape == (3, static.DIM)
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
    ids = embedder.tokenizer.encode("Marvel Comics", add_special_tokens=False).ids
    want = np.asarray(embedder.table)[ids].mean(0)
    assert np.allclose(got[0], want / np.linalg.norm(want), atol=1e-5)
    assert np.allclose(embedder.encode(["MARVEL comics"])[0], got[0])  # the model is uncased


def test_a_text_without_tokens_gets_unk_not_nan(embedder):
    got = embedder.encode(["   ", ""])
    assert np.isfinite(got).all()
    unk = np.asarray(embedder.table)[embedder.unk]
    assert np.allclose(got[0], unk / np.linalg.norm(unk), atol=1e-5)


def test_the_table_file_is_written_once_and_loaded_after(tmp_path, monkeypatch):
    session = _Session()
    fp32 = tmp_path / "model.onnx"
    fp32.write_bytes(b"stand-in")
    monkeypatch.setattr(static, "_LOADED", [None])
    monkeypatch.setattr(static, "distill", lambda s, n, c, e: session.rows[:, : static.DIM])
    first = static.load(fp32, encode.model_dir(), lambda: session)
    assert static.static_path(fp32).exists()
    monkeypatch.setattr(static, "_LOADED", [None])
    monkeypatch.setattr(static, "distill", lambda *a: pytest.fail("distilled again"))
    second = static.load(fp32, encode.model_dir(), lambda: session)
    assert np.array_equal(np.asarray(first.table), np.asarray(second.table))


def test_no_table_and_no_model_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(static, "_LOADED", [None])
    with pytest.raises(EmbeddingError, match="value_embedding"):
        static.load(tmp_path / "missing.onnx", tmp_path, lambda: None)


def test_value_vectors_dispatch_by_the_recorded_embedder(monkeypatch):
    monkeypatch.setattr(value_vectors, "_CURRENT", [None])
    calls = []
    monkeypatch.setattr(encode, "embed", lambda t, **k: calls.append((t, k)) or [[0.0]] * len(t))
    assert value_vectors.embed_values(["a", "b"], bulk=True) == [[0.0], [0.0]]
    assert calls == [(["a", "b"], {"cache": False, "bulk": True})]
    assert value_vectors.dimensions(768) == 768
    value_vectors.configure(static.NAME)
    assert value_vectors.current() == static.NAME and value_vectors.dimensions(768) == static.DIM
    value_vectors.configure("")
    assert value_vectors.current() is None
    assert value_vectors.embed_values([]) == []


def test_the_setting_defaults_to_the_model():
    decl = lookup("value_embedding")
    assert decl.default == value_vectors.MODEL and set(decl.choices) == {"model", "static"}
