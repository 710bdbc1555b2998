"""The shared embedder (nl2sql.embedding._server, nl2sql.embedding.client) inside PostgreSQL: the
process is started by the first backend that needs it, its vectors equal the in-process engine's,
it is restarted when killed, a backend relays its model calls through it and stays small, and
when it cannot run the backend embeds in-process and the trace says so. The process on its own
(answers, refusals, exit with its postmaster, the model-call relay) is
tests/unit/embedding/test_shared_embedder.py."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from conftest import EMBEDDING_TEXTS, add_models, cosines, embeddings_of
from nl2sql.embedding import encode as embed
from nl2sql_indexer.dev.demo_data import DEMO_QUESTIONS


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
        min(
            cosines(
                embeddings_of(str(d / "embed.sock"), EMBEDDING_TEXTS),
                embed.embed(EMBEDDING_TEXTS, cache=False),
            )
        )
        >= 0.9999
    )
    shared.execute("SELECT nl2sql.reindex(force => true)")
    rows = shared.execute(
        "SELECT value, embedding::text FROM nl2sql.cell_value ORDER BY value LIMIT 20"
    ).fetchall()
    stored = [json.loads(r[1]) for r in rows]
    assert min(cosines(stored, embed.embed([r[0] for r in rows], cache=False))) >= 0.9999


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
            "model": "all-MiniLM-L6-v2",  # the index's model (docs/embedding-models.md)
            "values": "all-MiniLM-L6-v2",  # setting value_embedding's default: the model
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


def test_a_question_never_imports_the_agent_door_nor_charts(shared, cluster):
    # every new backend's first question pays its imports: the doors it does not use stay out
    doors = ("nl2sql.agent", "nl2sql.charts", "sqlglot.optimizer.qualify")
    with cluster.connect("nl2sql_test") as c:
        assert c.execute("SELECT nl2sql(%s)", (DEMO_QUESTIONS[0][0],)).fetchone()[0]
        assert [m for m in doors if _imported(c, m)] == []
        assert c.execute("SELECT nl2sql.describe_table('singer')").fetchone()[0]
        assert _imported(c, "nl2sql.agent")
