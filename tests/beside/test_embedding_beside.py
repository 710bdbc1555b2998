"""An embedding model at an endpoint beside the database (issue 43 part 1): nl2sql installed
without PL/Python, the client reindexes with the loopback's ``/v1/embeddings`` at 768
dimensions (NOT a model's vectors), the columns follow, questions are embedded by that endpoint
from this process, explain and doctor say which model answered; back to the local model."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

import nl2sql

if not (Path(__file__).parent / "conftest.py").exists():
    pytest.skip("tests/beside/conftest.py (nl2sql install) is not merged", allow_module_level=True)

from conftest import add_models
from nl2sql.embedding import encode
from nl2sql_indexer.dev import _loopback_embed
from nl2sql_indexer.dev.demo_data import demo_sql

MODEL = "beside-embed-768"


def _type(c) -> str:
    return c.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'nl2sql.cell_value'::regclass AND attname = 'embedding'"
    ).fetchone()[0]


def test_an_endpoint_embeds_index_and_questions_beside_the_database(installed, llm):
    llm.clear()
    _loopback_embed.set_embedding(llm, MODEL, 768, "openai")
    with psycopg.connect(installed.dsn, autocommit=True) as c:
        c.execute(demo_sql())
        c.execute(
            "SELECT nl2sql.add_embedding_model('beside', %s, %s, 768, batch_size => 32)",
            (llm.base_url, MODEL),
        )
        c.execute("SELECT nl2sql.set_setting('embedding_model', 'beside')")
        add_models(c, llm, ["beside-m1"])
    llm.set_default("SELECT count(*) FROM singer")
    identity = f"{MODEL} (768 dimensions) at {llm.base_url}"
    try:
        with nl2sql.connect(installed.dsn) as client:
            counts = client.reindex(force=True)
            assert counts["values_embedded"] > 0
            sent = len(llm.embedding_requests)
            trace = client.explain("How many singers are there?")
            assert trace["embedder"]["model"] == identity
            assert {m for m, _n in llm.embedding_requests[sent:]} == {MODEL}
            doctor = {d["check"]: d for d in client.doctor()}
            assert doctor["embedding model"]["status"] == "ok", doctor["embedding model"]
            assert identity in doctor["embedding model"]["detail"]
        with psycopg.connect(installed.dsn) as c:
            assert _type(c) == "halfvec(768)"
            assert c.execute("SELECT count(*) FROM nl2sql.visible_cell_value").fetchone()[0] > 0
    finally:
        with psycopg.connect(installed.dsn, autocommit=True) as c:
            c.execute("SELECT nl2sql.reset_setting('embedding_model')")
        with nl2sql.connect(installed.dsn) as client:
            client.reindex(force=True)
        encode.set_model(None)
    with psycopg.connect(installed.dsn) as c:
        assert _type(c) == "halfvec(384)"
