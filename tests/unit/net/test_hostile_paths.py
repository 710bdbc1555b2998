"""Every outbound path a process makes, against every hostile server (``dev.hostile``), in a
process beside the database (no cancel point: the deadline alone): each call ends within its
overall deadline plus a small margin, and the next call answers. The same table runs inside
PostgreSQL, with cancel and terminate, in ``tests/db/test_hostile_backend.py``."""

from __future__ import annotations

import os
import tempfile
import time

import pytest

from nl2sql.core.errors import EmbeddingError
from nl2sql.core.types import ModelConfig
from nl2sql.embedding import remote
from nl2sql.embedding._unix_http import UnixClient
from nl2sql.model import capability, openai_call, probe
from nl2sql_indexer.dev.hostile import MODES, HostileServer

DEADLINE_S = 1.0
MARGIN_S = 0.8  # thread hand-over, a shut socket's wake-up, a loaded 2-core machine
MSGS = [{"role": "user", "content": "How many singers are there?"}]


def _cfg(url: str, **kw) -> ModelConfig:
    return ModelConfig(name="m", model="m", base_url=url, timeout_s=DEADLINE_S, max_retries=2, **kw)


def _chat(url: str):
    reply = openai_call.call_here(_cfg(url, context_window=8192), MSGS, DEADLINE_S, 1, None)
    assert reply.text is None and reply.error, reply
    return reply.error


def _probe(url: str):
    capability.forget_windows()
    window, how = capability.window_of(_cfg(url))
    assert window is None, how
    return how


def _models(url: str):
    reach = probe.list_models(_cfg(url), None, DEADLINE_S)
    assert reach.outcome != "ok", reach
    return reach.outcome


def _embeddings(url: str):
    cfg = remote.EmbeddingModel("e", url, "e", 8, timeout_s=DEADLINE_S, max_retries=2)
    with pytest.raises(EmbeddingError) as e:
        remote.embed(cfg, ["Marvel Comics"])
    return str(e.value)


PATHS = {  # path -> (the server's hostile paths, the call)
    "chat_completions": (("/chat/completions",), _chat),
    "props": (("/props",), _probe),
    "api_show": (("/api/show",), _probe),
    "doctor_models": (("/models",), _models),
    "embeddings": (("/embeddings",), _embeddings),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_hostile_server_never_holds_a_call_past_its_deadline(mode, path):
    hostile, call = PATHS[path]
    with HostileServer(mode, paths=hostile) as server:
        t0 = time.monotonic()
        call(server.url)
        took = time.monotonic() - t0
    assert took < DEADLINE_S + MARGIN_S, f"{path} against {mode}: {took:.2f} s"


@pytest.mark.parametrize("mode", [m for m in MODES if m != "tls_stall"])
def test_the_embedder_socket_never_holds_a_request_past_its_deadline(mode):
    """The shared embedder's Unix socket, with a server that misbehaves as a stopped
    (SIGSTOP) or broken process would: the request ends within its deadline."""
    with tempfile.TemporaryDirectory() as d:
        sock = os.path.join(d, "embed.sock")
        with HostileServer(mode, unix_path=sock):
            client = UnixClient(sock, timeout=DEADLINE_S)
            t0 = time.monotonic()
            try:
                got = client.post("/v1/embeddings", json={"input": ["a"]})
                assert mode == "redirect_loop" and got.status_code == 302
            except Exception as e:  # noqa: BLE001 - which error is the case's; the time is the test
                assert "Embedder" in type(e).__name__, e
            took = time.monotonic() - t0
            client.close()
    assert took < DEADLINE_S + MARGIN_S, f"embedder against {mode}: {took:.2f} s"
