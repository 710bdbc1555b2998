"""Tests for nl2sql_indexer.dev.loopback: the scripted (not a model) OpenAI-compatible server.

Every test talks to a real server over HTTP on 127.0.0.1, with the real ``openai`` client
(or urllib for the admin endpoints).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pytest

import nl2sql
import nl2sql_indexer.dev.loopback as loopback
from nl2sql_indexer.dev.loopback import QUESTION_MARKER, LoopbackLLM, Rule, extract_question, main


def prompt(question: str, schema: str = "CREATE TABLE singer (id int, name text);") -> str:
    """A prompt shaped like the pipeline's: schema, then the question marker."""
    return f"/* Given the following database schema: */\n{schema}\n\n{QUESTION_MARKER}{question} */\nSELECT"


@pytest.fixture
def llm():
    server = LoopbackLLM().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def client(llm):
    return openai.OpenAI(base_url=llm.base_url, api_key="x", max_retries=0, timeout=5)


def ask(client, model: str, content: str, **kw) -> str:
    r = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": content}], **kw
    )
    return r.choices[0].message.content


# -- urllib helpers (no proxies: talk to loopback directly) -----------------------------------
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http(method: str, url: str, body=None, raw: bytes | None = None) -> tuple[int, object]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with _opener.open(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def root(llm) -> str:
    return llm.base_url[: -len("/v1")]


# -- extract_question ---------------------------------------------------------------------------
def test_extract_question_takes_last_marker():
    text = f"{QUESTION_MARKER}example question */ SELECT 1\n{QUESTION_MARKER}  How many singers?  */\nSELECT"
    assert extract_question(text) == "How many singers?"
    assert extract_question("no marker here") is None
    assert extract_question(f"{QUESTION_MARKER}unterminated question ") == "unterminated question"


# -- rules ----------------------------------------------------------------------------------------
def test_rule_matches_by_model_and_contains(llm, client):
    llm.add_rule(Rule(model="big", response="SELECT 'big'"))
    llm.add_rule(Rule(contains="concert", response="SELECT 'concert'"))
    llm.set_default("SELECT 'default'")
    assert ask(client, "big", prompt("anything")) == "SELECT 'big'"
    assert ask(client, "small", "How many concerts?") == "SELECT 'concert'"
    assert ask(client, "small", "How many singers?") == "SELECT 'default'"


def test_contains_looks_at_last_user_message_only(llm, client):
    llm.add_rule(Rule(contains="needle", response="found"))
    llm.set_default("not found")
    msgs = [
        {"role": "system", "content": "needle"},
        {"role": "user", "content": "needle"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "haystack"},
    ]
    r = client.chat.completions.create(model="m", messages=msgs)
    assert r.choices[0].message.content == "not found"


def test_first_matching_rule_wins(llm, client):
    llm.add_rule(Rule(model="m", contains="singer", response="first"))
    llm.add_rule(Rule(model="m", response="second"))
    llm.add_rule(Rule(contains="singer", response="third"))
    assert ask(client, "m", "How many singers?") == "first"
    assert ask(client, "m", "How many concerts?") == "second"
    assert ask(client, "other", "How many singers?") == "third"


def test_rule_question_is_exact_match(llm, client):
    llm.add_rule(Rule(question="How many singers?", response="SELECT count(*) FROM singer"))
    llm.set_default("nope")
    assert ask(client, "m", prompt("How many singers?")) == "SELECT count(*) FROM singer"
    assert ask(client, "m", prompt("how many singers?")) == "nope"


def test_times_exhaustion_falls_through(llm, client):
    llm.add_rule(Rule(model="m", response="limited", times=2))
    llm.add_rule(Rule(model="m", response="fallback"))
    got = [ask(client, "m", "q") for _ in range(4)]
    assert got == ["limited", "limited", "fallback", "fallback"]


# -- replay ---------------------------------------------------------------------------------------
def test_replay_by_extracted_question(llm, client):
    llm.set_replay(
        "gpt-x",
        {
            "How many singers do we have?": "SELECT count(*) FROM singer",
            "List all concerts": "SELECT * FROM concert",
        },
    )
    assert (
        ask(client, "gpt-x", prompt("How many singers do we have?"))
        == "SELECT count(*) FROM singer"
    )
    # whitespace / case-insensitive fallback
    assert (
        ask(client, "gpt-x", prompt("  how  MANY singers\n do we HAVE? "))
        == "SELECT count(*) FROM singer"
    )
    assert ask(client, "gpt-x", prompt("list all CONCERTS")) == "SELECT * FROM concert"
    # another model has no replay
    with pytest.raises(openai.NotFoundError):
        ask(client, "other-model", prompt("How many singers do we have?"))


def test_replay_finds_a_question_the_pipeline_rewrote(llm, client):
    from datetime import date

    from nl2sql.retrieval.rewriting import rewrite_relative_time

    asked = "Which singers are on tour currently and how many concerts this month?"
    llm.set_replay("gpt-x", {asked: "SELECT 1"})
    rewritten = rewrite_relative_time(asked, date(2026, 11, 22)).question
    assert rewritten != asked
    assert ask(client, "gpt-x", prompt(rewritten)) == "SELECT 1"
    # a question that differs in more than the added dates is still not found
    with pytest.raises(openai.NotFoundError):
        ask(client, "gpt-x", prompt(rewritten.replace("singers", "bands")))


def test_rules_take_precedence_over_replay(llm, client):
    llm.set_replay("m", {"Q1": "from replay"})
    llm.add_rule(Rule(model="m", question="Q1", response="from rule", times=1))
    assert ask(client, "m", prompt("Q1")) == "from rule"
    assert ask(client, "m", prompt("Q1")) == "from replay"


# -- response shape -------------------------------------------------------------------------------
def test_n_choices_and_usage(llm, client):
    llm.add_rule(Rule(response="SELECT name FROM singer"))
    r = client.chat.completions.create(
        model="m",
        n=3,
        temperature=0.7,
        messages=[
            {"role": "system", "content": "you write SQL"},
            {"role": "user", "content": "list the singers"},
        ],
    )
    assert r.object == "chat.completion"
    assert r.model == "m"
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert all(
        c.message.role == "assistant"
        and c.message.content == "SELECT name FROM singer"
        and c.finish_reason == "stop"
        for c in r.choices
    )
    # usage as a real endpoint reports it: cl100k_base tokens ("you| write| SQL", "list| the|
    # singers", "SELECT| name| FROM| singer") plus 3 per message and 3 priming the reply
    assert r.usage.prompt_tokens == 3 + (3 + 3) + (3 + 3)
    assert r.usage.completion_tokens == 4 * 3
    assert r.usage.total_tokens == 15 + 12


def test_a_rule_can_leave_usage_out(llm, client):
    llm.add_rule(Rule(response="SELECT 1", usage=False))
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    assert r.choices[0].message.content == "SELECT 1"
    assert r.usage is None


def test_models_lists_scripted_models(llm, client):
    llm.add_rule(Rule(model="alpha", response="x"))
    llm.add_rule(Rule(response="any model"))
    llm.set_replay("beta", {"q": "a"})
    assert [m.id for m in client.models.list()] == ["alpha", "beta"]


# -- errors ---------------------------------------------------------------------------------------
def test_status_500_raises_internal_server_error(llm, client):
    llm.add_rule(Rule(model="m", status=500, response="boom"))
    with pytest.raises(openai.InternalServerError) as ei:
        ask(client, "m", "q")
    assert ei.value.status_code == 500
    assert "boom" in str(ei.value)


def test_status_429_raises_rate_limit_error(llm, client):
    llm.add_rule(Rule(model="m", status=429, times=1))
    llm.add_rule(Rule(model="m", response="ok now"))
    with pytest.raises(openai.RateLimitError) as ei:
        ask(client, "m", "q")
    assert ei.value.status_code == 429
    assert ask(client, "m", "q") == "ok now"


def test_hang_times_out_and_server_stops_promptly():
    before = set(threading.enumerate())  # other servers of the session keep their own threads
    server = LoopbackLLM().start()
    try:
        server.add_rule(Rule(hang=True))
        c = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=0.5)
        t0 = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            ask(c, "m", "q")
        assert time.monotonic() - t0 < 3
        assert len(server.requests) == 1  # the request did arrive; the server just never answered
    finally:
        t0 = time.monotonic()
        server.stop()
        assert time.monotonic() - t0 < 2
    # the hanging handler was woken by stop(), not left sleeping for an hour
    deadline = time.monotonic() + 1.5

    def handlers():
        return [
            t.name
            for t in set(threading.enumerate()) - before
            if "process_request_thread" in t.name
        ]

    while handlers() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not handlers()


def test_delay_and_concurrency(llm, client):
    llm.add_rule(Rule(response="slow", delay_s=0.5))
    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(ask(client, "m", "q"))) for _ in range(4)
    ]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - t0
    assert results == ["slow"] * 4
    assert 0.45 <= elapsed < 1.5  # served concurrently, not one after another (>= 2 s)


def test_no_match_no_default_names_model_and_question(llm, client):
    with pytest.raises(openai.NotFoundError) as ei:
        ask(client, "model-zeta", prompt("Which stadium is largest?"))
    msg = str(ei.value)
    assert "model-zeta" in msg and "Which stadium is largest?" in msg
    assert ei.value.body["code"] == "no_scripted_answer"


def test_malformed_requests_get_400(llm, client):
    url = llm.base_url + "/chat/completions"
    status, body = http("POST", url, raw=b"{not json")
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    status, body = http("POST", url, {"model": "m"})
    assert status == 400 and "messages" in body["error"]["message"]
    status, body = http(
        "POST", url, {"model": "m", "messages": [{"role": "user", "content": "q"}], "n": 0}
    )
    assert status == 400
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="", messages=[{"role": "user", "content": "q"}])
    assert llm.requests == []  # malformed requests are not logged


def test_unknown_path_404(llm):
    status, body = http("GET", root(llm) + "/v1/nothing")
    assert status == 404 and "error" in body
    status, body = http("POST", root(llm) + "/v1/completions", {"model": "m"})
    assert status == 404 and body["error"]["type"] == "not_found_error"


# -- request log ----------------------------------------------------------------------------------
def test_request_log_records_messages_and_temperature(llm, client):
    llm.set_default("SELECT 1")
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": prompt("Q?")}]
    client.chat.completions.create(model="a", messages=msgs, temperature=0.0)
    client.chat.completions.create(
        model="b", messages=[{"role": "user", "content": "x"}], temperature=0.8, n=2
    )
    log = llm.requests
    assert [r["model"] for r in log] == ["a", "b"]
    assert log[0]["messages"] == msgs
    assert log[0]["temperature"] == 0.0 and log[1]["temperature"] == 0.8
    assert log[0]["n"] == 1 and log[1]["n"] == 2
    assert log[0]["time"] <= log[1]["time"]
    log.clear()  # a copy: the server's log is unaffected
    assert len(llm.requests) == 2


# -- admin endpoints --------------------------------------------------------------------------------
def test_admin_endpoints(llm, client):
    base = root(llm)
    status, body = http(
        "POST",
        base + "/_rules",
        [
            {"model": "m", "contains": "singer", "response": "R1"},
            {"model": "m", "response": "R2", "times": 1},
        ],
    )
    assert status == 200 and body["added"] == 2
    status, _ = http(
        "POST",
        base + "/_replay",
        {"model": "r", "answers": {"How many?": "SELECT 2"}, "delay_s": 0},
    )
    assert status == 200
    assert ask(client, "m", "about a singer") == "R1"
    assert ask(client, "m", "other") == "R2"
    assert ask(client, "r", prompt("how many?")) == "SELECT 2"

    status, log = http("GET", base + "/_requests")
    assert status == 200 and [r["model"] for r in log] == ["m", "m", "r"]
    assert log[0]["messages"] == [{"role": "user", "content": "about a singer"}]

    status, body = http("POST", base + "/_rules", [{"model": "m", "bogus": 1}])
    assert status == 400 and "bogus" in body["error"]["message"]
    status, _ = http("POST", base + "/_replay", {"model": "r", "answers": ["not", "a", "dict"]})
    assert status == 400

    status, _ = http("POST", base + "/_clear")
    assert status == 200
    assert llm.requests == []
    with pytest.raises(openai.NotFoundError):
        ask(client, "m", "about a singer")  # rules and replays are gone


# -- CLI ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "example.com", "::"])
def test_cli_refuses_non_loopback_host(host, capsys):
    with pytest.raises(SystemExit) as ei:
        main(["--host", host, "--port", "0"])
    assert ei.value.code != 0
    assert "loopback" in capsys.readouterr().err


def test_constructor_refuses_non_loopback_host():
    with pytest.raises(ValueError):
        LoopbackLLM(host="0.0.0.0")


def test_cli_serves_script_until_sigterm(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            {
                "rules": [{"model": "m", "contains": "ping", "response": "pong"}],
                "replays": [
                    {"model": "r", "answers": {"How many singers?": "SELECT count(*) FROM singer"}}
                ],
                "default": None,
            }
        )
    )
    env = dict(os.environ)
    pkg_dirs = [
        Path(loopback.__file__).resolve().parents[2],  # the folder holding nl2sql_indexer
        Path(nl2sql.__file__).resolve().parent.parent,
    ]  # nl2sql (the prompt marker)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, pkg_dirs), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nl2sql_indexer.dev.loopback",
            "--port",
            "0",
            "--script",
            str(script),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith(
            "loopback LLM (scripted answers, not a model) listening on http://127.0.0.1:"
        )
        base_url = line.rsplit(" ", 1)[1].strip()
        assert base_url.endswith("/v1")
        c = openai.OpenAI(base_url=base_url, api_key="x", max_retries=0, timeout=5)
        assert ask(c, "m", "ping?") == "pong"
        assert ask(c, "r", prompt("How many singers?")) == "SELECT count(*) FROM singer"
        with pytest.raises(openai.NotFoundError):
            ask(c, "m", "unscripted")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=3) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_clear_releases_a_hanging_request_without_a_retry():
    with LoopbackLLM() as server:
        server.add_rule(Rule(hang=True))
        c = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=2, timeout=30)
        result: dict = {}

        def call():
            try:
                ask(c, "m", "q")
            except openai.APIStatusError as e:
                result["status"] = e.status_code

        th = threading.Thread(target=call)
        th.start()
        deadline = time.monotonic() + 5
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.requests
        server.clear()
        th.join(5)
        assert not th.is_alive() and result.get("status") == 400
        time.sleep(0.3)
        assert server.requests == []  # the client did not come back with a retry


def test_a_client_gone_before_its_answer_prints_no_traceback(llm, capsys):
    # a client that timed out on a delayed reply closed the connection: writing the answer
    # fails with a broken pipe, which is no error of the server (a soak makes hundreds)
    for gone in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset")):
        try:
            raise gone
        except OSError:
            llm._server.handle_error(None, ("127.0.0.1", 1))
    assert capsys.readouterr().err == ""
    try:
        raise ValueError("a handler's own failure")
    except ValueError:
        llm._server.handle_error(None, ("127.0.0.1", 1))
    err = capsys.readouterr().err
    assert "ValueError: a handler's own failure" in err
