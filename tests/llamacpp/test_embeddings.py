"""nl2sql's embedding endpoint (``embedding.remote``, issue 43 part 1) against llama.cpp's real
``llama-server --embeddings`` (Gemma 3 270M with mean pooling: no embedding GGUF is packaged in
the registries this project installs from, so this checks the PROTOCOL — shapes, order, batches,
dimensions — never retrieval quality), then end to end in the database: a forced reindex with
it, a question, doctor and explain."""

from __future__ import annotations

import math

import pytest

from nl2sql.core.errors import EmbeddingError
from nl2sql.embedding import remote

DB = "nl2sql_llamacpp_embed"
TEXTS = ["Valletta", "How many harbours are in Malta?", "Kotor", "a harbour town", "Piraeus"]


def _dims(server) -> int:
    status, body = server.request("POST", "/v1/embeddings", {"input": "x", "model": "gemma"})
    assert status == 200, body
    return len(body["data"][0]["embedding"])


def _cos(a, b) -> float:
    return math.fsum(x * y for x, y in zip(a, b))


def test_the_real_server_answers_in_openai_shape_in_input_order(llama_server_embeddings):
    server = llama_server_embeddings
    n = _dims(server)
    cfg = remote.EmbeddingModel(
        "llama", server.base_url, "gemma-3-270m", n, batch_size=2, concurrency=2, timeout_s=120
    )
    together = remote.embed(cfg, TEXTS)
    assert [len(v) for v in together] == [n] * len(TEXTS)
    for i, text in enumerate(TEXTS):  # the batch kept each text's place: alone, a text's
        alone = remote.embed(cfg, [text])[0]  # vector is nearest its own (batches differ ~1e-3)
        sims = [_cos(alone, v) for v in together]
        assert max(range(len(sims)), key=sims.__getitem__) == i, (text, sims)


def test_a_wrong_declared_dimension_is_refused(llama_server_embeddings):
    server = llama_server_embeddings
    n = _dims(server)
    cfg = remote.EmbeddingModel("llama", server.base_url, "gemma-3-270m", n + 1, timeout_s=60)
    with pytest.raises(EmbeddingError, match=f"returned {n} dimensions, the model is declared"):
        remote.embed(cfg, ["Valletta"])


@pytest.fixture(scope="module")
def embed_db(llama_server_embeddings, cluster):
    cluster.create_database(DB, drop=True)
    c = cluster.connect(DB)
    c.execute("CREATE TABLE harbour (hid int PRIMARY KEY, hname text, country text)")
    c.execute(
        "INSERT INTO harbour VALUES (1, 'Valletta', 'Malta'), (2, 'Kotor', 'Montenegro'), "
        "(3, 'Piraeus', 'Greece')"
    )
    c.execute("CREATE EXTENSION nl2sql CASCADE")
    yield c
    c.close()


def test_index_question_doctor_explain_with_llama_server(
    embed_db, llama_server_embeddings, llama_server
):
    server, c = llama_server_embeddings, embed_db
    n = _dims(server)
    c.execute(
        "SELECT nl2sql.add_embedding_model('llama', %s, 'gemma-3-270m', %s, batch_size => 16, "
        "timeout_s => 120)",
        (server.base_url, n),
    )
    c.execute("SELECT nl2sql.set_setting('embedding_model', 'llama')")
    c.execute("SELECT nl2sql.reindex(force => true)")
    typ = c.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'nl2sql.cell_value'::regclass AND attname = 'embedding'"
    ).fetchone()[0]
    assert typ == f"halfvec({n})"
    assert c.execute("SELECT count(*) FROM nl2sql.cell_value").fetchone()[0] >= 6
    identity = f"gemma-3-270m ({n} dimensions) at {server.base_url}"
    doctor = {r[0]: r[1:] for r in c.execute('SELECT "check", status, detail FROM nl2sql.doctor()')}
    assert doctor["embedding model"][0] == "ok" and identity in doctor["embedding model"][1]
    c.execute(
        "SELECT nl2sql.add_model('gemma', 'gemma-3-270m', base_url => %s, timeout_s => 180, "
        "max_tokens => 48)",
        (llama_server.base_url,),
    )
    # what is asked of the question is where its embedding came from: a base model's failed
    # SQL repaired would only add its rounds' time
    c.execute("SELECT nl2sql.set_setting('repair_rounds', '0')")
    trace = c.execute("SELECT nl2sql.explain('How many harbours are in Malta?')").fetchone()[0]
    assert trace["embedder"]["model"] == identity  # the question was embedded by llama-server
    assert any(v["value"] == "Malta" for v in trace["values"]), trace["values"]
