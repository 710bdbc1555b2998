"""The shared embedder (nl2sql.embed_service, nl2sql.embed_client): the process answers the
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

from conftest import add_models
from nl2sql import embed
from nl2sql_indexer.demo_data import DEMO_QUESTIONS

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ["How many singers do we have?", "France", "naïve café — 3-D Man", "Summer Nights"]


def _client(sock: str):
    import httpx2
    import openai

    return openai.OpenAI(api_key="unused", base_url="http://embedder/v1", max_retries=0,
                         http_client=openai.DefaultHttpxClient(
                             transport=httpx2.HTTPTransport(uds=sock)))


def _vectors(sock: str, texts: list[str]) -> list[list[float]]:
    resp = _client(sock).embeddings.create(input=texts, model="all-MiniLM-L6-v2",
                                           encoding_format="base64")
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
    env = {**os.environ, "PYTHONPATH": str(ROOT / "py_udf")}
    proc = subprocess.Popen([sys.executable, "-m", "nl2sql.embed_service", "--dir", str(d),
                             "--postmaster-pid", str(fake_postmaster.pid)], env=env)
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
    one = _client(str(d / "embed.sock")).embeddings.create(input="France",
                                                           model="all-MiniLM-L6-v2",
                                                           encoding_format="float")
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
    with cluster.connect("nl2sql_test") as c:    # a new backend: empty embedding cache
        return c.execute("SELECT nl2sql.explain(%s)", (question,)).fetchone()[0]


HEAVY = ("onnxruntime", "numpy", "torch", "tokenizers", "sentence_transformers")


def _heavy_modules(conn) -> list[str]:
    """The heavy embedding modules (``HEAVY``) this connection's backend has imported."""
    found: list[str] = []
    conn.add_notice_handler(lambda d: found.extend(d.message_primary.split()[1:]))
    conn.execute("DO $x$\nimport sys\nplpy.notice('heavy: ' + ' '.join(m for m in %r "
                 "if m in sys.modules))\n$x$ LANGUAGE plpython3u" % (HEAVY,))
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
    assert min(_cosines(_vectors(str(d / "embed.sock"), TEXTS),
                        embed.embed(TEXTS, cache=False))) >= 0.9999
    shared.execute("SELECT nl2sql.reindex(force => true)")
    rows = shared.execute("SELECT value, embedding::text FROM nl2sql.cell_value "
                          "ORDER BY value LIMIT 20").fetchall()
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
    d.write_text("not a folder")   # no process can be started here
    try:
        trace = _explain(cluster, DEMO_QUESTIONS[6][0])
        emb = trace["embedder"]
        assert trace["sql"], trace.get("error")
        assert emb["setting"] == "shared" and emb["served_by"] == ["local"]
        assert "embedder folder" in emb["fallback"] and "in-process" in emb["fallback"]
        assert str(cluster.datadir) not in json.dumps(trace)   # no path for ordinary roles
    finally:
        d.unlink()
        aside.rename(d)
    trace = _explain(cluster, DEMO_QUESTIONS[7][0])   # a new backend starts it again
    assert trace["embedder"]["served_by"] == ["shared"] and trace["embedder"]["started_process"]


def test_local_setting_embeds_in_process(shared, cluster):
    shared.execute("SELECT nl2sql.set_setting('embedder', 'local')")
    with cluster.connect("nl2sql_test") as c:
        trace = c.execute("SELECT nl2sql.explain(%s)", (DEMO_QUESTIONS[8][0],)).fetchone()[0]
        assert trace["sql"]
        assert trace["embedder"] == {"setting": "local", "served_by": ["local"],
                                     "fallback": None, "started_process": None,
                                     "relayed_model_calls": 0}
        assert "onnxruntime" in _heavy_modules(c)   # the model is in this backend


def test_process_that_does_not_answer_costs_one_timeout_then_in_process(shared, cluster):
    _explain(cluster, DEMO_QUESTIONS[0][0])
    pid = _service_pid(cluster)
    os.kill(pid, signal.SIGSTOP)          # alive, socket open, never answers
    try:
        t0 = time.monotonic()
        trace = _explain(cluster, "How many stadiums are there in total?")
        took = time.monotonic() - t0
    finally:
        os.kill(pid, signal.SIGCONT)
    emb = trace["embedder"]
    assert emb["served_by"] == ["local"] and "did not answer within" in emb["fallback"]
    assert took < 30, "one request's time limit, then in-process for the rest of the call"
    assert not _gone(pid) and _service_pid(cluster) == pid   # a slow process is not killed
