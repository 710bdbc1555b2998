"""Redaction of secrets from errors (README "Safety", "Keys"): ``redaction.redact`` without a
server, and a model error built by ``llm.call_model`` from the loopback server's 401."""

from __future__ import annotations

import pytest

from nl2sql.core.redaction import MASK, env_secrets, redact, redact_obj, url_secrets
from nl2sql.core.types import ModelConfig
from nl2sql.model import llm as llm_mod
from nl2sql.model.gate import open_gate
from nl2sql_indexer.dev.loopback import LoopbackLLM, Rule

KEY = "sk-nl2sql-test-0123456789abcdef"


def test_configured_secret_is_masked_wherever_it_occurs():
    assert redact(f"a{KEY}b {KEY}", [KEY]) == f"a{MASK}b {MASK}"
    # a configured value that does not look like a key is masked too
    assert (
        redact("token=hunter2hunter2 and hunter2hunter2", ["hunter2hunter2"])
        == f"token={MASK} and {MASK}"
    )
    # longest first: a key containing another is masked whole
    assert redact("abcdefgh12345678", ["abcdefgh", "abcdefgh12345678"]) == MASK


def test_key_like_tokens_are_masked_without_being_configured():
    msg = (
        "Error code: 401 - {'error': {'message': 'Incorrect API key provided: "
        "sk-proj-AbCdEf0123456789XyZ. You can find your API key at ...'}}"
    )
    out = redact(msg)
    assert "sk-proj" not in out and "Incorrect API key provided: [REDACTED]." in out
    assert redact("Authorization: Bearer abc123def456ghi") == f"Authorization: Bearer {MASK}"
    assert redact('api_key="zzzz1111yyyy"') == f"api_key={MASK}"
    assert redact("x-api-key: 0123456789abcdef") == f"x-api-key: {MASK}"
    # partly masked by the endpoint: still masked
    assert redact("provided: sk-nl2sq****************cdef") == f"provided: {MASK}"


@pytest.mark.parametrize(
    "text",
    [
        "model 'm1': endpoint answered HTTP 500 (after 2 retries): internal error",
        "sk-short is not a key",
        "the bearer bonds of 2020",
        "basic salaries by department",
        "SELECT count(*) FROM singer WHERE name = 'task-manager'",
        "secret identity of the hero",
    ],
)
def test_ordinary_text_is_left_alone(text):
    assert redact(text, ["", None, "short"]) == text


def test_none_passes_and_objects_are_redacted_deeply():
    assert redact(None, [KEY]) is None
    trace = {
        "error": f"bad {KEY}",
        "candidates": [{"reason": f"x {KEY}", "n": 3}],
        "tokens": {"prompt": 1},
        "sql": None,
        KEY: ("a", KEY),
    }
    out = redact_obj(trace, [KEY])
    assert KEY not in repr(out)
    assert out["candidates"][0]["n"] == 3 and out["sql"] is None and out["tokens"] == {"prompt": 1}


def test_env_secrets_reads_the_named_variables(monkeypatch):
    monkeypatch.setenv("NL2SQL_REDACT_A", KEY)
    monkeypatch.delenv("NL2SQL_REDACT_B", raising=False)
    assert env_secrets(["NL2SQL_REDACT_A", "NL2SQL_REDACT_B", None, "NL2SQL_REDACT_A"]) == [KEY]


def test_a_401_echoing_the_key_gives_a_redacted_model_error(monkeypatch):
    monkeypatch.setenv("NL2SQL_REDACT_KEY", KEY)
    server = LoopbackLLM().start()
    try:
        server.add_rule(
            Rule(
                model="keyed", status=401, response=f"Incorrect API key provided: {KEY}. Try again."
            )
        )
        cfg = ModelConfig(
            name="keyed",
            model="keyed",
            base_url=server.base_url,
            api_key_env="NL2SQL_REDACT_KEY",
            timeout_s=5,
            max_retries=0,
        )
        reply = llm_mod.call_model(cfg, open_gate().seal("test", "q"))
    finally:
        server.stop()
    assert reply.text is None and "HTTP 401" in reply.error
    assert KEY not in reply.error and MASK in reply.error


URL_CREDENTIALS = [
    ("cannot reach http://alice:s3cr3tpass@10.0.0.5/v1 (refused)", "s3cr3tpass"),
    ("GET https://bob:hunter2@api.example/v1/models: 404", "hunter2"),
    (
        "HTTP 401: bad credentials Basic YWxpY2U6czNjcjN0cGFzcw== for alice",
        "YWxpY2U6czNjcjN0cGFzcw==",
    ),
]


@pytest.mark.parametrize("text,secret", URL_CREDENTIALS)
def test_credentials_in_a_url_and_their_echoes_are_masked(text, secret):
    secrets = url_secrets("http://alice:s3cr3tpass@10.0.0.5/v1")
    assert secrets[2] == "YWxpY2U6czNjcjN0cGFzcw=="  # HTTP Basic's form of alice:s3cr3tpass
    out = redact(text, secrets)
    assert secret not in out and "[REDACTED]" in out
    assert url_secrets("http://10.0.0.5/v1") == [] and url_secrets(None) == []


# every shape a pattern masks, in the spellings it accepts: the one search that lets a text
# without any of them skip the patterns must find each
KEY_SHAPES = [
    "sk-AbCdEf0123456789XyZ",
    "Bearer abc123def456ghi",
    "BEARER abc123def456ghi",
    "bearer abc123def456ghi",
    "API_KEY=zzzz1111yyyy",
    "Api-Key: zzzz1111yyyy",
    "apikey=zzzz1111yyyy",
    "X-API-KEY: zzzz1111yyyy",
    "Access-Token=zzzz1111yyyy",
    "ACCESS_TOKEN: zzzz1111yyyy",
    "client_secret: zzzz1111yyyy",
    "SECRET=zzzz1111yyyy",
    "https://user:pw@host/v1",
    "POSTGRES://u:p@db",
]


@pytest.mark.parametrize("shape", KEY_SHAPES)
def test_every_masked_shape_is_masked_inside_a_trace(shape):
    text = f"the endpoint said: {shape} (retry later)"
    assert redact(text) != text
    assert redact_obj({"error": [text], shape: 1}) == {"error": [redact(text)], redact(shape): 1}
