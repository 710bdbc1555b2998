"""One or two model rounds (setting ``model_rounds``) inside a real PostgreSQL: the requests the
scripted loopback server receives, the chosen SQL and the trace.

Every model answer here is scripted (tests/conftest.py), not a model's.
"""

from __future__ import annotations

import pytest

from conftest import add_models
from nl2sql_indexer.dev.loopback import Rule

ROUND_KEYS = ["model_rounds", "prompt_token_budget", "hardness_voters", "repair_rounds"]
ROUND_KEYS += ["examples_when"]
EXAMPLES = "/* Some example questions"
INSTRUCTION = "/* Complete PostgreSQL SQL query only"
Q = "How many singers do we have?"
SINGERS = "SELECT count(*) FROM singer"
CONCERTS = "SELECT count(*) FROM concert"


@pytest.fixture
def rdb(db, llm):
    """The demo connection with PreSQL not voting and three models: m1 and m2 count singers,
    m3 counts concerts; the round settings back to their defaults afterwards."""
    db.execute("SELECT nl2sql.set_setting('presql_votes', 'off')")
    add_models(db, llm, ["m1", "m2", "m3"])
    for m, sql in (("m1", SINGERS), ("m2", SINGERS), ("m3", CONCERTS)):
        llm.add_rule(Rule(model=m, response=sql))
    yield db
    for k in ROUND_KEYS:
        db.execute("SELECT nl2sql.reset_setting(%s)", (k,))


def setting(conn, key, value):
    conn.execute("SELECT nl2sql.set_setting(%s, %s)", (key, value))


def explain(conn, q=Q):
    return conn.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]


def prompts(llm):
    return [r["messages"][-1]["content"] for r in llm.requests]


def normalized(sql):
    return sql.lower().replace(" ", "")


def assert_one_round(trace, llm):
    """Each model asked once with the same prompt (the PreSQL prompt: the whole demo
    schema), no PreSQL request, every answer a FinSQL candidate; the majority chosen."""
    assert sorted(r["model"] for r in llm.requests) == ["m1", "m2", "m3"]
    sent = prompts(llm)
    assert len(set(sent)) == 1
    assert all(f"CREATE TABLE {t} (" in sent[0] for t in ("stadium", "singer", "concert"))
    assert trace["rounds"] == 1
    assert "presql" not in trace and "linked_tables" not in trace and "linking" not in trace
    assert trace["finsql"]["prompt"] == sent[0]
    assert [r["model"] for r in trace["finsql"]["replies"]] == ["m1", "m2", "m3"]
    assert [c["source"] for c in trace["candidates"]] == ["finsql:m1", "finsql:m2", "finsql:m3"]
    assert normalized(trace["sql"]) == normalized(SINGERS)
    assert trace["confidence"] == pytest.approx(2 / 3, abs=1e-3)
    assert trace["hardness"]["presql"] == "easy"  # m1's answer stands for the PreSQL
    assert trace["hardness"]["reason"].startswith("one round: the first model's answer")
    assert trace["tokens"]["by_model"]["m1"]["calls"] == 1
    assert sum(m["calls"] for m in trace["tokens"]["by_model"].values()) == 3
    assert "presql" not in trace["llm_waits_ms"] and "finsql" in trace["llm_waits_ms"]
    assert trace["pruning"]["pruned"] is False


def test_one_round_asks_each_model_once_from_the_presql_prompt(rdb, llm):
    setting(rdb, "model_rounds", "one")
    trace = explain(rdb)
    assert_one_round(trace, llm)
    assert trace["rounds_reason"].startswith("model_rounds is one")
    assert "columns_similar" in trace  # the late lookups ran while the round was out
    assert rdb.execute(trace["sql"]).fetchone() == rdb.execute(SINGERS).fetchone()
    logged = rdb.execute(
        "SELECT sql, trace->'rounds' FROM nl2sql.query_log ORDER BY id DESC LIMIT 1"
    ).fetchone()
    assert normalized(logged[0]) == normalized(SINGERS) and logged[1] == 1


def test_auto_is_the_default_and_takes_one_round_on_a_small_schema(rdb, llm):
    rdb.execute("SELECT nl2sql.reset_setting('model_rounds')")  # tests/conftest.py set two
    assert (
        rdb.execute("SELECT value FROM nl2sql.settings WHERE name = 'model_rounds'").fetchone()[0]
        == "auto"
    )
    trace = explain(rdb)
    assert_one_round(trace, llm)
    assert trace["rounds_reason"].startswith("model_rounds is auto and the whole schema")
    assert f"fits prompt_token_budget {trace['pruning']['budget']}" in trace["rounds_reason"]


def test_auto_takes_two_rounds_when_the_schema_is_pruned(rdb, llm):
    setting(rdb, "model_rounds", "auto")
    setting(rdb, "prompt_token_budget", "500")
    trace = explain(rdb)
    assert trace["pruning"]["pruned"] is True
    assert trace["rounds"] == 2 and "exceeds prompt_token_budget 500" in trace["rounds_reason"]
    asked = [r["model"] for r in llm.requests]
    assert asked[0] == "m1" and sorted(asked[1:]) == ["m1", "m2", "m3"]  # PreSQL, FinSQL
    assert trace["presql"]["reply"]["model"] == "m1" and trace["linked_tables"]
    assert normalized(trace["sql"]) == normalized(SINGERS)


def test_two_rounds_are_as_before(rdb, llm):
    setting(rdb, "model_rounds", "two")
    trace = explain(rdb)
    assert trace["rounds"] == 2 and trace["rounds_reason"].startswith("model_rounds is two")
    assert [r["model"] for r in llm.requests][0] == "m1"
    assert sorted(r["model"] for r in llm.requests[1:]) == ["m1", "m2", "m3"]
    presql_prompt, finsql_prompts = prompts(llm)[0], set(prompts(llm)[1:])
    assert trace["presql"]["prompt"] == presql_prompt and len(finsql_prompts) == 1
    assert trace["linked_tables"] == ["singer"] and "CREATE TABLE stadium (" not in (
        finsql_prompts.pop()
    )
    assert [c["source"] for c in trace["candidates"]] == ["finsql:m1", "finsql:m2", "finsql:m3"]
    assert normalized(trace["sql"]) == normalized(SINGERS)
    assert {"presql", "finsql"} <= set(trace["llm_waits_ms"])
    assert trace["tokens"]["by_model"]["m1"]["calls"] == 2


def test_one_round_routes_the_voters_by_the_first_answer_after_the_round(rdb, llm):
    setting(rdb, "model_rounds", "one")
    setting(rdb, "hardness_voters", '{"easy": ["m3"], "extra": ["m1", "m2"]}')
    trace = explain(rdb)
    assert sorted(r["model"] for r in llm.requests) == ["m1", "m2", "m3"]  # all asked once
    assert trace["hardness"]["presql"] == "easy" and trace["hardness"]["voters"] == ["m3"]
    assert trace["hardness"]["reason"].endswith("the answers of m1, m2 do not vote")
    assert [c["source"] for c in trace["candidates"]] == ["finsql:m3"]
    assert normalized(trace["sql"]) == normalized(CONCERTS)


def m1_repaired(llm, first: str) -> None:
    """m1 answers ``first``, then (asked to repair) counts singers; m2 counts singers, m3
    concerts: no answer holds a majority before the repair, so m1's candidate is repaired."""
    llm.clear()
    llm.add_rule(Rule(model="m1", contains="Repair round 1", response=SINGERS))
    llm.add_rule(Rule(model="m1", response=first))
    llm.add_rule(Rule(model="m2", response=SINGERS))
    llm.add_rule(Rule(model="m3", response=CONCERTS))


def test_one_round_repairs_a_failing_candidate_with_its_prompt(rdb, llm):
    setting(rdb, "model_rounds", "one")
    m1_repaired(llm, "SELECT count(xyzzy) FROM singer")
    trace = explain(rdb)
    sent = prompts(llm)
    assert [r["model"] for r in llm.requests].count("m1") == 2 and len(sent) == 4
    repair = next(p for p in sent if "Repair round 1" in p)
    assert "xyzzy" in repair and "CREATE TABLE stadium (" in repair  # the one round's prompt
    c = next(c for c in trace["candidates"] if c["source"] == "finsql:m1")
    assert c["status"] == "ok" and [r["round"] for r in c["repairs"]] == [1]
    assert normalized(trace["sql"]) == normalized(SINGERS) and trace["confidence"] == 2 / 3


@pytest.mark.parametrize("when", ["always", "on_failure"])
def test_examples_when_on_failure_come_with_the_repair_only(rdb, llm, when):
    """``examples_when``: with ``on_failure`` the one round's prompt holds no retrieved example
    and the repair of the failed candidate adds them after all the first prompt shared (the
    schema, instruction and values stay the prefix a server's prompt cache keeps)."""
    setting(rdb, "model_rounds", "one")
    setting(rdb, "examples_when", when)
    m1_repaired(llm, "SELECT count(xyzzy) FROM singer")
    trace = explain(rdb)
    sent = prompts(llm)
    first = [p for p in sent if "Repair round" not in p]
    repair = next(p for p in sent if "Repair round 1" in p)
    assert len(first) == 3 and len(set(first)) == 1 and "xyzzy" in repair
    assert (EXAMPLES in first[0]) == (when == "always")
    assert EXAMPLES in repair  # the demo's pool has examples for this question
    head = first[0][: first[0].rindex("/* Answer the following: ")]  # all but the question
    assert repair.startswith(head.rstrip()) and first[0].index(INSTRUCTION) < len(head)
    c = next(c for c in trace["candidates"] if c["source"] == "finsql:m1")
    assert c["status"] == "ok" and [r["round"] for r in c["repairs"]] == [1]


@pytest.mark.parametrize("profile", ["llamacpp", None])
def test_examples_when_auto_leaves_them_out_for_local_servers_only(db, llm, profile):
    """``examples_when`` = ``auto`` (the default): models whose server states its window as
    llama.cpp does (``GET /props``) get the first prompt without retrieved examples; a model on
    another endpoint gets them. Model names of their own: each backend keeps what it learned of
    a server."""
    names = [f"auto-{profile}-1", f"auto-{profile}-2"]
    for n in names:
        if profile:
            llm.set_profile(n, profile)
        llm.add_rule(Rule(model=n, response=SINGERS))
    add_models(db, llm, names)
    setting(db, "model_rounds", "one")  # (the db fixture sets it back, and drops the models)
    setting(db, "presql_votes", "off")
    trace = explain(db)
    first = prompts(llm)
    assert len(first) == 2 and len(set(first)) == 1 and INSTRUCTION in first[0]
    assert (EXAMPLES in first[0]) == (profile is None)
    assert normalized(trace["sql"]) == normalized(SINGERS)


def test_a_join_compared_with_itself_is_repaired_though_it_ran(rdb, llm):
    """A candidate whose join condition compares a column with itself runs (a cross product)
    and is still sent to repair; the repaired query takes its place."""
    setting(rdb, "model_rounds", "one")
    m1_repaired(
        llm, "SELECT count(*) FROM singer AS s JOIN concert AS c ON s.singer_id = s.singer_id"
    )
    trace = explain(rdb)
    repair = next(p for p in prompts(llm) if "Repair round 1" in p)
    assert "s.singer_id = s.singer_id compares a column with itself" in repair
    c = next(c for c in trace["candidates"] if c["source"] == "finsql:m1")
    assert c["status"] == "ok" and [r["round"] for r in c["repairs"]] == [1]
    assert normalized(c["sql"]) == normalized(SINGERS)
