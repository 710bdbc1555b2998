"""Questions through endpoints that behave as the providers of 2026 do (the loopback server's
profiles, emulated from their documentation; answers scripted, never a model's): what each
model was sent and taught shows in explain and doctor(), samples come back where ``n`` is
refused or ignored, and a reasoning model's thinking is counted."""

from __future__ import annotations

import psycopg
import pytest

from nl2sql_indexer.dev.loopback import Rule

SQL = "SELECT count(*) FROM singer"
Q = "How many singers are there?"

# name configured, its profile, the model id it is configured with
MODELS = [
    ("gpt5", "openai-reasoning", "gpt-5"),
    ("azure", "azure-openai-reasoning", "prod-sql-writer"),
    ("local", "llamacpp", "gemma-3-270m"),
    ("ollama", "ollama", "llama3.2"),
    ("magistral", "mistral-reasoning", "magistral-medium-latest"),
]


@pytest.fixture
def providers(db, llm):
    """The five models above, each on its profile, all answering ``SQL``."""
    for i, (name, profile, model) in enumerate(MODELS):
        llm.set_profile(model, profile)
        llm.add_rule(Rule(model=model, response=SQL))
        db.execute(
            "SELECT nl2sql.add_model(%s, %s, base_url => %s, priority => %s, timeout_s => 20)",
            (name, model, llm.base_url, i),
        )
    db.execute("SELECT nl2sql.set_setting('samples_per_model', '3')")
    yield db
    db.execute("SELECT nl2sql.reset_setting('samples_per_model')")


def _calls(trace: dict) -> list[dict]:
    return [trace["presql"]["reply"], *trace["finsql"]["replies"]]


def test_every_provider_answers_with_three_samples_and_the_trace_says_what_was_sent(providers, llm):
    t = providers.execute("SELECT nl2sql.explain(%s)", (Q,)).fetchone()[0]
    assert t["sql"].lower().replace(" ", "") == "selectcount(*)fromsinger"
    replies = t["finsql"]["replies"]
    assert [r["model"] for r in replies] == [m[0] for m in MODELS]
    assert all(r["error"] is None for r in _calls(t)), [r["error"] for r in _calls(t)]
    finsql = [c for c in t["candidates"] if c["source"].startswith("finsql:")]
    assert len(finsql) == 3 * len(MODELS)  # n refused (llama.cpp), ignored (Ollama): filled
    by = {r["model"]: r for r in replies}
    assert by["gpt5"]["request"]["sent"]["max_completion_tokens"] == 8192
    assert by["gpt5"]["reasoning_tokens"] > 0  # hidden thinking, counted
    assert "temperature" not in by["gpt5"]["request"]["sent"]
    # llama.cpp (its /props says so): one request per sample, never n
    assert by["local"]["request"]["requests"] == 3 and "n" not in by["local"]["request"]["sent"]
    assert by["local"]["request"]["context_window"] == 2048  # llama.cpp's /props
    assert by["ollama"]["request"]["requests"] == 3
    # the Azure deployment's name said nothing: its call learned the shape and says so (its
    # samples go at temperature 1, the one value a reasoning model takes: nothing to learn there)
    learned = " ".join(by["azure"]["learned"])
    assert "cap_parameter" in learned and "max_output = 8192" in learned
    assert {r["model"] for r in llm.requests if r["refused"]} == {"prod-sql-writer"}


def test_doctor_shows_what_each_model_is_sent_and_what_it_learned(providers):
    providers.execute("SELECT nl2sql.explain(%s)", (Q,))
    rows = {
        r[0]: (r[1], r[2])
        for r in providers.execute('SELECT "check", status, detail FROM nl2sql.doctor()')
        if r[0].endswith(" requests")
    }
    assert set(rows) == {f"model {m[0]} requests" for m in MODELS}
    status, detail = rows["model azure requests"]
    assert "max_completion_tokens=8192" in detail and status == "warn"  # keep it: add_model
    assert "learned" in detail and "max_tokens refused" in detail
    status, detail = rows["model local requests"]
    assert "samples as separate requests" in detail and "context window 2048" in detail
    assert "OpenAI GPT-5" in rows["model gpt5 requests"][1]


def test_add_model_again_starts_a_model_afresh(providers, llm):
    providers.execute("SELECT nl2sql.explain(%s)", (Q,))
    providers.execute(
        "SELECT nl2sql.add_model('azure', 'prod-sql-writer', base_url => %s, priority => 1, "
        "timeout_s => 20)",
        (llm.base_url,),
    )
    llm.clear()
    for _name, profile, model in MODELS:
        llm.set_profile(model, profile)
        llm.add_rule(Rule(model=model, response=SQL))
    providers.execute("SELECT nl2sql.explain(%s)", (Q,))
    refused = [r for r in llm.requests if r["refused"]]
    assert refused and {r["model"] for r in refused} == {"prod-sql-writer"}


@pytest.mark.parametrize(
    "args,message",
    [
        ("max_tokens => 100, max_completion_tokens => 100", "not both"),
        ("max_completion_tokens => 0", "token counts > 0"),
        ("context_window => -1", "token counts > 0"),
        ("reasoning_effort => 'High; DROP'", "reasoning_effort must be"),
        ("base_url => 'http://user:secret@10.0.0.5/v1'", "must not carry credentials"),
        ("base_url => 'https://u:p@api.example/v1'", "must not carry credentials"),
    ],
)
def test_add_model_refuses_request_arguments_that_cannot_be_sent(db, args, message):
    with pytest.raises(psycopg.errors.RaiseException, match=message):
        db.execute(f"SELECT nl2sql.add_model('x', 'gpt-5', {args})")


def test_add_model_keeps_the_providers_words(db):
    db.execute(
        "SELECT nl2sql.add_model('x', 'prod-sql-writer', max_completion_tokens => 9000, "
        "reasoning_effort => 'low', send_temperature => false, send_n => false, "
        "context_window => 128000)"
    )
    row = db.execute(
        "SELECT max_tokens, cap_parameter, reasoning_effort, send_temperature, send_n, "
        "context_window FROM nl2sql.model WHERE name = 'x'"
    ).fetchone()
    assert row == (9000, "max_completion_tokens", "low", False, False, 128000)


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": -5, "completion_tokens": -1, "total_tokens": -6},
        {"prompt_tokens": 10**20, "completion_tokens": 10**20, "total_tokens": 2 * 10**20},
        {"prompt_tokens": "many", "completion_tokens": None},
    ],
)
def test_an_endpoints_broken_usage_never_fails_a_question(db, llm, usage):
    db.execute(
        "SELECT nl2sql.add_model('m1', 'm1', base_url => %s, timeout_s => 10)", (llm.base_url,)
    )
    llm.add_rule(Rule(model="m1", response=SQL, usage=usage))
    assert db.execute("SELECT nl2sql(%s)", (Q,)).fetchone()[0]
    t = db.execute("SELECT nl2sql.explain(%s)", (Q,)).fetchone()[0]
    reply = t["presql"]["reply"]
    assert reply["tokens_source"] != "endpoint" and 0 < reply["prompt_tokens"] < 10**6
    assert any("not sane" in x for x in reply["learned"])  # flagged in the trace
