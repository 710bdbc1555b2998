"""Query-log mining (README "Mining the query log"): statements of pg_stat_statements become
pending question/SQL pairs that only an approval puts into the example pool.

Database tests use the demo database (tests/conftest.py; the test cluster preloads
pg_stat_statements) and the scripted loopback server, whose answers are scripted, not a
model's: each rule answers the question for one SQL text it finds in the prompt.
"""

from __future__ import annotations

import psycopg
import pytest

from conftest import add_models
from nl2sql.core.errors import CandidateRefused
from nl2sql.core.sqlcheck import parse_single
from nl2sql.core.types import Column, Schema, Table
from nl2sql.curated.log_statements import LoggedStatement, MinedCandidate, as_template, classify
from nl2sql.curated.mined_questions import check_question, clean_question, question_prompt
from nl2sql.model.gate import Gate
from nl2sql_indexer.loopback import Rule

OWN = frozenset({"nl2sql", "explain", "ask", "reindex"})
READER = "nl2sql_i15d_reader"


def _schema(country_allowed: bool = True) -> Schema:
    cols = [
        Column("singer_id", "integer", True),
        Column("name", "text"),
        Column(
            "country", "text", sample_values=["France", "Japan"], values_allowed=country_allowed
        ),
        Column("age", "integer"),
        Column("is_male", "boolean"),
    ]
    return Schema(tables=[Table(name="singer", schema="public", table="singer", columns=cols)])


# --------------------------------------------------------------------------------------------
# pure: selecting and normalising
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql, reason",
    [
        ("SELECT count(*) FROM singer", None),
        ("SELECT name FROM singer WHERE country = $1 UNION SELECT name FROM stadium", None),
        ("INSERT INTO singer (name) VALUES ($1)", "dml"),
        ("UPDATE singer SET age = $1", "dml"),
        ("WITH d AS (DELETE FROM singer RETURNING 1) SELECT count(*) FROM d", "dml"),
        ("CREATE TABLE x (a int)", "ddl"),
        ("ALTER TABLE singer ADD COLUMN b int", "ddl"),
        ("SET search_path = public", "utility"),
        ("BEGIN", "utility"),
        ("VACUUM singer", "utility"),
        ("SELECT * INTO t2 FROM singer", "utility"),
        ("SELECT nl2sql.explain($1)", "nl2sql"),
        ("SELECT nl2sql($1)", "nl2sql"),
        ("SELECT * FROM nl2sql.example", "nl2sql"),
        ("SELECT relname FROM pg_class", "catalog"),
        ("SELECT * FROM information_schema.tables", "catalog"),
        ("SELECT $1", "no_table"),
        ("<insufficient privilege>", "hidden"),
        ("SELECT FROM WHERE (", "unparsable"),
    ],
)
def test_classify_keeps_only_queries_over_user_relations(sql, reason):
    assert classify(sql, OWN)[1] == reason


def test_a_normalised_statement_becomes_a_typed_template():
    tree = parse_single(
        "SELECT name FROM singer WHERE country = $1 AND age > $2 ORDER BY age LIMIT $3"
    )
    kind, sql, slots = as_template(tree, _schema())
    assert kind == "template"
    assert sql == (
        "SELECT name FROM singer WHERE country = :country AND age > :age ORDER BY age LIMIT :limit"
    )
    assert sorted((s.name, s.kind, s.column or []) for s in slots) == [
        ("age", "number", ["public", "singer", "age"]),
        ("country", "value", ["public", "singer", "country"]),
        ("limit", "number", []),
    ]
    # without parameters: a plain query, unchanged
    assert as_template(parse_single("SELECT count(*) FROM singer"), _schema())[:2] == (
        "query",
        "SELECT COUNT(*) FROM singer",
    )
    # two comparisons with one column get two names
    _, sql, _ = as_template(
        parse_single("SELECT name FROM singer WHERE age BETWEEN $1 AND $2"), _schema()
    )
    assert ":age AND :age_2" in sql


@pytest.mark.parametrize(
    "sql", ["SELECT $1 FROM singer", "SELECT name FROM singer WHERE is_male = $1"]
)
def test_a_parameter_no_question_can_bind_is_refused(sql):
    with pytest.raises(CandidateRefused):
        as_template(parse_single(sql), _schema())


def test_the_question_of_a_template_must_show_each_parameter():
    cand = MinedCandidate(
        LoggedStatement(1, "", 3),
        "template",
        "SELECT name FROM singer WHERE country = :country",
        [{"name": "country"}],
        ["singer"],
    )
    assert check_question("Which singers are from :country?", cand) is None
    assert "missing :country" in check_question("Which singers are from France?", cand)
    assert "no question" in check_question("", cand)
    assert (
        clean_question('Question: "How many singers are there?"\nextra')
        == "How many singers are there?"
    )


def test_the_prompt_passes_the_gate():
    """A mined SQL's literals of a withheld column, and its sample values, never reach the
    prompt; with the column allowed they are shown."""
    cand = MinedCandidate(
        LoggedStatement(1, "", 3),
        "query",
        "SELECT name FROM singer WHERE country = 'France' AND age > 30",
        [],
        ["singer"],
    )
    schema = _schema(country_allowed=False)
    gate = Gate(schema, True)
    p = question_prompt(gate, cand, schema)
    assert "France" not in p and "Japan" not in p and "30" not in p
    assert "country = 'value'" in p
    assert gate.report()["held"]["mining"] == {"literals of SQL": 1}
    schema = _schema()
    p = question_prompt(Gate(schema, True), cand, schema)
    assert "country = 'France'" in p and "'Japan'" in p


# --------------------------------------------------------------------------------------------
# database
# --------------------------------------------------------------------------------------------

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


def test_a_gated_template_keeps_its_named_parameters():
    cand = MinedCandidate(
        LoggedStatement(1, "", 3),
        "template",
        "SELECT name FROM singer WHERE country = :country AND name <> 'x'",
        [{"name": "country"}],
        ["singer"],
    )
    schema = _schema(country_allowed=False)
    p = question_prompt(Gate(schema, True), cand, schema)
    assert "country = :country AND name <> 'value'" in p
