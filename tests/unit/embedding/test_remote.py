"""An embedding endpoint (``embedding.remote``) against the loopback server's ``/v1/embeddings``
in OpenAI's, Ollama's and TEI's documented shapes, and every malformed reply
(``_loopback_embed.FAULTS``): good replies give unit vectors in input order, bad ones one clear
``EmbeddingError`` within the overall deadline. The loopback's vectors are NOT a model's."""

from __future__ import annotations

import math
import time

import pytest

from nl2sql.core.errors import EmbeddingError
from nl2sql.embedding import encode, remote
from nl2sql_indexer.dev import _loopback_embed
from nl2sql_indexer.dev.loopback import LoopbackLLM

TEXTS = [f"singer number {i} from Germany" for i in range(70)]


@pytest.fixture(scope="module")
def llm():
    with LoopbackLLM() as server:
        yield server


def _cfg(llm, model: str, dims: int, **kw) -> remote.EmbeddingModel:
    kw.setdefault("timeout_s", 2.0)
    return remote.EmbeddingModel("emb", llm.base_url, model, dims, **kw)


@pytest.mark.parametrize(
    "profile,dims,batch,concurrency",
    [("openai", 1536, 64, 1), ("ollama", 768, 16, 3), ("tei", 1024, 32, 2), ("openai", 8, 7, 4)],
)
def test_well_formed_replies_give_unit_vectors_in_input_order(
    llm, profile, dims, batch, concurrency
):
    model = f"{profile}-{dims}"
    _loopback_embed.set_embedding(llm, model, dims, profile)
    cfg = _cfg(llm, model, dims, batch_size=batch, concurrency=concurrency)
    got = remote.embed(cfg, TEXTS)
    assert len(got) == len(TEXTS)
    for text, vec in zip(TEXTS, got):
        assert len(vec) == dims
        assert math.isclose(math.fsum(x * x for x in vec), 1.0, rel_tol=1e-9)
        want = _loopback_embed.embed_text(text, dims)
        assert max(abs(a - b) for a, b in zip(vec, want)) < 1e-9  # this text's vector, here


def test_a_reply_out_of_order_is_put_back_in_input_order(llm):
    _loopback_embed.set_embedding(llm, "rev", 16, "openai", "reversed")
    got = remote.embed(_cfg(llm, "rev", 16), TEXTS[:5])
    for text, vec in zip(TEXTS[:5], got):
        assert vec == pytest.approx(_loopback_embed.embed_text(text, 16), abs=1e-12)


def test_tei_refuses_a_batch_over_its_limit_with_its_own_error_shape(llm):
    _loopback_embed.set_embedding(llm, "tei-big", 8, "tei")
    with pytest.raises(EmbeddingError, match="HTTP 413: batch size 64 > maximum.*lower batch_size"):
        remote.embed(_cfg(llm, "tei-big", 8, batch_size=64), TEXTS)


FAULTS = {  # fault -> what the message says
    "count": "returned 69 embeddings for 70 inputs",
    "dimension": "returned 15 dimensions, the model is declared with 16",
    "nan": "NaN",
    "error": "HTTP 500: the model failed",
    "html": "without a data list",
    "endless": "no complete answer within",
    "hang": "no complete answer within",
    "string": "not a list of numbers",
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_malformed_reply_is_one_clear_error_within_the_deadline(llm, fault):
    _loopback_embed.set_embedding(llm, f"f-{fault}", 16, "openai", fault)
    cfg = _cfg(llm, f"f-{fault}", 16, batch_size=70, timeout_s=1.0, max_retries=0)
    t0 = time.monotonic()
    with pytest.raises(EmbeddingError, match=FAULTS[fault]) as e:
        remote.embed(cfg, TEXTS)
    assert time.monotonic() - t0 < 2.0
    assert "emb" in str(e.value) and llm.base_url in str(e.value)


def test_a_declared_dimension_the_endpoint_does_not_return_is_refused(llm):
    _loopback_embed.set_embedding(llm, "d384", 384, "ollama")
    with pytest.raises(EmbeddingError, match="returned 384 dimensions"):
        remote.embed(_cfg(llm, "d384", 768), ["x"])


def test_send_dimensions_asks_openai_for_shortened_vectors(llm):
    _loopback_embed.set_embedding(llm, "te3", 1536, "openai")
    got = remote.embed(_cfg(llm, "te3", 256, send_dimensions=True), ["x", "y"])
    assert [len(v) for v in got] == [256, 256]


def test_a_missing_key_variable_is_named_and_no_key_is_shown(llm, monkeypatch):
    monkeypatch.delenv("NL2SQL_TEST_EMBED_KEY", raising=False)
    _loopback_embed.set_embedding(llm, "k", 8)
    with pytest.raises(EmbeddingError, match="NL2SQL_TEST_EMBED_KEY"):
        remote.embed(_cfg(llm, "k", 8, api_key_env="NL2SQL_TEST_EMBED_KEY"), ["x"])


def test_encode_embeds_with_the_configured_endpoint_and_caches_by_its_identity(llm):
    _loopback_embed.set_embedding(llm, "enc", 12, "openai")
    cfg = _cfg(llm, "enc", 12)
    encode.set_model(cfg)
    try:
        assert encode.current_model() == cfg.identity
        got = encode.embed(["Marvel Comics", "Marvel Comics"])
        assert got[0] == got[1] == pytest.approx(_loopback_embed.embed_text("Marvel Comics", 12))
        assert encode.to_pgvector(got[0]).count(",") == 11
        encode.set_model(EmbeddingError("the index's model was dropped"))
        with pytest.raises(EmbeddingError, match="dropped"):
            encode.embed(["something new"])
    finally:
        encode.set_model(None)
    assert encode.current_model() in encode.MODEL_NAMES.values()
