"""The shared embedding process on its own (nl2sql.embedding._server, started by hand for a
stand-in postmaster): it answers the OpenAI embeddings API with the in-process engine's vectors,
refuses bad requests, exits with its postmaster and relays model calls (keys redacted); the
backend's relay client keeps the gate and falls back only when nothing was sent.
tests/db/test_shared_embedder.py runs it under a real postmaster."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from conftest import (
    EMBEDDING_TEXTS,
    ROOT,
    TEST_API_KEY,
    TEST_KEY_ENV,
    cosines,
    embedding_client,
    embeddings_of,
)
from nl2sql.embedding import encode as embed


@pytest.fixture
def service(tmp_path):
    """An embedding process started by hand in a private folder, for a stand-in postmaster
    (a ``sleep`` process)."""
    d = tmp_path / "emb"
    d.mkdir(mode=0o700)
    fake_postmaster = subprocess.Popen(["sleep", "300"])
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "py_udf"),
        TEST_KEY_ENV: TEST_API_KEY,
    }  # as the server's environment would hold it
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nl2sql.embedding._server",
            "--dir",
            str(d),
            "--postmaster-pid",
            str(fake_postmaster.pid),
        ],
        env=env,
    )
    deadline = time.monotonic() + 60
    while not (d / "embed.sock").exists() and time.monotonic() < deadline:
        assert proc.poll() is None, "the embedding process exited while starting"
        time.sleep(0.05)
    yield d, proc, fake_postmaster
    for p in (proc, fake_postmaster):
        if p.poll() is None:
            p.kill()
            p.wait()


def test_service_answers_with_the_in_process_vectors(service):
    d, proc, _ = service
    assert (d / "embed.sock").stat().st_mode & 0o777 == 0o600
    assert int((d / "embedder.pid").read_text()) == proc.pid
    got = embeddings_of(str(d / "embed.sock"), EMBEDDING_TEXTS)
    ref = embed.embed(EMBEDDING_TEXTS, cache=False)
    assert len(got) == len(EMBEDDING_TEXTS) and all(len(v) == embed.DIM for v in got)
    assert min(cosines(got, ref)) >= 0.9999
    # float encoding and a single string, as the OpenAI API allows
    one = embedding_client(str(d / "embed.sock")).embeddings.create(
        input="France", model="all-MiniLM-L6-v2", encoding_format="float"
    )
    assert min(cosines([one.data[0].embedding], [ref[1]])) >= 0.9999


def test_service_refuses_bad_requests(service):
    import openai

    d, _, _ = service
    with pytest.raises(openai.BadRequestError, match="unknown model"):
        embedding_client(str(d / "embed.sock")).embeddings.create(input=["x"], model="gpt-x")
    with pytest.raises(openai.BadRequestError, match="1 to"):
        embedding_client(str(d / "embed.sock")).embeddings.create(
            input=[], model="all-MiniLM-L6-v2"
        )


def test_service_exits_with_its_postmaster(service):
    d, proc, fake_postmaster = service
    fake_postmaster.kill()
    fake_postmaster.wait()
    assert proc.wait(timeout=15) == 0
    assert not (d / "embed.sock").exists()


def _relay(sock: str, payload: dict):
    import httpx2

    with httpx2.Client(
        transport=httpx2.HTTPTransport(uds=sock), base_url="http://embedder", timeout=30
    ) as c:
        return c.post("/nl2sql/v1/chat", json=payload)


def _chat(model: str, base_url: str, **cfg) -> dict:
    from dataclasses import asdict

    from nl2sql.core.types import ModelConfig

    return {
        "config": asdict(
            ModelConfig(
                name=model, model=model, base_url=base_url, timeout_s=5, max_retries=0, **cfg
            )
        ),
        "messages": [{"role": "user", "content": "How many singers do we have?"}],
        "timeout_s": 5,
        "n": 1,
        "temperature": None,
    }


def test_service_relays_model_calls_and_redacts_echoed_keys(service, llm):
    from nl2sql_indexer.dev.loopback import Rule

    d, _, _ = service
    sock = str(d / "embed.sock")
    llm.add_rule(Rule(model="relay-ok", response="SELECT count(*) FROM singer"))
    got = _relay(sock, _chat("relay-ok", llm.base_url)).json()
    assert got["text"] == "SELECT count(*) FROM singer" and got["error"] is None
    assert got["model"] == "relay-ok" and got["choices"] == [got["text"]]
    # the key is read from the process's environment; an endpoint echoing it is redacted
    llm.add_rule(
        Rule(model="relay-401", status=401, response=f"Incorrect API key provided: {TEST_API_KEY}.")
    )
    got = _relay(sock, _chat("relay-401", llm.base_url, api_key_env=TEST_KEY_ENV)).json()
    assert got["text"] is None and "HTTP 401" in got["error"]
    assert TEST_API_KEY not in got["error"] and "[REDACTED]" in got["error"]
    # a key variable the server's environment lacks is named, and nothing is sent
    before = len(llm.requests)
    got = _relay(sock, _chat("relay-ok", llm.base_url, api_key_env="NL2SQL_TEST_UNSET_KEY"))
    assert "NL2SQL_TEST_UNSET_KEY is not set" in got.json()["error"]
    assert len(llm.requests) == before
    # malformed requests are refused before any model call
    bad_cfg = {**_chat("relay-ok", llm.base_url), "config": {"name": "x", "bogus": 1}}
    assert _relay(sock, bad_cfg).status_code == 400
    no_msgs = {**_chat("relay-ok", llm.base_url), "messages": []}
    assert _relay(sock, no_msgs).status_code == 400
    assert len(llm.requests) == before


def test_relay_keeps_the_gate_and_falls_back_only_when_nothing_was_sent(monkeypatch, llm):
    from nl2sql.core.errors import EmbedderUnavailable, GateError
    from nl2sql.core.types import ModelConfig
    from nl2sql.embedding import client as embed_client
    from nl2sql.model import llm as llm_mod
    from nl2sql.model.gate import open_gate
    from nl2sql_indexer.dev.loopback import Rule

    sent: list[dict] = []

    def relay(payload, deadline_s):
        sent.append(payload)
        return None  # "not running": the call is made in this process

    monkeypatch.setattr(embed_client, "relay_chat", relay)
    cfg = ModelConfig(
        name="fb", model="relay-fb", base_url=llm.base_url, timeout_s=5, max_retries=0
    )
    with pytest.raises(GateError):
        llm_mod.call_model(cfg, [{"role": "user", "content": "q"}])
    assert sent == []  # refused before the relay was asked
    llm.add_rule(Rule(model="relay-fb", response="SELECT 1"))
    reply = llm_mod.call_model(cfg, open_gate().seal("test", "q"))
    assert reply.text == "SELECT 1" and len(sent) == 1
    assert sent[0]["messages"][-1]["content"] == "q" and sent[0]["config"]["model"] == "relay-fb"

    def broken(payload, deadline_s):  # sent, then no usable reply: no second call
        raise EmbedderUnavailable("no reply from the shared process relaying model calls")

    monkeypatch.setattr(embed_client, "relay_chat", broken)
    before = len(llm.requests)
    reply = llm_mod.call_model(cfg, open_gate().seal("test", "q"))
    assert reply.text is None and "relaying model calls" in reply.error
    assert len(llm.requests) == before


def test_relay_not_listening_falls_back_and_one_that_never_answers_is_left_alone(
    monkeypatch, tmp_path
):
    import socket

    from nl2sql.core.errors import EmbedderUnavailable
    from nl2sql.embedding import client as embed_client
    from nl2sql.embedding._unix_http import UnixClient

    def point_at(path: str) -> None:
        monkeypatch.setitem(embed_client._STATE, "client", UnixClient(path))

    payload = _chat("relay-x", "http://127.0.0.1:9/v1")
    monkeypatch.setitem(embed_client._STATE, "retry_at", 0.0)
    monkeypatch.setitem(embed_client._STATE, "mode", "local")
    point_at(str(tmp_path / "none.sock"))
    assert embed_client.relay_chat(payload, 0.1) is None  # not in use
    monkeypatch.setitem(embed_client._STATE, "mode", "shared")
    assert embed_client.relay_chat(payload, 0.1) is None  # no process: nothing was sent
    # a socket that accepts connections but never answers: one wait, then left alone
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(str(tmp_path / "mute.sock"))
    mute.listen(8)
    try:
        point_at(str(tmp_path / "mute.sock"))
        t0 = time.monotonic()
        with pytest.raises(EmbedderUnavailable, match="no reply"):
            embed_client.relay_chat(payload, 0.1)
        assert time.monotonic() - t0 < 0.1 + embed_client.RELAY_MARGIN_S + 1.5
        assert embed_client._STATE["retry_at"] > time.monotonic()
        assert embed_client.relay_chat(payload, 0.1) is None  # in-process for a while
    finally:
        mute.close()


def test_the_shared_process_runs_at_most_one_embedding_per_cpu_at_once(monkeypatch):
    # 16 busy backends would otherwise embed 40 requests at once (the web server's threads):
    # no faster on 2 CPUs, and ONNX Runtime's arena grows to what they all need at once
    import threading

    from nl2sql.embedding import _server as server

    monkeypatch.setenv("NL2SQL_EMBED_THREADS", "2")
    monkeypatch.setattr(server, "_RUNS", [])
    lock = threading.Lock()
    running, peak = [0], [0]

    def counting_embed(texts, cache, bulk, prec):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return [[0.0] * embed.DIM for _ in texts]

    monkeypatch.setattr(server.embed, "embed", counting_embed)
    threads = [threading.Thread(target=server.embed_texts, args=([f"t{i}"],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 <= peak[0] <= 2
    assert server.embed_texts(["one"]) == [[0.0] * embed.DIM]


def test_backend_client_embeds_over_the_standard_library_and_reconnects(service, monkeypatch):
    # the backend's client (http.client over the Unix socket, not httpx): the vectors are the
    # in-process engine's, a kept-alive connection the server closed is replaced, and a socket
    # with nothing behind it is a connect error (nothing sent)
    import socket

    from nl2sql.core.errors import EmbedderConnectError
    from nl2sql.embedding import client as embed_client
    from nl2sql.embedding._unix_http import UnixClient

    d, _, _ = service
    http = UnixClient(str(d / "embed.sock"))
    monkeypatch.setitem(embed_client._STATE, "client", http)
    monkeypatch.setitem(embed_client._STATE, "retry_at", 0.0)
    got = embed_client.encode(EMBEDDING_TEXTS)
    assert got is not None and len(got) == len(EMBEDDING_TEXTS)
    assert min(cosines(got, embed.embed(EMBEDDING_TEXTS, cache=False))) >= 0.9999
    first = http._conn.sock
    assert first is not None
    first.shutdown(socket.SHUT_RDWR)  # as a server closing an idle connection would look
    assert http.get("/v1/models").status_code == 200
    assert http._conn.sock is not first  # a new connection, not an error
    bad = {"input": [], "model": embed_client.MODEL_NAME}
    assert http.post("/v1/embeddings", json=bad).status_code == 400  # an error status, read
    # model calls relay from several threads at once: each request gets a connection of its own
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=6) as pool:
        statuses = list(pool.map(lambda _: http.get("/v1/models").status_code, range(60)))
    assert statuses == [200] * 60
    with pytest.raises(EmbedderConnectError):
        UnixClient(str(d / "absent.sock")).get("/v1/models", timeout=1.0)


def test_log_route_refuses_bad_rows_and_says_why_a_row_was_not_written(service, monkeypatch):
    # POST /nl2sql/v1/log: a bad row is a 400; without a server's postmaster.pid in the data
    # directory (here the folder above the process's), or with one naming no Unix socket, the
    # row is not written and the backend's relay says why (it then writes in its transaction)
    import json

    from nl2sql.embedding import client as embed_client
    from nl2sql.embedding import query_log_relay as relay
    from nl2sql.embedding._unix_http import UnixClient

    d, _, _ = service
    monkeypatch.setitem(embed_client._STATE, "mode", "shared")
    monkeypatch.setattr(relay, "_HTTP", [UnixClient(str(d / "embed.sock"))])
    row = {"db": "x", "role_name": "r", "question": "q", "trace": json.dumps({"question": "q"})}
    bad = relay._http().post(relay.ROUTE, json={**row, "trace": "[]"})
    assert bad.status_code == 400 and "JSON object" in bad.text
    got, why = relay.relay_log(row)
    assert got is None and "postmaster.pid" in why
    (d.parent / "postmaster.pid").write_text("1\n/data\n0\n5432\n\n*\n")
    got, why = relay.relay_log(row)
    assert got is None and "no Unix socket" in why
