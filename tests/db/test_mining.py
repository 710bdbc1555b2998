"""Query-log mining (README "Mining the query log") inside PostgreSQL: statements of
pg_stat_statements become pending question/SQL pairs that only an approval puts into the
example pool; re-mining, opted-out values and privileges. The pure rules are
tests/unit/curated/test_mining.py.

Database tests use the demo database (tests/conftest.py; the test cluster preloads
pg_stat_statements) and the scripted loopback server, whose answers are scripted, not a
model's: each rule answers the question for one SQL text it finds in the prompt.
"""

from __future__ import annotations

import psycopg
import pytest

from conftest import add_models
from nl2sql_indexer.dev.loopback import Rule

READER = "nl2sql_i15d_reader"
SQL_COUNT = "SELECT count(*) FROM singer"
SQL_BY_COUNTRY = "SELECT name FROM singer WHERE country = 'France'"
SQL_STADIUMS = "SELECT name, capacity FROM stadium ORDER BY capacity DESC"
Q_COUNT = "How many singers do we have?"
Q_STADIUMS = "Which stadiums are there, largest first?"


@pytest.fixture
def mdb(db):
    """The demo database with pg_stat_statements created and reset, and no mined pairs."""

    def wipe():
        db.execute("DELETE FROM nl2sql.mined_query")
        db.execute("DELETE FROM nl2sql.verified_query WHERE source = 'mined'")
        db.execute("DELETE FROM nl2sql.example WHERE source = 'mined'")

    db.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    db.execute("CREATE TABLE IF NOT EXISTS nl2sql_i15d_unindexed (a int)")
    wipe()
    db.execute("SELECT pg_stat_statements_reset()")
    yield db
    wipe()
    db.execute("DROP TABLE nl2sql_i15d_unindexed")


def run_workload(conn):
    """The statements an application would run: queries, DML, catalog reads, nl2sql calls."""
    for _ in range(5):
        conn.execute(SQL_COUNT)
    for _ in range(4):
        conn.execute(SQL_BY_COUNTRY)
    for _ in range(3):
        conn.execute(SQL_STADIUMS)
    conn.execute("BEGIN")
    for _ in range(6):
        conn.execute("UPDATE singer SET age = age WHERE singer_id = 1")
        conn.execute("SELECT relname FROM pg_class WHERE relname = 'singer'")
        conn.execute("SELECT count(*) FROM nl2sql_i15d_unindexed")
        conn.execute("SELECT txid_current() FROM singer LIMIT 1")
    conn.execute("ROLLBACK")


def script(llm):
    llm.add_rule(Rule(contains="COUNT(*) FROM singer", response=Q_COUNT))
    llm.add_rule(
        Rule(contains="WHERE country = :country", response="Which singers are from :country?")
    )
    llm.add_rule(Rule(contains="FROM stadium", response=Q_STADIUMS))


def mined(conn) -> dict[str, tuple]:
    return {
        r[0]: r[1:]
        for r in conn.execute("SELECT sql, status, kind, question, calls FROM nl2sql.mined_queries")
    }


def test_mined_pairs_stay_pending_until_approved(mdb, llm):
    add_models(mdb, llm, ["m1"])
    script(llm)
    run_workload(mdb)
    out = mdb.execute("SELECT nl2sql.mine_queries(10)").fetchone()[0]
    assert out["mined"] == 3 and out["failed"] == [] and out["model"] == "m1"
    assert out["skipped"].get("dml") == 1 and out["skipped"].get("catalog") == 1
    assert out["skipped"].get("not_indexed") == 1 and out["skipped"].get("refused") == 1
    assert out["skipped"].get("utility", 0) >= 2  # BEGIN, ROLLBACK
    assert out["considered"] == 3 + sum(out["skipped"].values())
    got = mined(mdb)
    assert got["SELECT COUNT(*) FROM singer"] == ("pending", "query", Q_COUNT, 5)
    assert got["SELECT name FROM singer WHERE country = :country"] == (
        "pending",
        "template",
        "Which singers are from :country?",
        4,
    )
    assert got["SELECT name, capacity FROM stadium ORDER BY capacity DESC"][:3] == (
        "pending",
        "query",
        Q_STADIUMS,
    )
    # pending: not in the pool, not retrieved, not in a prompt
    assert (
        mdb.execute(
            "SELECT count(*) FROM nl2sql.example WHERE question = %s", (Q_STADIUMS,)
        ).fetchone()[0]
        == 0
    )
    assert mdb.execute("SELECT count(*) FROM nl2sql.verified_queries").fetchone()[0] == 0
    llm.set_default("SELECT name, capacity FROM stadium ORDER BY capacity DESC")
    llm.clear()
    trace = mdb.execute("SELECT nl2sql.explain(%s)", (Q_STADIUMS,)).fetchone()[0]
    assert Q_STADIUMS not in [e["question"] for e in trace["examples"]]
    assert llm.requests and all(
        Q_STADIUMS not in r["messages"][-1]["content"].split("Answer the following: ")[0]
        for r in llm.requests
    )
    # approved: an example of the pool and a verified query, answered without a model call
    mid = mdb.execute(
        "SELECT id FROM nl2sql.mined_queries WHERE question = %s", (Q_STADIUMS,)
    ).fetchone()[0]
    vid = mdb.execute("SELECT nl2sql.approve_mined(%s)", (mid,)).fetchone()[0]
    row = mdb.execute(
        "SELECT status, verified_id, example_id, decided_by FROM "
        "nl2sql.mined_queries WHERE id = %s",
        (mid,),
    ).fetchone()
    assert row[:2] == ("approved", vid) and row[2] is not None and row[3] == "postgres"
    assert (
        mdb.execute("SELECT source FROM nl2sql.example WHERE id = %s", (row[2],)).fetchone()[0]
        == "mined"
    )
    retrieved = mdb.execute("SELECT nl2sql.retrieve(%s)", (Q_STADIUMS,)).fetchone()[0]
    assert Q_STADIUMS in [e["question"] for e in retrieved["examples"]]
    llm.clear()
    trace = mdb.execute("SELECT nl2sql.explain(%s)", (Q_STADIUMS,)).fetchone()[0]
    assert trace["verified_query"]["id"] == vid and llm.requests == []
    with pytest.raises(psycopg.Error, match="approved already"):
        mdb.execute("SELECT nl2sql.approve_mined(%s)", (mid,))
    # the template, approved with a question of the DBA's, binds a value the question names
    tid = mdb.execute("SELECT id FROM nl2sql.mined_queries WHERE kind = 'template'").fetchone()[0]
    vt = mdb.execute(
        "SELECT nl2sql.approve_mined(%s, 'Which singers come from :country?')", (tid,)
    ).fetchone()[0]
    assert mdb.execute(
        "SELECT kind, source FROM nl2sql.verified_queries WHERE id = %s", (vt,)
    ).fetchone() == ("template", "mined")
    trace = mdb.execute("SELECT nl2sql.explain('Which singers come from Japan?')").fetchone()[0]
    assert trace["verified_query"]["id"] == vt and "'Japan'" in trace["sql"]
    # rejected: gone from pending, not mined again
    cid = mdb.execute(
        "SELECT id FROM nl2sql.mined_queries WHERE question = %s", (Q_COUNT,)
    ).fetchone()[0]
    assert mdb.execute("SELECT nl2sql.reject_mined(%s)", (cid,)).fetchone()[0]
    assert not mdb.execute("SELECT nl2sql.reject_mined(%s)", (mid,)).fetchone()[0]  # approved


def test_remining_does_not_duplicate_and_a_model_failure_costs_only_its_query(mdb, llm):
    add_models(mdb, llm, ["m1"])
    llm.add_rule(Rule(contains="FROM stadium", status=500, response="boom"))
    llm.add_rule(Rule(contains="COUNT(*) FROM singer", response=Q_COUNT))
    llm.add_rule(
        Rule(contains="WHERE country = :country", response="Which singers are from France?")
    )  # no :country: unusable
    mdb.execute("SELECT nl2sql.set_setting('llm_max_retries', '0')")
    try:
        run_workload(mdb)
        out = mdb.execute("SELECT nl2sql.mine_queries(10)").fetchone()[0]
    finally:
        mdb.execute("SELECT nl2sql.reset_setting('llm_max_retries')")
    assert out["mined"] == 1
    errors = {f["sql"]: f["error"] for f in out["failed"]}
    assert "HTTP 500" in errors["SELECT name, capacity FROM stadium ORDER BY capacity DESC"]
    assert "missing :country" in errors["SELECT name FROM singer WHERE country = :country"]
    got = mined(mdb)
    assert got["SELECT COUNT(*) FROM singer"][0] == "pending"
    assert got["SELECT name, capacity FROM stadium ORDER BY capacity DESC"][0] == "failed"
    # again, with the model working: failed ones are asked again, nothing is duplicated
    llm.clear()
    script(llm)
    run_workload(mdb)
    out = mdb.execute("SELECT nl2sql.mine_queries(10)").fetchone()[0]
    assert out["mined"] == 2 and out["failed"] == [] and out["skipped"]["already_mined"] == 1
    assert len(llm.requests) == 2
    assert mdb.execute("SELECT count(*) FROM nl2sql.mined_query").fetchone()[0] == 3
    assert {v[0] for v in mined(mdb).values()} == {"pending"}
    # the limit bounds the questions asked
    mdb.execute("SELECT pg_stat_statements_reset()")
    for _ in range(3):
        mdb.execute("SELECT max(age) FROM singer")
        mdb.execute("SELECT min(age) FROM singer")
    llm.set_default("What is it?")
    assert mdb.execute("SELECT nl2sql.mine_queries(1)").fetchone()[0]["mined"] == 1


def test_values_of_an_opted_out_column_do_not_reach_the_model(mdb, llm):
    add_models(mdb, llm, ["m1"])
    script(llm)
    mdb.execute("SELECT nl2sql.set_value_policy('singer', false, 'country')")
    try:
        run_workload(mdb)
        out = mdb.execute("SELECT nl2sql.mine_queries(10)").fetchone()[0]
    finally:
        mdb.execute("SELECT nl2sql.set_value_policy('singer', true, 'country')")
        mdb.execute("DELETE FROM nl2sql.value_policy")
    assert out["mined"] == 3, out
    countries = [r[0] for r in mdb.execute("SELECT DISTINCT country FROM singer")]
    sent = "\n".join(m["content"] for r in llm.requests for m in r["messages"])
    assert "country" in sent and countries
    assert not [c for c in countries if c in sent]


@pytest.mark.parametrize("send_values", ["on", "off"])
def test_a_logged_statements_comments_reach_neither_the_model_nor_the_pending_pair(
    mdb, llm, send_values
):
    add_models(mdb, llm, ["m1"])
    script(llm)
    mdb.execute("SELECT nl2sql.set_setting('send_values', %s)", (send_values,))
    try:
        for _ in range(3):
            mdb.execute(
                "/* secret 'Alice' */ SELECT count(*) FROM singer -- for 'Bob'\n"
                "WHERE age > 30 /* Carol */"
            )
        out = mdb.execute("SELECT nl2sql.mine_queries(10)").fetchone()[0]
        rows = mdb.execute("SELECT query, sql FROM nl2sql.mined_query").fetchall()
    finally:
        mdb.execute("SELECT nl2sql.reset_setting('send_values')")
    assert rows, out
    sent = "\n".join(m["content"] for r in llm.requests for m in r["messages"])
    stored = "\n".join(f"{q}\n{s}" for q, s in rows)
    for word in ("secret", "Alice", "Bob", "Carol"):
        assert word not in sent and word not in stored, word
    assert "/*" not in stored and "--" not in stored
    assert "WHERE age > :age" in stored or "WHERE age > 30" in stored


def test_mining_refuses_ordinary_roles_and_says_what_is_missing(mdb, llm, cluster):
    # no model configured
    with pytest.raises(psycopg.Error, match="no model is configured"):
        mdb.execute("SELECT nl2sql.mine_queries()")
    add_models(mdb, llm, ["m1"])
    with pytest.raises(psycopg.Error, match="limit must be between 1 and 1000"):
        mdb.execute("SELECT nl2sql.mine_queries(0)")
    # an ordinary role may not mine, approve, reject or read the mined pairs
    mdb.execute(f"DROP ROLE IF EXISTS {READER}")
    mdb.execute(f"CREATE ROLE {READER} LOGIN")
    try:
        with cluster.connect("nl2sql_test", user=READER) as other:
            for sql in (
                "SELECT nl2sql.mine_queries()",
                "SELECT nl2sql.approve_mined(1)",
                "SELECT nl2sql.reject_mined(1)",
                "SELECT * FROM nl2sql.mined_queries",
                "SELECT * FROM nl2sql.mined_query",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    other.execute(sql)
    finally:
        mdb.execute(f"DROP ROLE {READER}")
    # a DBA role granted mining, without pg_read_all_stats: others' statements are hidden
    mdb.execute(f"CREATE ROLE {READER} LOGIN")
    try:
        mdb.execute(f"GRANT EXECUTE ON FUNCTION nl2sql.mine_queries(integer) TO {READER}")
        mdb.execute(f"GRANT SELECT, INSERT, UPDATE ON nl2sql.mined_query TO {READER}")
        mdb.execute(f"GRANT USAGE ON SEQUENCE nl2sql.mined_query_id_seq TO {READER}")
        mdb.execute(f"GRANT SELECT ON singer, stadium TO {READER}")
        llm.set_default("Which question is it?")
        run_workload(mdb)
        with cluster.connect("nl2sql_test", user=READER) as dba:
            for _ in range(2):
                dba.execute("SELECT max(age) FROM singer")
            out = dba.execute("SELECT nl2sql.mine_queries(10)").fetchone()[0]
            assert out["mined"] == 1 and out["skipped"]["hidden"] >= 3, out
            mdb.execute(f"GRANT pg_read_all_stats TO {READER}")
            out = dba.execute("SELECT nl2sql.mine_queries(10)").fetchone()[0]
            assert "hidden" not in out["skipped"] and out["mined"] == 2, out
            # the default answer shows no :country: the template's pair is failed, not pending
            assert [f["sql"] for f in out["failed"]] == [
                "SELECT name FROM singer WHERE country = :country"
            ]
        assert (
            mdb.execute(
                "SELECT count(*) FROM nl2sql.mined_query WHERE sql = 'SELECT MAX(age) FROM singer'"
            ).fetchone()[0]
            == 1
        )
    finally:
        mdb.execute(f"DROP OWNED BY {READER}")
        mdb.execute(f"DROP ROLE {READER}")
    # without the pg_stat_statements extension in the database: the clear error
    mdb.execute("DROP EXTENSION pg_stat_statements")
    try:
        with pytest.raises(psycopg.Error, match="pg_stat_statements is not installed") as e:
            mdb.execute("SELECT nl2sql.mine_queries()")
        assert "shared_preload_libraries" in str(e.value)
        assert "CREATE EXTENSION pg_stat_statements" in str(e.value)
    finally:
        mdb.execute("CREATE EXTENSION pg_stat_statements")
