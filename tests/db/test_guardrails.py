"""Guardrails a DBA sets (docs/guardrails.md), inside PostgreSQL with scripted loopback models:
the plan-cost limit (cost and rows, before a candidate runs), per-role quotas (questions per
minute, tokens per day, the last slot under two sessions) and the tokens and cost of each call.

Every model answer here is scripted (tests/conftest.py), not a model's.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import psycopg
import pytest

from conftest import DEMO_DB, add_models, login_role
from nl2sql_indexer.dev.loopback import Rule

Q = "How many singers do we have?"
SMALL = "SELECT count(*) FROM singer"
CROSS = "SELECT count(*) FROM singer a, singer b, singer c, concert d WHERE a.name < b.name"
WIDE = "SELECT a.name FROM singer a, singer b, singer c, concert d"
TABLES = "singer, concert, stadium, singer_in_concert"
ASKER, OTHER = "nl2sql_i26_asker", "nl2sql_i26_other"
KEYS = ("max_plan_cost", "max_plan_rows", "repair_rounds", "presql_votes")


@pytest.fixture
def gdb(db):
    """The demo database, its tables analyzed: PreSQL not voting, no repair; guardrail settings,
    quotas and usage reset before and after."""

    def reset():
        for k in KEYS:
            db.execute("SELECT nl2sql.reset_setting(%s)", (k,))
        db.execute("DELETE FROM nl2sql.quota")
        db.execute("DELETE FROM nl2sql.usage_day")
        db.execute("DELETE FROM nl2sql.verified_query")

    reset()
    # the planner's estimates from statistics taken now, not from whenever autovacuum's ANALYZE
    # comes: a cost the test reads must be the cost the candidate is planned with
    db.execute(f"ANALYZE {TABLES}")
    db.execute("SELECT nl2sql.set_setting('presql_votes', 'off')")
    db.execute("SELECT nl2sql.set_setting('repair_rounds', '0')")
    for role in (ASKER, OTHER):
        login_role(db, role, TABLES)
    yield db
    reset()


def plan(conn, sql: str) -> tuple[float, float]:
    root = conn.execute("EXPLAIN (FORMAT JSON) " + sql).fetchone()[0][0]["Plan"]
    return root["Total Cost"], root["Plan Rows"]


def explain(conn, q=Q) -> dict:
    return conn.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]


def cand(trace: dict, model: str) -> dict:
    return next(c for c in trace["candidates"] if c["source"] == f"finsql:{model}")


def script(llm, **answers):
    for model, sql in answers.items():
        llm.add_rule(Rule(model=model, response=sql))


# --------------------------------------------------------------------------------------------
# the plan-cost limit
# --------------------------------------------------------------------------------------------


def test_a_plan_over_max_plan_cost_is_refused_before_it_runs_and_does_not_vote(gdb, llm):
    small, big = plan(gdb, SMALL)[0], plan(gdb, CROSS)[0]
    assert big > 4 * small
    limit = (small + big) / 2
    gdb.execute("SELECT nl2sql.set_setting('max_plan_cost', %s)", (str(limit),))
    add_models(gdb, llm, ["m1", "m2", "m3"])
    script(llm, m1=CROSS, m2=CROSS, m3=SMALL)
    trace = explain(gdb)
    refused = cand(trace, "m1")
    assert refused["status"] == "refused"
    assert refused["reason"].startswith("refused before running: estimated cost")
    assert f"max_plan_cost {limit:g}" in refused["reason"]
    assert refused["plan_cost"] == pytest.approx(big, rel=0.01)
    assert refused["result_hash"] is None and refused["row_count"] is None
    ok = cand(trace, "m3")
    assert ok["status"] == "ok" and ok["plan_cost"] == pytest.approx(small, rel=0.01)
    assert ok["plan_rows"] == 1
    # two refused candidates do not outvote the one that ran
    assert trace["sql"].lower() == SMALL.lower() and trace["confidence"] == 1.0


def test_a_plan_over_max_plan_rows_is_refused(gdb, llm):
    few, many = plan(gdb, "SELECT name FROM singer")[1], plan(gdb, WIDE)[1]
    assert many > 4 * few
    gdb.execute("SELECT nl2sql.set_setting('max_plan_rows', %s)", (str(int((few + many) / 2)),))
    add_models(gdb, llm, ["m1", "m2"])
    script(llm, m1=WIDE, m2="SELECT name FROM singer")
    trace = explain(gdb, "List the singers' names.")
    assert cand(trace, "m1")["status"] == "refused"
    assert "estimated rows" in cand(trace, "m1")["reason"]
    assert "max_plan_rows" in cand(trace, "m1")["reason"]
    assert cand(trace, "m1")["plan_rows"] == pytest.approx(many, rel=0.01)
    assert cand(trace, "m2")["status"] == "ok"


def test_every_candidate_over_the_limit_names_the_setting_to_raise(gdb, llm):
    gdb.execute("SELECT nl2sql.set_setting('max_plan_cost', '0.5')")
    add_models(gdb, llm, ["m1", "m2"])
    script(llm, m1=CROSS, m2=SMALL)
    trace = explain(gdb)
    assert trace["sql"] is None
    assert "every candidate (2) was refused before running" in trace["error"]
    assert "max_plan_cost (now 0.5" in trace["error"]
    assert "nl2sql.set_setting('max_plan_cost'" in trace["error"]
    with pytest.raises(psycopg.Error, match="max_plan_cost"):
        gdb.execute("SELECT nl2sql(%s)", (Q,))


def test_no_limit_means_no_refusal(gdb, llm):
    gdb.execute("SELECT nl2sql.set_setting('max_plan_cost', '0')")
    gdb.execute("SELECT nl2sql.set_setting('max_plan_rows', '0')")
    add_models(gdb, llm, ["m1"])
    script(llm, m1=CROSS)
    assert cand(explain(gdb), "m1")["status"] == "ok"


# --------------------------------------------------------------------------------------------
# tokens and cost
# --------------------------------------------------------------------------------------------


def test_cost_per_call_per_model_and_in_usage(gdb, llm):
    for i, (name, pin, pout) in enumerate((("m1", 2.5, 10), ("m2", 0.15, 0.6))):
        gdb.execute(
            "SELECT nl2sql.add_model(%s, %s, base_url => %s, priority => %s, "
            "price_in_per_mtok => %s::numeric, price_out_per_mtok => %s::numeric)",
            (name, name, llm.base_url, i, pin, pout),
        )
    llm.set_default(SMALL)
    trace = explain(gdb)
    pre = trace["presql"]["reply"]
    assert pre["tokens_source"] == "endpoint" and pre["prompt_tokens"] > 100
    assert pre["cost_usd"] == pytest.approx(
        (pre["prompt_tokens"] * 2.5 + pre["completion_tokens"] * 10) / 1e6
    )
    m2 = trace["finsql"]["replies"][1]
    assert m2["model"] == "m2"
    assert m2["cost_usd"] == pytest.approx(
        (m2["prompt_tokens"] * 0.15 + m2["completion_tokens"] * 0.6) / 1e6
    )
    tok = trace["tokens"]
    assert tok["by_model"]["m1"]["calls"] == 2 and tok["by_model"]["m2"]["calls"] == 1
    replies = [pre, *trace["finsql"]["replies"]]
    assert tok["prompt"] == sum(r["prompt_tokens"] for r in replies)
    assert tok["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in replies))
    assert tok["sources"] == ["endpoint"] and tok["estimated"] == 0
    # the log keeps the same trace; the usage view sums it for the calling role
    logged = gdb.execute(
        "SELECT (trace->'tokens'->>'cost_usd')::float8 FROM nl2sql.query_log ORDER BY id DESC "
        "LIMIT 1"
    ).fetchone()[0]
    assert logged == pytest.approx(tok["cost_usd"])
    questions, tokens, cost = gdb.execute(
        "SELECT questions, tokens, cost_usd::float8 FROM nl2sql.usage"
    ).fetchone()
    assert (questions, tokens) == (1, tok["total"]) and cost == pytest.approx(tok["cost_usd"])


def test_without_usage_from_the_endpoint_tokens_are_counted_or_marked_estimated(gdb, llm):
    gdb.execute(
        "SELECT nl2sql.add_model('gpt', 'gpt-4o-mini', base_url => %s, priority => 0)",
        (llm.base_url,),
    )
    gdb.execute(
        "SELECT nl2sql.add_model('other', 'llama-3-70b', base_url => %s, priority => 1)",
        (llm.base_url,),
    )
    llm.add_rule(Rule(response=SMALL, usage=False))
    trace = explain(gdb)
    gpt, other = trace["finsql"]["replies"]
    assert gpt["tokens_source"] == "tokenizer:cl100k_base"
    assert gpt["completion_tokens"] == 5  # SELECT| count|(*)| FROM| singer in cl100k_base
    assert other["tokens_source"] == "estimate"
    assert other["completion_tokens"] == -(-len(SMALL) // 3.5)
    assert trace["tokens"]["cost_usd"] is None  # no price set
    assert trace["tokens"]["estimated"] == other["prompt_tokens"] + other["completion_tokens"]
    estimated = gdb.execute("SELECT estimated_tokens FROM nl2sql.usage").fetchone()[0]
    assert estimated == trace["tokens"]["estimated"]


def test_add_model_keeps_its_old_positional_signature(gdb, llm):
    gdb.execute(
        "SELECT nl2sql.add_model('old', 'gpt-4', %s, NULL, 0, 10, 512, 0, 'postgres')",
        (llm.base_url,),
    )
    row = gdb.execute(
        "SELECT price_in_per_mtok, price_out_per_mtok FROM nl2sql.model WHERE name = 'old'"
    ).fetchone()
    assert row == (None, None)
    with pytest.raises(psycopg.Error, match="prices must be >= 0"):
        gdb.execute("SELECT nl2sql.add_model('old', 'gpt-4', price_in_per_mtok => -1)")


# --------------------------------------------------------------------------------------------
# quotas
# --------------------------------------------------------------------------------------------


def as_role(cluster, role):
    return cluster.connect(DEMO_DB, user=role)


def away_from_minute_end():
    """Sleep past the next minute when fewer than 15 seconds of this one are left (a
    questions_per_minute window resets at each minute)."""
    s = datetime.now(UTC).second
    if s >= 45:
        time.sleep(61 - s)


def test_questions_per_minute_refuses_without_a_model_request(gdb, llm, cluster):
    add_models(gdb, llm, ["m1"])
    llm.set_default(SMALL)
    gdb.execute("SELECT nl2sql.set_quota(%s, questions_per_minute => 2)", (ASKER,))
    away_from_minute_end()
    with as_role(cluster, ASKER) as conn:
        explain(conn)
        explain(conn)
        llm.clear()
        with pytest.raises(psycopg.Error) as e:
            explain(conn)
        assert llm.requests == []
        msg = str(e.value)
        assert f"role {ASKER} is over questions_per_minute = 2 of its quota" in msg
        assert "2 questions this minute" in msg and "resets at" in msg
        assert "Nothing was sent to a model" in msg
        assert conn.execute("SELECT questions FROM nl2sql.usage").fetchone() == (2,)
    # another role has no quota: not limited, and counted too
    with as_role(cluster, OTHER) as conn:
        for _ in range(3):
            explain(conn)
        assert conn.execute("SELECT role_name, questions FROM nl2sql.usage").fetchall() == [
            (OTHER, 3)
        ]


def test_tokens_per_day_and_the_fast_path_costs_no_tokens(gdb, llm, cluster):
    add_models(gdb, llm, ["m1"])
    llm.set_default(SMALL)
    gdb.execute("SELECT nl2sql.add_verified_query(%s, %s)", (Q, SMALL))
    # the default quota (role public) applies to a role without its own
    gdb.execute("SELECT nl2sql.set_quota('public', tokens_per_day => 1)")
    with as_role(cluster, ASKER) as conn:
        explain(conn, "How many concerts are there?")  # under the limit when it starts
        used = conn.execute("SELECT tokens FROM nl2sql.usage").fetchone()[0]
        assert used > 1
        llm.clear()
        with pytest.raises(psycopg.Error) as e:
            explain(conn, "How many stadiums are there?")
        assert llm.requests == []
        assert "over tokens_per_day = 1 of the default quota (role public)" in str(e.value)
        assert f"{used} tokens today (UTC)" in str(e.value)
        # a verified query still answers: no model request, a question, no tokens
        trace = explain(conn, Q)
        assert trace["vote"]["method"] == "verified_query" and llm.requests == []
        assert trace["tokens"]["total"] == 0 and trace["tokens"]["cost_usd"] is None
        # the refused question is not counted (its statement failed)
        assert conn.execute("SELECT questions, tokens FROM nl2sql.usage").fetchone() == (2, used)
    # a role's own quota overrides the default; removing it falls back to the default
    gdb.execute("SELECT nl2sql.set_quota(%s)", (ASKER,))
    with as_role(cluster, ASKER) as conn:
        explain(conn, "How many stadiums are there?")
    assert gdb.execute("SELECT nl2sql.remove_quota(%s)", (ASKER,)).fetchone()[0] is True
    with as_role(cluster, ASKER) as conn, pytest.raises(psycopg.Error, match="tokens_per_day"):
        explain(conn, "How many stadiums are there?")


def test_set_quota_is_administrative_and_checks_its_arguments(gdb, cluster):
    with as_role(cluster, ASKER) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT nl2sql.set_quota(%s, 1000)", (ASKER,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM nl2sql.usage_day")
    with pytest.raises(psycopg.Error, match="no role named"):
        gdb.execute("SELECT nl2sql.set_quota('nl2sql_no_such_role', 1)")
    with pytest.raises(psycopg.Error, match="limits must be >= 0"):
        gdb.execute("SELECT nl2sql.set_quota(%s, -1)", (ASKER,))


def _waiting_on_lock(conn, pid: int) -> bool:
    return conn.execute(
        "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", (pid,)
    ).fetchone() == (True,)


def _last_slot_setup(gdb, llm, embedder: str):
    add_models(gdb, llm, ["m1"])
    llm.set_default(SMALL)
    gdb.execute("SELECT nl2sql.set_setting('embedder', %s)", (embedder,))
    for role in (ASKER, OTHER):
        gdb.execute("SELECT nl2sql.set_quota(%s, questions_per_minute => 1)", (role,))
    away_from_minute_end()


def test_without_the_shared_process_the_last_slot_is_held_by_the_row_lock(gdb, llm, cluster):
    _last_slot_setup(gdb, llm, "local")
    first = cluster.connect(DEMO_DB, user=ASKER, autocommit=False)
    second = as_role(cluster, ASKER)
    other = as_role(cluster, OTHER)
    outcome: dict = {}

    def ask_second():
        try:
            explain(second)
            outcome["second"] = "answered"
        except psycopg.Error as e:
            outcome["second"] = str(e)

    try:
        explain(first)  # takes the last slot; its transaction stays open
        pid = second.info.backend_pid
        t = threading.Thread(target=ask_second)
        t.start()
        deadline = time.monotonic() + 10
        while not _waiting_on_lock(gdb, pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _waiting_on_lock(gdb, pid) and t.is_alive()  # waits on the role's usage row
        explain(other)  # another role is not held up by that lock
        first.commit()
        t.join(10)
        assert "over questions_per_minute = 1" in outcome["second"]
        assert "1 questions this minute" in outcome["second"]
    finally:
        first.close()
        second.close()
        other.close()
        gdb.execute("SELECT nl2sql.reset_setting('embedder')")
    rows = gdb.execute("SELECT role_name, questions FROM nl2sql.usage_day ORDER BY 1").fetchall()
    assert rows == [(ASKER, 1), (OTHER, 1)]


def test_with_the_shared_process_the_last_slot_is_held_without_a_lock(gdb, llm, cluster):
    # the ledger of questions in flight (model/quota.py): a second session of the role is
    # refused at once while the first's transaction is open, without waiting on any lock; a
    # first that rolls back frees its slot, one that commits keeps it
    _last_slot_setup(gdb, llm, "shared")
    first = cluster.connect(DEMO_DB, user=ASKER, autocommit=False)
    second = as_role(cluster, ASKER)
    try:
        trace = explain(first)  # takes the last slot; its transaction stays open
        assert trace["sql"], trace.get("error")
        with pytest.raises(psycopg.Error, match="over questions_per_minute = 1") as e:
            explain(second)
        assert "1 questions this minute" in str(e.value)
        with as_role(cluster, OTHER) as other:
            explain(other)  # another role has its own count
        first.rollback()  # the first's question never happened: the slot is free again
        explain(first)
        first.commit()
        with pytest.raises(psycopg.Error, match="over questions_per_minute = 1"):
            explain(second)
    finally:
        first.close()
        second.close()
        gdb.execute("SELECT nl2sql.reset_setting('embedder')")
    rows = gdb.execute("SELECT role_name, questions FROM nl2sql.usage_day ORDER BY 1").fetchall()
    assert rows == [(ASKER, 1), (OTHER, 1)]


def test_eight_sessions_of_one_role_take_exactly_its_limit_at_once(gdb, llm, cluster):
    # 8 sessions of one role with questions_per_minute = 5, each asking once in its own open
    # transaction, all at once, with models that take 0.5 s: exactly 5 answered, 3 refused, and
    # the 5 ran together (no session waited on another's lock)
    add_models(gdb, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response=SMALL, delay_s=0.5))
    gdb.execute("SELECT nl2sql.set_quota(%s, questions_per_minute => 5)", (ASKER,))
    explain(gdb)  # the shared process runs (a role without a quota)
    away_from_minute_end()
    conns = [cluster.connect(DEMO_DB, user=ASKER, autocommit=False) for _ in range(8)]
    outcome: list[str] = []
    barrier = threading.Barrier(len(conns))

    def ask(conn):
        barrier.wait()
        try:
            explain(conn)
            outcome.append("answered")
        except psycopg.Error as e:
            outcome.append("refused" if "over questions_per_minute" in str(e) else str(e))
        finally:
            conn.commit()

    threads = [threading.Thread(target=ask, args=(c,)) for c in conns]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(outcome) == ["answered"] * 5 + ["refused"] * 3, outcome
    finally:
        for c in conns:
            c.close()
    assert gdb.execute(
        "SELECT questions FROM nl2sql.usage_day WHERE role_name = %s", (ASKER,)
    ).fetchone() == (5,)


def test_each_role_sees_only_its_own_usage(gdb, llm, cluster):
    add_models(gdb, llm, ["m1"])
    llm.set_default(SMALL)
    for role in (ASKER, OTHER):
        with as_role(cluster, role) as conn:
            explain(conn)
    with as_role(cluster, ASKER) as conn:
        assert [r[0] for r in conn.execute("SELECT role_name FROM nl2sql.usage")] == [ASKER]
        # _usage_add only adds: a role cannot lower its own count
        with pytest.raises(psycopg.Error, match="amounts must be >= 0"):
            conn.execute("SELECT nl2sql._usage_add(current_user, -1, 0, 0, 0, 0)")
    everyone = gdb.execute("SELECT role_name FROM nl2sql.usage ORDER BY 1").fetchall()
    assert everyone == [(ASKER,), (OTHER,)]  # a superuser sees every role's
