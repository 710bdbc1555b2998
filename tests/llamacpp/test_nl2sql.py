"""nl2sql through llama-server: the demo database, two models on the one server
(Qwen2.5-Coder-0.5B-Instruct, a small instruct code model, at temperatures 0 and 0.7), every
demo question asked with ``nl2sql.explain``. No test asserts an answer is right (accuracy is
bench/live.py's); the questions must be answered with SQL that runs.

Each question must end in an answer, a clear nl2sql error or an abstention, never an internal
error; no model call may be refused by the server (its context, ``n``, any HTTP error) or time
out; the tokens in the trace must be what the server counted; ``doctor()`` must not fail the
models; with ``samples_per_model`` 3 (more than the server's ``n`` allows: 2, its slots) every
sample must be made and counted.
"""

from __future__ import annotations

import json
import os
import re
import time

import psycopg
import pytest

from nl2sql_indexer.dev.demo_data import DEMO_QUESTIONS, demo_sql

from .conftest import ALIAS, INSTRUCT, SLOT_CTX

DB = "nl2sql_llamacpp"
# (name, temperature): both on the one server; the first writes the PreSQL
MODELS = (("qwen-a", 0.0), ("qwen-b", 0.7))
MAX_TOKENS = 160  # a demo query fits with room (Gemma's wide_db replies ramble on to the cap)
TIMEOUT_S = 180  # generous: two cores, two slots, several calls at once
# what an internal error looks like in a message: a Python exception's class name and colon
INTERNAL = re.compile(r"\b(Traceback|[A-Z][A-Za-z]*(Error|Exception):)")
# what a server's refusal or a cut-off call looks like in a trace
REFUSED = (
    "Context size has been exceeded",
    "exceeds the available context size",
    "exceed_context_size_error",
    "endpoint answered HTTP",
    "no answer within",
    "no complete answer within",
)


def _add_models(conn, base_url: str, model: str) -> None:
    for i, (name, temperature) in enumerate(MODELS):
        conn.execute(
            "SELECT nl2sql.add_model(%s, %s, base_url => %s, temperature => %s, "
            "timeout_s => %s, max_tokens => %s, priority => %s)",
            (name, model, base_url, temperature, TIMEOUT_S, MAX_TOKENS, i),
        )


@pytest.fixture(scope="module")
def instruct_db(qwen_server, cluster):
    """The demo database indexed, with the two models on the instruct model's server; one
    repair round; ``examples_when`` at its default (``auto``: the server's ``/props`` makes
    the models local, so the examples come only on failure)."""
    cluster.create_database(DB, drop=True)
    conn = cluster.connect(DB)
    conn.execute(demo_sql())
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    conn.execute("SELECT nl2sql.reindex()")
    _add_models(conn, qwen_server.base_url, INSTRUCT)
    conn.execute("SELECT nl2sql.set_setting('repair_rounds', '1')")
    yield conn
    conn.close()


def _server_tokens(server) -> tuple[float, float]:
    """(prompt tokens, completion tokens) the server has counted so far: processed and cached
    prompt tokens, generated tokens."""
    m = server.metrics()
    return m["prompt_tokens_total"] + m["prompt_tokens_cached_total"], m["tokens_predicted_total"]


def _ask(conn, server, question: str) -> dict:
    """``{"question", "trace" (None when explain raised), "raised", "server_tokens", "s"}``."""
    p0, c0 = _server_tokens(server)
    t0 = time.monotonic()
    try:
        trace, raised = conn.execute("SELECT nl2sql.explain(%s)", (question,)).fetchone()[0], None
    except psycopg.Error as e:
        trace, raised = None, str(e)
    p1, c1 = _server_tokens(server)
    return {
        "question": question,
        "trace": trace,
        "raised": raised,
        "server_tokens": (p1 - p0, c1 - c0),
        "s": round(time.monotonic() - t0, 1),
    }


# the demo questions asked: every other one (a filter, an ORDER BY, a join with GROUP BY, two
# joins, NOT IN), each three to four calls of about 1,500 prompt tokens on one core (94 s a
# question at load 4 to 14, 2026-11-28); NL2SQL_LLAMACPP_ALL=1 asks all ten
ASKED = DEMO_QUESTIONS if os.environ.get("NL2SQL_LLAMACPP_ALL") else DEMO_QUESTIONS[1::2]


@pytest.fixture(scope="module")
def asked(instruct_db, qwen_server):
    """The demo questions of ``ASKED``, each asked once through ``nl2sql.explain``."""
    return [_ask(instruct_db, qwen_server, q) for q, _gold in ASKED]


def _refusals(found) -> list[str]:
    """Every text of a trace (or error message) that shows a refusal by the server or a call
    cut off, each cut at 300 characters."""
    if isinstance(found, str):
        return [found[:300]] if any(r in found for r in REFUSED) else []
    if isinstance(found, dict):
        found = list(found.values())
    if isinstance(found, list):
        return [t for v in found for t in _refusals(v)]
    return []


def _model_replies(trace: dict) -> list[dict]:
    """Every model call a trace records: PreSQL and FinSQL replies, repair calls (these have
    tokens only: a failed repair call is in its candidate's ``repairs``), the last resort."""
    out = []
    if (pre := trace.get("presql")) is not None:
        out.append(pre["reply"])
    out += (trace.get("finsql") or {}).get("replies", [])
    out += (trace.get("repair") or {}).get("calls", [])
    if (last := trace.get("last_resort")) is not None:
        out.append(last["reply"])
    return out


def test_the_real_server_counts_as_local_so_the_first_prompt_holds_no_examples(asked):
    """``examples_when`` = ``auto``: llama-server states its window at ``GET /props``, so the
    PreSQL prompt of every question holds no retrieved example (its cache keeps the rest)."""
    traced = [a["trace"] for a in asked if a["trace"] is not None]
    # the first prompt: the PreSQL's in two rounds, the one round's FinSQL prompt else
    first = [(t.get("presql") or t.get("finsql") or {}).get("prompt") for t in traced]
    assert first and all(first), [sorted(t) for t in traced]
    assert all("/* Some example questions" not in p for p in first)


def test_every_question_ends_in_an_answer_a_clear_error_or_an_abstention(asked):
    outcomes = {}
    for a in asked:
        q, trace = a["question"], a["trace"]
        if trace is None:  # raised: only nl2sql's own errors are clear ones
            assert a["raised"].startswith("nl2sql"), (q, a["raised"])
            assert not INTERNAL.search(a["raised"]), (q, a["raised"])
            outcomes[q] = "raised"
            continue
        if trace.get("sql"):
            outcomes[q] = "answer"
        elif trace.get("abstained"):
            outcomes[q] = "abstained"
        else:
            assert (trace.get("error") or "").startswith("nl2sql: "), (q, trace.get("error"))
            outcomes[q] = trace["error"][:80]
        for r in _model_replies(trace):
            assert not INTERNAL.search(r.get("error") or ""), (q, r["error"])
        for c in trace.get("candidates") or []:
            assert not INTERNAL.search(c.get("reason") or ""), (q, c["source"], c["reason"])
        assert not INTERNAL.search(trace.get("error") or ""), (q, trace["error"])
    print(json.dumps({a["question"]: [outcomes[a["question"]], a["s"]] for a in asked}, indent=1))


ANSWERED_AT_LEAST = 0.8  # of the demo questions; a 0.5B model misses a join now and then


def test_the_demo_questions_are_answered_with_sql_that_runs(asked):
    """A model that writes SQL answers the demo questions with queries that executed (right or
    not: bench/live.py measures that): at least ``ANSWERED_AT_LEAST`` of them, and every chosen
    query is one that ran."""
    answered, missed = 0, {}
    for a in asked:
        trace = a["trace"]
        assert trace is not None, (a["question"], a["raised"])
        if not trace.get("sql"):
            missed[a["question"]] = (trace.get("error") or "")[:300]
            continue
        chosen = [c for c in trace["candidates"] if c.get("sql") == trace["sql"]]
        assert chosen and all(c["status"] == "ok" for c in chosen), (a["question"], chosen)
        answered += 1
    assert answered >= ANSWERED_AT_LEAST * len(asked), missed


def test_no_model_call_is_refused_by_the_server_or_cut_off(asked):
    for a in asked:
        assert _refusals(a["raised"] or a["trace"]) == [], a["question"]
        if a["trace"] is not None:
            replies = _model_replies(a["trace"])
            assert replies, a["question"]
            assert [r["error"] for r in replies if r.get("error")] == [], a["question"]


def test_tokens_in_the_trace_are_what_the_server_counted(asked):
    for a in asked:
        trace = a["trace"]
        assert trace is not None, (a["question"], a["raised"])
        tokens = trace["tokens"]
        assert tokens["sources"] == ["endpoint"], (a["question"], tokens)
        assert tokens["estimated"] == 0
        prompt, completion = a["server_tokens"]
        assert (tokens["prompt"], tokens["completion"]) == (prompt, completion), a["question"]
        replies = _model_replies(trace)
        assert tokens["prompt"] == sum(r["prompt_tokens"] for r in replies)
        for r in replies:
            assert 0 < r["completion_tokens"] <= MAX_TOKENS, (a["question"], r)


def test_doctor_fails_no_model(instruct_db):
    rows = instruct_db.execute('SELECT "check", status, detail FROM nl2sql.doctor()').fetchall()
    by_check = {c: (s, d) for c, s, d in rows}
    for name, _t in MODELS:
        assert by_check[f"model {name} endpoint"][0] == "ok", by_check[f"model {name} endpoint"]
    failing = [r for r in rows if r[1] == "fail" and r[0].startswith("model")]
    assert failing == []


def test_samples_beyond_what_the_server_allows_in_one_request_are_all_made_and_counted(
    instruct_db, qwen_server
):
    samples = 3  # the server takes n <= 2 (its slots): "Field 'n': Value must be between ..."
    instruct_db.execute("SELECT nl2sql.set_setting('samples_per_model', %s)", (str(samples),))
    instruct_db.execute("SELECT nl2sql.set_setting('repair_rounds', '0')")
    try:
        a = _ask(instruct_db, qwen_server, DEMO_QUESTIONS[0][0])
    finally:
        instruct_db.execute("SELECT nl2sql.reset_setting('samples_per_model')")
        instruct_db.execute("SELECT nl2sql.set_setting('repair_rounds', '1')")
    trace = a["trace"]
    assert trace is not None, a["raised"]
    assert _refusals(trace) == []
    finsql = [c for c in trace["candidates"] if c["source"].startswith("finsql:")]
    for name, _t in MODELS:
        mine = [c for c in finsql if c["model"] == name]
        assert len(mine) == samples, [(c["source"], c["reason"]) for c in mine]
        assert not [c["reason"] for c in mine if (c["reason"] or "").startswith("no answer")]
    # every sample's tokens counted: the trace's total is what the server counted
    tokens = trace["tokens"]
    assert (tokens["prompt"], tokens["completion"]) == a["server_tokens"]
    assert tokens["completion"] >= samples * len(MODELS)


# --- a schema wider than a slot's window ------------------------------------------------------

LEDGER_COLUMNS = (
    ("account_code", "text", "the chart-of-accounts code the amount is posted to"),
    ("counterparty", "text", "the company or person on the other side of the posting"),
    ("amount", "numeric(12,2)", "the amount posted, in the currency below, net of reversals"),
    ("currency", "text", "the ISO 4217 code of the currency of the amount"),
    ("posted_on", "date", "the day the entry was posted to the ledger"),
    ("value_date", "date", "the day the amount is valued at, for interest and exchange"),
    ("cost_center", "text", "the cost centre that carries the expense or the revenue"),
    ("approved_by", "text", "the name of the person who approved the posting"),
    ("memo", "text", "free text the bookkeeper wrote about the entry"),
    ("reversal_of", "integer", "the entry this one reverses, when it is a reversal"),
    ("batch_no", "integer", "the number of the import batch the entry came with"),
)
LEDGERS = 40  # the whole schema's prompt: several times a slot's window


def _ledgers_sql() -> str:
    parts = []
    for i in range(LEDGERS):
        t = f"ledger_{i:02d}"
        cols = "".join(f", {c} {ty}" for c, ty, _ in LEDGER_COLUMNS)
        parts.append(f"CREATE TABLE {t} (entry_id integer PRIMARY KEY{cols});")
        parts.append(
            f"COMMENT ON TABLE {t} IS 'General-ledger entries of the concert business, "
            f"region {i}: one row per posting, reversals included';"
        )
        parts += [f"COMMENT ON COLUMN {t}.{c} IS '{text}';" for c, _ty, text in LEDGER_COLUMNS]
    return "\n".join(parts)


@pytest.fixture(scope="module")
def wide_db(llama_server, cluster):
    """The demo database and 40 ledger tables, the two models, and a prompt budget sized for a
    large-context model (the whole schema, several times a slot's window, is not pruned by it)."""
    cluster.create_database(f"{DB}_wide", drop=True)
    conn = cluster.connect(f"{DB}_wide")
    conn.execute(demo_sql())
    conn.execute(_ledgers_sql())
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    conn.execute("SELECT nl2sql.reindex()")
    _add_models(conn, llama_server.base_url, ALIAS)
    conn.execute("SELECT nl2sql.set_setting('repair_rounds', '0')")
    conn.execute("SELECT nl2sql.set_setting('prompt_token_budget', '100000')")
    yield conn
    conn.close()


def test_a_schema_wider_than_the_window_is_fitted_to_it_not_refused(wide_db, llama_server):
    a = _ask(wide_db, llama_server, DEMO_QUESTIONS[0][0])
    trace = a["trace"]
    assert trace is not None, a["raised"]
    assert _refusals(trace) == []
    pre = trace["presql"]["reply"]
    assert pre["error"] is None
    # the prompt left room in the slot for the reply
    assert pre["prompt_tokens"] + MAX_TOKENS <= SLOT_CTX, pre["prompt_tokens"]
