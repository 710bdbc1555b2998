"""The shared embedder (nl2sql.embedding.server, nl2sql.embedding.client): the process answers the
OpenAI embeddings API with the in-process engine's vectors, exits with its postmaster, is started
by the first backend that needs it, restarted when killed, and when it cannot run the backend
embeds in-process and the trace says so."""

from __future__ import annotations

import array
import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import TEST_API_KEY, TEST_KEY_ENV, add_models
from nl2sql.embedding import encode as embed
from nl2sql_indexer.demo_data import DEMO_QUESTIONS

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ["How many singers do we have?", "France", "naïve café — 3-D Man", "Summer Nights"]


def _client(sock: str):
    import httpx2
    import openai

    return openai.OpenAI(
        api_key="unused",
        base_url="http://embedder/v1",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(transport=httpx2.HTTPTransport(uds=sock)),
    )


def _vectors(sock: str, texts: list[str]) -> list[list[float]]:
    resp = _client(sock).embeddings.create(
        input=texts, model="all-MiniLM-L6-v2", encoding_format="base64"
    )
    return [list(array.array("f", base64.b64decode(d.embedding))) for d in resp.data]


def _cosines(a: list[list[float]], b: list[list[float]]) -> list[float]:
    return [sum(x * y for x, y in zip(u, v)) for u, v in zip(a, b)]


def _gone(pid: int) -> bool:
    """True when ``pid`` has exited (a zombie counts as exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not _gone(pid):
        time.sleep(0.05)
    return _gone(pid)


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
            "nl2sql.embedding.server",
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
    got = _vectors(str(d / "embed.sock"), TEXTS)
    ref = embed.embed(TEXTS, cache=False)
    assert len(got) == len(TEXTS) and all(len(v) == embed.DIM for v in got)
    assert min(_cosines(got, ref)) >= 0.9999
    # float encoding and a single string, as the OpenAI API allows
    one = _client(str(d / "embed.sock")).embeddings.create(
        input="France", model="all-MiniLM-L6-v2", encoding_format="float"
    )
    assert min(_cosines([one.data[0].embedding], [ref[1]])) >= 0.9999


def test_service_refuses_bad_requests(service):
    import openai

    d, _, _ = service
    with pytest.raises(openai.BadRequestError, match="unknown model"):
        _client(str(d / "embed.sock")).embeddings.create(input=["x"], model="gpt-x")
    with pytest.raises(openai.BadRequestError, match="1 to"):
        _client(str(d / "embed.sock")).embeddings.create(input=[], model="all-MiniLM-L6-v2")


def test_service_exits_with_its_postmaster(service):
    d, proc, fake_postmaster = service
    fake_postmaster.kill()
    fake_postmaster.wait()
    assert proc.wait(timeout=15) == 0
    assert not (d / "embed.sock").exists()


# --------------------------------------------------------------------------------------------
# inside the server
# --------------------------------------------------------------------------------------------


def _embedder_dir(cluster) -> Path:
    return cluster.datadir / "nl2sql_embedder"


def _service_pid(cluster) -> int | None:
    try:
        return int((_embedder_dir(cluster) / "embedder.pid").read_text())
    except (OSError, ValueError):
        return None


def _explain(cluster, question: str) -> dict:
    with cluster.connect("nl2sql_test") as c:  # a new backend: empty embedding cache
        return c.execute("SELECT nl2sql.explain(%s)", (question,)).fetchone()[0]


HEAVY = ("onnxruntime", "numpy", "torch", "tokenizers", "sentence_transformers")


def _heavy_modules(conn) -> list[str]:
    """The heavy embedding modules (``HEAVY``) this connection's backend has imported."""
    found: list[str] = []
    conn.add_notice_handler(lambda d: found.extend(d.message_primary.split()[1:]))
    conn.execute(
        f"DO $x$\nimport sys\nplpy.notice('heavy: ' + ' '.join(m for m in {HEAVY!r} "
        "if m in sys.modules))\n$x$ LANGUAGE plpython3u"
    )
    return found


@pytest.fixture
def shared(db, llm, cluster):
    """The demo database with the default ``embedder = 'shared'`` and the demo questions
    scripted on the loopback server."""
    add_models(db, llm, ["m1"])
    llm.set_replay("m1", dict(DEMO_QUESTIONS))
    db.execute("SELECT nl2sql.reset_setting('embedder')")
    yield db
    db.execute("SELECT nl2sql.reset_setting('embedder')")


def test_backends_use_one_shared_process_with_the_same_vectors(shared, cluster):
    trace = _explain(cluster, DEMO_QUESTIONS[1][0])
    assert trace["sql"] and trace["embedder"]["setting"] == "shared"
    assert trace["embedder"]["served_by"] == ["shared"] and trace["embedder"]["fallback"] is None
    pid = _service_pid(cluster)
    assert pid and not _gone(pid)
    d = _embedder_dir(cluster)
    assert d.stat().st_mode & 0o777 == 0o700
    assert (d / "embed.sock").stat().st_mode & 0o777 == 0o600
    # a second backend finds it running
    trace = _explain(cluster, DEMO_QUESTIONS[2][0])
    assert trace["embedder"]["served_by"] == ["shared"]
    assert trace["embedder"]["started_process"] is None and _service_pid(cluster) == pid
    # a backend that asked, and one that ran the CLI's per-table reindex, stay small
    with cluster.connect("nl2sql_test") as c:
        c.execute("SELECT nl2sql(%s)", (DEMO_QUESTIONS[9][0],))
        assert _heavy_modules(c) == []
    with cluster.connect("nl2sql_test") as c:
        c.execute("SELECT nl2sql._reindex_table('public', 'singer', true)")
        assert _heavy_modules(c) == []
    # the process's vectors equal the in-process engine's; so do the ones reindex stored
    assert (
        min(_cosines(_vectors(str(d / "embed.sock"), TEXTS), embed.embed(TEXTS, cache=False)))
        >= 0.9999
    )
    shared.execute("SELECT nl2sql.reindex(force => true)")
    rows = shared.execute(
        "SELECT value, embedding::text FROM nl2sql.cell_value ORDER BY value LIMIT 20"
    ).fetchall()
    stored = [json.loads(r[1]) for r in rows]
    assert min(_cosines(stored, embed.embed([r[0] for r in rows], cache=False))) >= 0.9999


def test_killed_process_is_restarted_by_the_next_backend(shared, cluster):
    _explain(cluster, DEMO_QUESTIONS[3][0])
    old = _service_pid(cluster)
    os.kill(old, signal.SIGKILL)
    assert _wait_gone(old)
    trace = _explain(cluster, DEMO_QUESTIONS[4][0])
    assert trace["sql"] and trace["embedder"]["served_by"] == ["shared"]
    new = trace["embedder"]["started_process"]
    assert new and new != old and new == _service_pid(cluster) and not _gone(new)


def test_unavailable_process_falls_back_in_process_and_says_so(shared, cluster):
    _explain(cluster, DEMO_QUESTIONS[5][0])
    d = _embedder_dir(cluster)
    pid = _service_pid(cluster)
    os.kill(pid, signal.SIGKILL)
    assert _wait_gone(pid)
    aside = d.with_name("nl2sql_embedder.aside")
    d.rename(aside)
    d.write_text("not a folder")  # no process can be started here
    try:
        trace = _explain(cluster, DEMO_QUESTIONS[6][0])
        emb = trace["embedder"]
        assert trace["sql"], trace.get("error")
        assert emb["setting"] == "shared" and emb["served_by"] == ["local"]
        assert "embedder folder" in emb["fallback"] and "in-process" in emb["fallback"]
        assert emb["relayed_model_calls"] == 0  # the model was called from the backend
        assert str(cluster.datadir) not in json.dumps(trace)  # no path for ordinary roles
    finally:
        d.unlink()
        aside.rename(d)
    trace = _explain(cluster, DEMO_QUESTIONS[7][0])  # a new backend starts it again
    assert trace["embedder"]["served_by"] == ["shared"] and trace["embedder"]["started_process"]


def test_local_setting_embeds_in_process(shared, cluster):
    shared.execute("SELECT nl2sql.set_setting('embedder', 'local')")
    with cluster.connect("nl2sql_test") as c:
        trace = c.execute("SELECT nl2sql.explain(%s)", (DEMO_QUESTIONS[8][0],)).fetchone()[0]
        assert trace["sql"]
        assert trace["embedder"] == {
            "setting": "local",
            "served_by": ["local"],
            "fallback": None,
            "started_process": None,
            "relayed_model_calls": 0,
        }
        assert "onnxruntime" in _heavy_modules(c)  # the model is in this backend


def test_process_that_does_not_answer_costs_one_timeout_then_in_process(shared, cluster):
    _explain(cluster, DEMO_QUESTIONS[0][0])
    pid = _service_pid(cluster)
    os.kill(pid, signal.SIGSTOP)  # alive, socket open, never answers
    try:
        t0 = time.monotonic()
        trace = _explain(cluster, "How many stadiums are there in total?")
        took = time.monotonic() - t0
    finally:
        os.kill(pid, signal.SIGCONT)
    emb = trace["embedder"]
    assert emb["served_by"] == ["local"] and "did not answer within" in emb["fallback"]
    assert took < 30, "one request's time limit, then in-process for the rest of the call"
    assert not _gone(pid) and _service_pid(cluster) == pid  # a slow process is not killed


# --------------------------------------------------------------------------------------------
# model calls relayed by the shared process
# --------------------------------------------------------------------------------------------


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
    from nl2sql_indexer.loopback import Rule

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
    from nl2sql_indexer.loopback import Rule

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


def _imported(conn, module: str) -> bool:
    """Whether this connection's backend has imported ``module``."""
    found: list[str] = []

    def handler(d) -> None:
        found.append(d.message_primary)

    conn.add_notice_handler(handler)
    try:
        conn.execute(
            f"DO $x$\nimport sys\nplpy.notice({module!r} in sys.modules and 'yes' or 'no')"
            "\n$x$ LANGUAGE plpython3u"
        )
    finally:
        conn.remove_notice_handler(handler)
    return found == ["yes"]


def test_a_new_backend_relays_its_model_calls_and_never_imports_openai(shared, cluster):
    with cluster.connect("nl2sql_test") as c:
        trace = c.execute("SELECT nl2sql.explain(%s)", (DEMO_QUESTIONS[2][0],)).fetchone()[0]
        assert trace["sql"] and trace["embedder"]["relayed_model_calls"] >= 1
        assert _heavy_modules(c) == [] and not _imported(c, "openai")
    with cluster.connect("nl2sql_test") as c:  # retrieval alone calls no model
        assert c.execute("SELECT nl2sql.retrieve(%s)", (DEMO_QUESTIONS[3][0],)).fetchone()[0]
        assert not _imported(c, "openai") and not _imported(c, "nl2sql.ops.indexer")
    shared.execute("SELECT nl2sql.set_setting('embedder', 'local')")
    with cluster.connect("nl2sql_test") as c:  # not in use: the backend calls the model
        trace = c.execute("SELECT nl2sql.explain(%s)", (DEMO_QUESTIONS[4][0],)).fetchone()[0]
        assert trace["sql"] and trace["embedder"]["relayed_model_calls"] == 0
        assert _imported(c, "openai")


def test_relay_not_listening_falls_back_and_one_that_never_answers_is_left_alone(
    monkeypatch, tmp_path
):
    import socket

    import httpx2

    from nl2sql.core.errors import EmbedderUnavailable
    from nl2sql.embedding import client as embed_client

    def point_at(path: str) -> None:
        monkeypatch.setitem(
            embed_client._STATE,
            "client",
            httpx2.Client(
                transport=httpx2.HTTPTransport(uds=path), base_url="http://nl2sql-embedder"
            ),
        )

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
