"""Curated knowledge: verified queries and templates (answered without a model call), business
terms and instructions (in the prompts) and their privileges, inside PostgreSQL; the rules that
keep the fast path from answering a different question are tests/unit/curated/test_curated.py.

Database tests use the demo database (tests/conftest.py) and the scripted loopback server,
which records every request it receives: "no model call" is checked as zero requests.
"""

from __future__ import annotations

import json

import psycopg
import pytest

from conftest import add_models, login_role

READER = "nl2sql_i15a_reader"
Q_FRANCE = "How many singers are from France?"
SQL_FRANCE = "SELECT count(*) FROM singer WHERE country = 'France'"


@pytest.fixture
def cdb(db):
    """The demo database with no curated knowledge before and after the test."""

    def wipe():
        for t in ("verified_query", "term", "instruction"):
            db.execute(f"DELETE FROM nl2sql.{t}")

    wipe()
    yield db
    wipe()


def explain(conn, question: str) -> dict:
    return conn.execute("SELECT nl2sql.explain(%s)", (question,)).fetchone()[0]


def prompts_seen(llm) -> list[str]:
    return [r["messages"][-1]["content"] for r in llm.requests]


# --------------------------------------------------------------------------------------------
# verified queries
# --------------------------------------------------------------------------------------------


def test_paraphrase_of_a_verified_query_is_answered_with_zero_model_requests(cdb, llm):
    add_models(cdb, llm, ["m1", "m2"])
    llm.set_default("SELECT count(*) FROM stadium")  # what a model would say: wrong here
    vid = cdb.execute(
        "SELECT nl2sql.add_verified_query(%s, %s)", (Q_FRANCE, SQL_FRANCE)
    ).fetchone()[0]
    llm.clear()
    trace = explain(cdb, "How many singers come from Japan?")
    assert llm.requests == []
    vq = trace["verified_query"]
    assert vq["id"] == vid and vq["similarity"] >= 0.93
    assert [(b["column"], b["value"], b["default"]) for b in vq["bindings"]] == [
        ("public.singer.country", "Japan", "France")
    ]
    assert trace["vote"]["method"] == "verified_query" and trace["tokens"]["prompt"] == 0
    got = cdb.execute(trace["sql"]).fetchone()[0]
    assert got == cdb.execute("SELECT count(*) FROM singer WHERE country = 'Japan'").fetchone()[0]
    assert got != cdb.execute("SELECT count(*) FROM singer WHERE country = 'France'").fetchone()[0]
    # nl2sql() and ask() take the same path, and the log says so
    assert (
        "'Japan'" in cdb.execute("SELECT nl2sql('How many singers come from Japan?')").fetchone()[0]
    )
    rows = cdb.execute(
        "SELECT * FROM nl2sql.ask('What is the number of singers from Spain?')"
    ).fetchall()
    assert rows == [({"count": 5},)]
    assert llm.requests == []
    logged = cdb.execute(
        "SELECT trace->'verified_query'->>'id' FROM nl2sql.query_log ORDER BY id DESC LIMIT 1"
    ).fetchone()[0]
    assert int(logged) == vid


def test_a_different_question_goes_to_the_models_with_the_verified_query_first(cdb, llm):
    add_models(cdb, llm, ["m1"])
    llm.set_default("SELECT avg(age) FROM singer WHERE country = 'France'")
    vid = cdb.execute(
        "SELECT nl2sql.add_verified_query(%s, %s)", (Q_FRANCE, SQL_FRANCE)
    ).fetchone()[0]
    for q in [
        "What is the average age of singers from France?",  # below the threshold
        "How many singers are not from France?",  # negation
        "How many stadiums are from France?",  # other schema words
        "How many singers are from France or Japan?",
    ]:  # a value left over
        llm.clear()
        trace = explain(cdb, q)
        assert llm.requests, q
        assert "id" not in trace["verified_query"], (q, trace["verified_query"])
        assert trace["verified_query"]["considered"][0]["reason"], q
        # the verified query is the first few-shot example of every prompt
        assert trace["examples"][0]["db_id"] == "verified" and trace["examples"][0]["id"] == vid
        for p in prompts_seen(llm):
            shown = p.index(f"/* Answer the following: {Q_FRANCE} */")
            assert shown < p.index("/* Answer the following: ", shown + 1)


def test_a_verified_query_takes_another_value_of_its_column_asked_in_other_words(cdb, llm):
    """Issue 42 §4: "How many customers live in France?" verified, "How many customers are
    there in Japan?" asked; the demo's singers stand for the customers."""
    add_models(cdb, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM stadium")  # what a model would say: wrong here
    vid = cdb.execute(
        "SELECT nl2sql.add_verified_query(%s, %s)", ("How many singers live in France?", SQL_FRANCE)
    ).fetchone()[0]
    count = "SELECT count(*) FROM singer WHERE country = %s"
    for q, value in [
        ("How many singers are there in Japan?", "Japan"),
        ("How many singers do we have in spain?", "Spain"),  # the cell value, as indexed
    ]:
        llm.clear()
        trace = explain(cdb, q)
        assert llm.requests == [], q
        vq = trace["verified_query"]
        assert vq["id"] == vid and vq["matched"] == "other words", vq
        assert vq["similarity"] < 0.93  # below the bar of the same words
        assert [(b["column"], b["value"], b["default"]) for b in vq["bindings"]] == [
            ("public.singer.country", value, "France")
        ]
        assert trace["vote"]["method"] == "verified_query" and trace["tokens"]["prompt"] == 0
        got = cdb.execute(trace["sql"]).fetchone()[0]
        assert got == cdb.execute(count, (value,)).fetchone()[0] != 0
        assert got != cdb.execute(count, ("France",)).fetchone()[0]
    llm.clear()
    assert cdb.execute(
        "SELECT * FROM nl2sql.ask('How many singers are there in Japan?')"
    ).fetchall() == [({"count": cdb.execute(count, ("Japan",)).fetchone()[0]},)]
    assert llm.requests == []
    # a value the column does not hold (none at all; a city of stadium.location) and other
    # words that ask something else: the models answer
    city = cdb.execute(
        "SELECT location FROM stadium WHERE location NOT IN (SELECT country FROM singer) LIMIT 1"
    ).fetchone()[0]
    for q, says in [
        ("How many singers are there in Atlantis?", "similarity below"),
        (f"How many singers are there in {city}?", "value(s) of singer.country"),
        ("How many singers died in Japan?", "differ in died"),
    ]:
        llm.clear()
        trace = explain(cdb, q)
        assert llm.requests, q
        assert "id" not in trace["verified_query"], (q, trace["verified_query"])
        assert says in trace["verified_query"]["considered"][0]["reason"], (q, trace)
        assert trace["vote"]["method"] != "verified_query"
    # a column whose values the value policy withholds binds no value: the models answer
    cdb.execute("SELECT nl2sql.set_value_policy('singer', false, 'country')")
    try:
        llm.clear()
        trace = explain(cdb, "How many singers live in Japan?")
        assert llm.requests and "id" not in trace["verified_query"], trace["verified_query"]
    finally:
        cdb.execute("SELECT nl2sql.set_value_policy('singer', true, 'country')")
        cdb.execute("DELETE FROM nl2sql.value_policy WHERE table_name = 'singer'")
    llm.clear()
    assert "'Japan'" in explain(cdb, "How many singers live in Japan?")["sql"]
    assert llm.requests == []


def test_feedback_promotes_a_logged_answer_and_removal_forgets_it(cdb, llm):
    add_models(cdb, llm, ["m1"])
    llm.set_default("SELECT max(capacity) FROM stadium")
    q = "What is the largest stadium capacity?"
    log_id = explain(cdb, q)["log_id"]
    cdb.execute("SELECT nl2sql.feedback(%s, true)", (log_id,))
    row = cdb.execute("SELECT id, source, question FROM nl2sql.verified_queries").fetchone()
    assert row[1:] == ("feedback", q)
    llm.clear()
    assert "max(capacity)" in explain(cdb, q)["sql"].lower() and llm.requests == []
    assert cdb.execute("SELECT nl2sql.remove_verified_query(%s)", (row[0],)).fetchone()[0]
    assert not cdb.execute("SELECT nl2sql.remove_verified_query(%s)", (row[0],)).fetchone()[0]
    explain(cdb, q)
    assert llm.requests
    # verify => false: an example only
    cdb.execute("SELECT nl2sql.feedback(%s, true, verify => false)", (log_id,))
    assert cdb.execute("SELECT count(*) FROM nl2sql.verified_queries").fetchone()[0] == 0


@pytest.mark.parametrize(
    "sql, says",
    [
        ("DELETE FROM singer", "not a query: Delete"),
        ("UPDATE singer SET age = 0", "not a query: Update"),
        ("WITH d AS (DELETE FROM singer RETURNING 1) SELECT count(*) FROM d", "not allowed"),
        ("SELECT count(*) FROM singer; DROP TABLE singer", "exactly one statement"),
        ("SELECT * INTO copy_of_singer FROM singer", "not allowed"),
    ],
)
def test_dml_in_add_verified_query_is_refused_with_a_clear_error(cdb, sql, says):
    n = cdb.execute("SELECT count(*) FROM singer").fetchone()[0]
    with pytest.raises(psycopg.Error, match=f"nl2sql.add_verified_query: .*{says}") as e:
        cdb.execute("SELECT nl2sql.add_verified_query('Remove every singer', %s)", (sql,))
    assert "read-only SELECT" in (e.value.diag.message_hint or "")
    assert cdb.execute("SELECT count(*) FROM singer").fetchone()[0] == n
    assert cdb.execute("SELECT count(*) FROM nl2sql.verified_query").fetchone()[0] == 0


# --------------------------------------------------------------------------------------------
# templates
# --------------------------------------------------------------------------------------------


def test_template_is_bound_to_the_value_and_number_the_question_names(cdb, llm):
    add_models(cdb, llm, ["m1"])
    llm.set_default("SELECT 1")
    tid = cdb.execute(
        "SELECT nl2sql.add_template(%s, %s)",
        (
            "Which singers from :country are older than :age?",
            "SELECT name FROM singer WHERE country = :country AND age > :age ORDER BY name",
        ),
    ).fetchone()[0]
    llm.clear()
    trace = explain(cdb, "Which singers from Canada are older than 30?")
    assert llm.requests == []
    assert trace["verified_query"]["id"] == tid and trace["verified_query"]["kind"] == "template"
    b = {x["parameter"]: x for x in trace["verified_query"]["bindings"]}
    assert b["country"]["value"] == "Canada" and b["age"]["value"] == "30"
    want = cdb.execute(
        "SELECT name FROM singer WHERE country = 'Canada' AND age > 30 ORDER BY name"
    ).fetchall()
    assert cdb.execute(trace["sql"]).fetchall() == want and want
    # bound as typed literals: the number is an integer literal, the value a string literal
    assert "age > 30" in trace["sql"] and "country = 'Canada'" in trace["sql"]
    # a number that is not an integer, no value of the column, a value matched only weakly
    # (a misspelling, trigram similarity below link_value_min): the models answer
    for q in [
        "Which singers from Canada are older than 30.5?",
        "Which singers from Atlantis are older than 30?",
        "Which singers from Canadaa are older than 30?",
    ]:
        llm.clear()
        explain(cdb, q)
        assert llm.requests, q


@pytest.mark.parametrize(
    "question, sql, says",
    [
        (
            "Singers older than :age?",
            "SELECT name FROM singer WHERE :age < 3 + age",
            "must be compared with a column",
        ),
        (
            "Singers named :n?",
            "SELECT name FROM singer WHERE is_male = :n",
            "only text and numeric",
        ),
        (
            "Singers from a country?",
            "SELECT name FROM singer WHERE country = :country",
            "must show each parameter",
        ),
        ("Singers from :country?", "SELECT name FROM singer", "named parameters"),
        ("Singers from :country?", "DELETE FROM singer WHERE country = :country", "not a query"),
    ],
)
def test_bad_templates_are_refused_naming_the_problem(cdb, question, sql, says):
    with pytest.raises(psycopg.Error, match=f"nl2sql.add_template: .*{says}"):
        cdb.execute("SELECT nl2sql.add_template(%s, %s)", (question, sql))


# --------------------------------------------------------------------------------------------
# business context
# --------------------------------------------------------------------------------------------


def test_a_term_and_an_instruction_are_used_in_the_prompts_masking_and_explain(cdb, llm):
    add_models(cdb, llm, ["m1", "m2"])
    llm.set_default("SELECT count(*) FROM singer WHERE age >= 50")
    tid = cdb.execute(
        "SELECT nl2sql.add_term('veteran singer', 'a singer aged 50 or older', 'singer.age >= 50')"
    ).fetchone()[0]
    cdb.execute(
        "SELECT nl2sql.add_term('stadium size', 'the capacity of a stadium', 'stadium.capacity')"
    )
    iid = cdb.execute(
        "SELECT nl2sql.add_instruction('Order lists of singers by name.')"
    ).fetchone()[0]
    trace = explain(cdb, "How many veteran singers are there?")
    used = trace["business_context"]
    assert [(t["id"], t["how"], t["phrase"]) for t in used["terms"]][0] == (
        tid,
        "named",
        "veteran singers",
    )
    assert "stadium size" not in [t["term"] for t in used["terms"]]  # neither named nor similar
    assert [i["id"] for i in used["instructions"]] == [iid]
    assert "veteran" not in trace["masked_question"].lower()
    reqs = prompts_seen(llm)
    assert len(reqs) == 3  # PreSQL and two FinSQL
    for p in reqs:
        assert "-- veteran singer: a singer aged 50 or older (SQL: singer.age >= 50)" in p
        assert "-- Order lists of singers by name." in p
        assert "stadium size" not in p
    # retrieve() shows the same without a model
    r = cdb.execute("SELECT nl2sql.retrieve('How many veteran singers are there?')").fetchone()[0]
    assert r["business_context"]["terms"][0]["id"] == tid
    # listing and removal
    assert cdb.execute("SELECT term FROM nl2sql.terms ORDER BY id").fetchall() == [
        ("veteran singer",),
        ("stadium size",),
    ]
    assert cdb.execute("SELECT nl2sql.remove_term('VETERAN singer')").fetchone()[0]
    assert cdb.execute("SELECT nl2sql.remove_instruction(%s)", (iid,)).fetchone()[0]
    llm.clear()
    explain(cdb, "How many veteran singers are there?")
    assert all("veteran singer:" not in p and "Order lists" not in p for p in prompts_seen(llm))


@pytest.mark.parametrize(
    "expr, says",
    [
        ("name = 'x'", "several tables"),
        ("nosuch > 3", "no indexed table has a column nosuch"),
        ("(SELECT count(*) FROM singer)", None),
        ("singer.age; DROP TABLE singer", "exactly one statement"),
        ("nextval('s') > 0", "not allowed"),
        ("DELETE FROM singer", "expected an SQL expression"),
    ],
)
def test_term_expressions_are_checked(cdb, expr, says):
    if says is None:
        cdb.execute("SELECT nl2sql.add_term('singer count', 'how many singers', %s)", (expr,))
        rel = cdb.execute("SELECT table_name FROM nl2sql.term_relation").fetchall()
        assert rel == [("singer",)]
        return
    with pytest.raises(psycopg.Error, match=f"nl2sql.add_term: .*{says}"):
        cdb.execute("SELECT nl2sql.add_term('t', 'd', %s)", (expr,))


# --------------------------------------------------------------------------------------------
# privileges
# --------------------------------------------------------------------------------------------


@pytest.fixture
def reader(cluster, cdb):
    """A connection as an ordinary role that may read singer but not stadium."""
    login_role(cdb, READER, "singer")
    conn = cluster.connect("nl2sql_test", user=READER)
    yield conn
    conn.close()


def test_an_ordinary_role_sees_only_curated_knowledge_over_tables_it_may_read(cdb, reader, llm):
    add_models(cdb, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM singer")
    q_stadium = "How many stadiums are in London?"
    secret_sql = "SELECT count(*) FROM stadium WHERE location = 'London'"
    cdb.execute("SELECT nl2sql.add_verified_query(%s, %s)", (q_stadium, secret_sql))
    cdb.execute("SELECT nl2sql.add_verified_query(%s, %s)", (Q_FRANCE, SQL_FRANCE))
    cdb.execute(
        "SELECT nl2sql.add_term('big venue', 'a stadium for more than 50000 people', "
        "'stadium.capacity > 50000')"
    )
    cdb.execute(
        "SELECT nl2sql.add_term('veteran singer', 'a singer aged 50 or older', 'singer.age >= 50')"
    )
    cdb.execute("SELECT nl2sql.add_instruction('Count rows with count(*).')")
    # the owner sees all of it; the reader what is over singer, and the instructions
    assert cdb.execute("SELECT count(*) FROM nl2sql.verified_queries").fetchone()[0] == 2
    assert reader.execute("SELECT question FROM nl2sql.verified_queries").fetchall() == [
        (Q_FRANCE,)
    ]
    assert reader.execute("SELECT term FROM nl2sql.terms").fetchall() == [("veteran singer",)]
    assert reader.execute("SELECT count(*) FROM nl2sql.instructions").fetchone()[0] == 1
    for t in ("verified_query", "term", "instruction", "verified_query_relation", "term_relation"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute(f"SELECT count(*) FROM nl2sql.{t}")
    # asking the stadium question: no fast path, and no prompt shows the stadium query or term
    llm.clear()
    trace = reader.execute("SELECT nl2sql.explain(%s)", (q_stadium,)).fetchone()[0]
    assert llm.requests and "id" not in trace["verified_query"]
    seen = "\n".join(prompts_seen(llm)) + json.dumps(trace)
    assert "stadium" not in json.dumps(trace["examples"]).lower()
    assert "big venue" not in seen and secret_sql not in seen
    # the owner asking the same question gets the verified answer without a model
    llm.clear()
    assert "'London'" in explain(cdb, q_stadium)["sql"] and llm.requests == []
    # the singer query answers the reader without a model, run as the reader
    trace = reader.execute("SELECT nl2sql.explain('How many singers come from Japan?')").fetchone()[
        0
    ]
    assert llm.requests == [] and "'Japan'" in trace["sql"]
    # administration is the owner's
    for call in (
        "SELECT nl2sql.add_verified_query('q', 'SELECT 1')",
        "SELECT nl2sql.add_template('q :a', 'SELECT name FROM singer WHERE age = :a')",
        "SELECT nl2sql.remove_verified_query(1)",
        "SELECT nl2sql.remove_template(1)",
        "SELECT nl2sql.add_term('a', 'b')",
        "SELECT nl2sql.remove_term('a')",
        "SELECT nl2sql.add_instruction('x')",
        "SELECT nl2sql.remove_instruction(1)",
        "SELECT nl2sql.feedback(1, true)",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.execute(call)


def test_a_verified_query_runs_as_the_asking_role(cdb, reader, llm):
    """The bound SQL runs as the reader: row-level security gives the reader its own rows; a
    query over a column the reader may not read is not used for it."""
    add_models(cdb, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM singer")
    cdb.execute(
        "SELECT nl2sql.add_template('How many singers are older than :age?', "
        "'SELECT count(*) FROM singer WHERE age > :age')"
    )
    q = "How many singers are older than 40?"
    everyone = cdb.execute("SELECT count(*) FROM singer WHERE age > 40").fetchone()[0]
    japan = cdb.execute(
        "SELECT count(*) FROM singer WHERE age > 40 AND country = 'Japan'"
    ).fetchone()[0]
    assert everyone > japan
    cdb.execute("ALTER TABLE singer ENABLE ROW LEVEL SECURITY")
    cdb.execute(
        f"CREATE POLICY i15a_japan ON singer FOR SELECT TO {READER} USING (country = 'Japan')"
    )
    try:
        llm.clear()
        sql = reader.execute("SELECT nl2sql(%s)", (q,)).fetchone()[0]
        assert llm.requests == []
        rows = reader.execute("SELECT * FROM nl2sql.ask(%s)", (q,)).fetchall()
        assert rows == [({"count": japan},)]
        assert cdb.execute(sql).fetchone()[0] == everyone  # the owner's rows differ
    finally:
        cdb.execute("DROP POLICY i15a_japan ON singer")
        cdb.execute("ALTER TABLE singer DISABLE ROW LEVEL SECURITY")
        cdb.execute("SELECT nl2sql.reindex()")  # consume the DDL queue: later tests expect none
    cdb.execute(f"REVOKE SELECT ON singer FROM {READER}")
    cdb.execute(f"GRANT SELECT (singer_id, name, country) ON singer TO {READER}")
    try:
        llm.clear()
        trace = reader.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]
        assert llm.requests and "id" not in trace.get("verified_query", {})
    finally:
        cdb.execute(f"GRANT SELECT ON singer TO {READER}")
