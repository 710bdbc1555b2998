"""An embedding model at an endpoint (issue 43 part 1), end to end in one database against the
loopback server's ``/v1/embeddings`` (hashed trigrams: NOT a model's vectors): declared, chosen,
refused unless forced, a forced reindex re-embeds everything and the vector columns follow the
model's 768 dimensions; a question is embedded by the index's model (explain says which),
doctor says which answered; a changed row is refused (never compared across models); a bad
reply during a forced reindex loses nothing; back to the local model at 384."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from conftest import add_models
from nl2sql.embedding import encode, index_model
from nl2sql_indexer.dev import _loopback_embed

DB = "nl2sql_embedding_model"
MODEL = "loop-embed-768"


@pytest.fixture(scope="module")
def conn(cluster, llm):
    cluster.create_database(DB, drop=True)
    c = cluster.connect(DB)
    c.execute("CREATE TABLE harbour (hid int PRIMARY KEY, hname text, country text)")
    c.execute(
        "INSERT INTO harbour VALUES (1, 'Valletta', 'Malta'), (2, 'Kotor', 'Montenegro'), "
        "(3, 'Piraeus', 'Greece')"
    )
    c.execute("CREATE EXTENSION nl2sql CASCADE")
    c.execute("SELECT nl2sql.reindex()")
    c.execute("SELECT nl2sql.add_term('port', 'a harbour town')")
    _loopback_embed.set_embedding(llm, MODEL, 768, "ollama")
    yield c
    c.close()


def _one(c, sql: str, *args):
    return c.execute(sql, args).fetchone()[0]


def _columns(c) -> dict[str, str]:
    rows = c.execute(
        "SELECT attrelid::regclass::text, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attname = 'embedding' AND attrelid::regclass::text IN ('nl2sql.cell_value', "
        "'nl2sql.schema_column', 'nl2sql.example', 'nl2sql.term', 'nl2sql.verified_query', "
        "'nl2sql.instruction')"
    ).fetchall()
    return dict(rows)


def _doctor(c) -> dict[str, tuple[str, str]]:
    rows = c.execute('SELECT "check", status, detail FROM nl2sql.doctor()').fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def test_add_embedding_model_checks_what_it_is_given(conn, llm):
    for bad, said in [
        ("SELECT nl2sql.add_embedding_model('x', %s, 'm', 5000)", "1 to 4000"),
        ("SELECT nl2sql.add_embedding_model('local', %s, 'm', 8)", "not 'local'"),
        ("SELECT nl2sql.add_embedding_model('x', %s, 'm', 8, api_key_env => 'sk-1')", "NAME"),
    ]:
        with pytest.raises(psycopg.Error, match=said):
            conn.execute(bad, (llm.base_url,))
    with pytest.raises(psycopg.Error, match="http"):
        conn.execute("SELECT nl2sql.add_embedding_model('x', 'ftp://h/v1', 'm', 8)")


def test_an_endpoint_model_embeds_the_index_and_the_questions(conn, llm):
    conn.execute(
        "SELECT nl2sql.add_embedding_model('gpu', %s, %s, 768, batch_size => 16, "
        "concurrency => 2, timeout_s => 10)",
        (llm.base_url, MODEL),
    )
    conn.execute("SELECT nl2sql.set_setting('embedding_model', 'gpu')")
    with pytest.raises(psycopg.Error, match="embedded with all-MiniLM-L6-v2 but the settings"):
        conn.execute("SELECT nl2sql.reindex()")
    status, detail = _doctor(conn)["onnx model"]
    assert status == "warn" and MODEL in detail

    conn.execute("SELECT nl2sql.reindex(force => true)")
    identity = f"{MODEL} (768 dimensions) at {llm.base_url}"
    got = dict(conn.execute("SELECT key, value FROM nl2sql.setting WHERE key LIKE '\\_index%'"))
    assert got == {
        index_model.KEY: identity,
        index_model.ENDPOINT_KEY: "gpu",
        index_model.VALUE_KEY: "",
    }
    cols = _columns(conn)
    assert cols.pop("nl2sql.cell_value") == "halfvec(768)"
    assert set(cols.values()) == {"vector(768)"}
    assert _one(conn, "SELECT count(*) FROM nl2sql.cell_value WHERE value = 'Valletta'") == 1
    term = _one(conn, "SELECT embedding::text FROM nl2sql.term WHERE term = 'port'")
    want = _loopback_embed.embed_text("port: a harbour town", 768)
    assert [float(x) for x in term.strip("[]").split(",")] == pytest.approx(want, abs=1e-5)
    indexes = {
        r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE indexdef ~ 'hnsw'")
    }
    assert {"cell_value_embedding_hnsw", "example_embedding_hnsw"} <= indexes
    nulls = "SELECT count(*) FROM nl2sql.example WHERE embedding IS NULL"
    assert _one(conn, nulls) == 0

    status, detail = _doctor(conn)["embedding model"]
    assert status == "ok" and identity in detail and "768 dimensions" in detail
    add_models(conn, llm, ["chat"])
    llm.set_default("SELECT count(*) FROM harbour")
    sent = len(llm.embedding_requests)
    trace = _one(conn, "SELECT nl2sql.explain('How many harbours are in Malta?')")
    assert trace["embedder"]["model"] == identity
    assert any(v["value"] == "Malta" for v in trace["values"]), trace["values"]
    assert {m for m, _n in llm.embedding_requests[sent:]} == {MODEL}  # the question's texts


def test_a_changed_row_is_refused_not_compared(conn, llm):
    conn.execute("SELECT nl2sql.add_embedding_model('gpu', %s, 'other-768', 768)", (llm.base_url,))
    with pytest.raises(psycopg.Error, match="embedded with .*768 dimensions.* now other-768"):
        conn.execute("SELECT nl2sql.explain('How many harbours are in Malta?')")
    assert _doctor(conn)["embedding model"][0] == "fail"
    conn.execute("SELECT nl2sql.add_embedding_model('gpu', %s, %s, 768)", (llm.base_url, MODEL))
    assert _doctor(conn)["embedding model"][0] == "ok"


@pytest.mark.parametrize("action", ["deadline", "cancel"])
def test_a_hanging_endpoint_is_ended_by_its_deadline_or_a_cancel(conn, cluster, llm, action):
    _loopback_embed.set_embedding(llm, MODEL, 768, "ollama", "hang")  # the same identity
    timeout = 1 if action == "deadline" else 30
    conn.execute(
        "SELECT nl2sql.add_embedding_model('gpu', %s, %s, 768, timeout_s => %s)",
        (llm.base_url, MODEL, timeout),
    )
    other = cluster.connect(DB)
    pid, out = other.info.backend_pid, {}

    def ask():
        try:
            other.execute("SELECT nl2sql.explain('How many harbours are in Greece?')")
        except psycopg.Error as e:
            out["error"] = e
        out["done"] = time.monotonic()

    th = threading.Thread(target=ask, daemon=True)
    t0 = time.monotonic()
    th.start()
    try:
        if action == "cancel":
            time.sleep(1.0)
            t0 = time.monotonic()
            conn.execute("SELECT pg_cancel_backend(%s)", (pid,))
        th.join(40)
        took = out.get("done", float("inf")) - t0
        assert took < (timeout + 2.5 if action == "deadline" else 2.0), took
        if action == "cancel":
            assert out["error"].sqlstate == "57014", out["error"]
        else:
            assert "no complete answer within 1 s" in str(out["error"]), out["error"]
    finally:
        _loopback_embed.set_embedding(llm, MODEL, 768, "ollama")
        conn.execute("SELECT nl2sql.add_embedding_model('gpu', %s, %s, 768)", (llm.base_url, MODEL))
        other.close()
    assert _doctor(conn)["embedding model"][0] == "ok"  # the next call answers


@pytest.mark.parametrize("fault", ["nan", "count", "html"])
def test_a_bad_reply_during_a_forced_reindex_loses_nothing(conn, llm, fault):
    before = _one(conn, "SELECT count(*) FROM nl2sql.cell_value")
    _loopback_embed.set_embedding(llm, f"bad-{fault}", 512, "openai", fault)
    conn.execute(
        "SELECT nl2sql.add_embedding_model('bad', %s, %s, 512)", (llm.base_url, f"bad-{fault}")
    )
    conn.execute("SELECT nl2sql.set_setting('embedding_model', 'bad')")
    try:
        with pytest.raises(psycopg.Error, match="embedding model 'bad'"):
            conn.execute("SELECT nl2sql.reindex(force => true)")
    finally:
        conn.execute("SELECT nl2sql.set_setting('embedding_model', 'gpu')")
    assert _one(conn, "SELECT count(*) FROM nl2sql.cell_value") == before
    assert _columns(conn)["nl2sql.cell_value"] == "halfvec(768)"
    assert _doctor(conn)["embedding model"][0] == "ok"


def test_back_to_the_local_model(conn):
    conn.execute("SELECT nl2sql.reset_setting('embedding_model')")
    conn.execute("SELECT nl2sql.reindex(force => true)")
    assert (
        _one(conn, f"SELECT value FROM nl2sql.setting WHERE key = '{index_model.KEY}'")
        == (encode.MODEL_NAMES["fp32"])
    )
    assert set(_columns(conn).values()) == {"halfvec(384)", "vector(384)"}
    status, detail = _doctor(conn)["embedding model"]
    assert status == "ok" and "all-MiniLM-L6-v2" in detail
