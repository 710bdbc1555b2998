"""A model endpoint's reply body of any shape, through the real HTTP path (``call_here``): an
answer where the body holds one (also JSON sent under another content type), else a clear
error, never an exception."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nl2sql.core.types import ModelConfig
from nl2sql.model import capability
from nl2sql.model.openai_call import call_here

MSGS = [{"role": "user", "content": "How many singers are there?"}]
OK = json.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "SELECT 1"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    }
)


class _Fixed(BaseHTTPRequestHandler):
    """Answers every POST with the server's ``reply``: (status, content type, body)."""

    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, ctype, body = self.server.reply
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


@pytest.fixture(scope="module")
def endpoint():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Fixed)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


# (content type, body) -> the answer text, or a part of the error when there is none
CASES = [
    ("application/json", OK, "SELECT 1", None),
    ("text/plain", OK, "SELECT 1", None),  # JSON under another content type
    ("application/json; charset=utf-8", OK, "SELECT 1", None),
    ("application/json", "[1, 2]", None, "no choices"),
    ("application/json", '{"choices": "none"}', None, "no choices"),
    ("application/json", '{"choices": [{"message": null}]}', None, "no text"),
    ("text/html", "<html><body>Bad gateway</body></html>", None, "no choices"),
    ("application/json", "null", None, "no choices"),
]  # fmt: skip


@pytest.mark.parametrize("ctype,body,text,error", CASES)
def test_a_reply_body_of_any_shape_gives_its_answer_or_a_clear_error(
    endpoint, ctype, body, text, error
):
    capability.forget()
    endpoint.reply = (200, ctype, body)
    cfg = ModelConfig(
        name="m", model="m", base_url=f"http://127.0.0.1:{endpoint.server_port}/v1",
        timeout_s=5, max_retries=0,
    )  # fmt: skip
    reply = call_here(cfg, MSGS, 5, 1, None)
    if text is not None:
        assert reply.error is None and reply.text == text, reply.error
    else:
        assert reply.text is None and error in (reply.error or ""), reply.error


@pytest.mark.parametrize(
    "timings, server_ms",
    [
        ({"prompt_ms": 120.5, "predicted_ms": 880.0}, 1000.5),  # llama.cpp's
        (None, None),  # every other server
        ({"prompt_ms": "x", "predicted_ms": 1}, None),
        ({"prompt_ms": -5, "predicted_ms": 1}, None),
        ([1, 2], None),
    ],
)
def test_the_server_s_own_time_is_read_where_it_says_it(timings, server_ms):
    """What a call waited (for a busy server's slot) is its time less the server's own."""
    from nl2sql.model import _reply

    body = {"choices": [{"message": {"content": "SELECT 1"}, "finish_reason": "stop"}]}
    if timings is not None:
        body["timings"] = timings
    assert _reply.read(body).server_ms == server_ms
