"""End-to-end behaviour inside a real PostgreSQL: install, index, nl2sql(), voting, errors.

Every model answer here comes from the scripted loopback server (tests/conftest.py).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import psycopg
import pytest

from conftest import ROOT, add_models, cancel_while_model_hangs
from nl2sql_indexer.dev.loopback import Rule

Q_COUNT = "How many singers do we have?"


def test_extension_installs_and_nl2sql_works_with_default_search_path(cluster, db, llm):
    add_models(db, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response="SELECT count(*) FROM singer"))
    # a brand-new session with the default search_path, nothing set
    with cluster.connect("nl2sql_test") as fresh:
        assert fresh.execute("SHOW search_path").fetchone()[0] == '"$user", public'
        sql = fresh.execute("SELECT nl2sql(%s)", (Q_COUNT,)).fetchone()[0]
        assert sql.lower().replace(" ", "") == "selectcount(*)fromsinger"
        n = fresh.execute(sql).fetchone()[0]
        assert n == fresh.execute("SELECT count(*) FROM singer").fetchone()[0]
    exts = {r[0] for r in db.execute("SELECT extname FROM pg_extension")}
    assert {"nl2sql", "plpython3u", "vector", "pg_trgm"} <= exts


def test_indexer_fills_every_index_table(db):
    expect_cols = db.execute(
        "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'public' "
        "AND table_name IN ('stadium','singer','concert','singer_in_concert')"
    ).fetchone()[0]
    assert db.execute("SELECT count(*) FROM nl2sql.schema_table").fetchone()[0] == 4
    assert db.execute("SELECT count(*) FROM nl2sql.schema_column").fetchone()[0] == expect_cols
    fks = db.execute(
        "SELECT count(*) FROM information_schema.table_constraints WHERE "
        "constraint_type = 'FOREIGN KEY' AND table_schema = 'public'"
    ).fetchone()[0]
    assert db.execute("SELECT count(*) FROM nl2sql.schema_fk").fetchone()[0] == fks == 3
    # every distinct string cell value is indexed, with an embedding
    expected_values = 0
    for table, col in db.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE "
        "table_schema = 'public' AND data_type IN ('text', 'character varying')"
    ).fetchall():
        expected_values += db.execute(f'SELECT count(DISTINCT "{col}") FROM "{table}"').fetchone()[
            0
        ]
    assert (
        db.execute("SELECT count(*) FROM nl2sql.cell_value WHERE embedding IS NOT NULL").fetchone()[
            0
        ]
        == expected_values
        > 0
    )
    # 3 sample values per column where the column has at least 3 distinct values
    short = db.execute(
        "SELECT count(*) FROM nl2sql.schema_column c WHERE cardinality(sample_values) < 3 "
        "AND table_name = 'singer'"
    ).fetchone()[0]
    assert short == 1  # is_male: a boolean has only two values
    pool = json.loads((ROOT / "py_udf/nl2sql/data/example_pool.json").read_text())
    n_ex = db.execute(
        "SELECT count(*) FROM nl2sql.example WHERE source = 'builtin' "
        "AND embedding IS NOT NULL AND masked_question LIKE '%<mask>%'"
    ).fetchone()[0]
    assert n_ex == len(pool["examples"])
    idx = {
        r[0]
        for r in db.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'nl2sql' "
            "AND tablename IN ('cell_value', 'cell_value_text')"
        )
    }
    assert any("hnsw" in i for i in idx) and any("gin_trgm_ops" in i for i in idx)
    # the trigram lookup's table holds each distinct string once
    assert (
        db.execute("SELECT count(*) FROM nl2sql.cell_value_text").fetchone()[0]
        == db.execute("SELECT count(DISTINCT value) FROM nl2sql.cell_value").fetchone()[0]
    )


def test_reindex_is_incremental(db):
    r = db.execute("SELECT nl2sql.reindex()").fetchone()[0]
    assert r["tables_skipped"] == 4 and r["tables_indexed"] == 0, json.dumps(r)
    db.execute(
        "INSERT INTO stadium (stadium_id, name, location, capacity) "
        "VALUES (999, 'Test Dome Reindex', 'Reykjavik', 1000)"
    )
    r = db.execute("SELECT nl2sql.reindex()").fetchone()[0]
    assert r["tables_indexed"] == 1 and r["tables_skipped"] == 3
    assert r["values_embedded"] == 2  # only the new name and city were embedded
    assert (
        db.execute("SELECT count(*) FROM nl2sql.cell_value WHERE value = 'Reykjavik'").fetchone()[0]
        == 1
    )
    db.execute("DELETE FROM stadium WHERE stadium_id = 999")
    db.execute("SELECT nl2sql.reindex(force => true)")
    assert (
        db.execute("SELECT count(*) FROM nl2sql.cell_value WHERE value = 'Reykjavik'").fetchone()[0]
        == 0
    )


def test_reindex_that_changed_the_index_folds_the_trigram_pending_list_and_analyzes(db):
    r = db.execute("SELECT nl2sql.reindex()").fetchone()[0]
    assert r["tables_indexed"] == 0 and "tables_analyzed" not in r  # nothing changed: no tidy
    db.execute(
        "INSERT INTO stadium (stadium_id, name, location, capacity) "
        "VALUES (998, 'Pending List Arena', 'Tromso', 1000)"
    )
    try:
        r = db.execute("SELECT nl2sql.reindex()").fetchone()[0]
        assert r["tables_indexed"] == 1 and r["tables_analyzed"] >= 4
        assert r["trigram_pending_pages"] is not None
        # nothing left to fold in: lookups scan the index, not a pending list
        assert (
            db.execute(
                "SELECT gin_clean_pending_list('nl2sql.cell_value_text_trgm'::regclass)"
            ).fetchone()[0]
            == 0
        )
        # the planner's statistics count the values as they are now
        n, est = db.execute(
            "SELECT (SELECT count(*) FROM nl2sql.cell_value), reltuples "
            "FROM pg_class WHERE oid = 'nl2sql.cell_value'::regclass"
        ).fetchone()
        assert est == n
    finally:
        db.execute("DELETE FROM stadium WHERE stadium_id = 998")
        db.execute("SELECT nl2sql.reindex()")


def test_question_is_masked_with_schema_names_and_cell_values(db, llm):
    add_models(db, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM singer")
    country = db.execute(
        "SELECT country FROM singer GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
    ).fetchone()[0]
    trace = db.execute(
        "SELECT nl2sql.explain(%s)", (f"How many singers come from {country}?",)
    ).fetchone()[0]
    masked = trace["masked_question"]
    assert country.lower() not in masked.lower() and "singer" not in masked.lower()
    assert masked.count("<mask>") == 2
    assert any(
        (v["table"], v["column"], v["value"], v["how"]) == ("singer", "country", country, "exact")
        for v in trace["values"]
    ), trace["values"]


def test_counting_question_retrieves_counting_examples_first(db, llm):
    add_models(db, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM stadium")
    trace = db.execute("SELECT nl2sql.explain('How many stadiums are there?')").fetchone()[0]
    top = trace["examples"][:3]
    assert len(trace["examples"]) == 9
    assert all("count(" in e["sql"].lower() for e in top), [e["question"] for e in top]
    sims = [e["similarity"] for e in trace["examples"]]
    assert sims == sorted(sims, reverse=True)


def test_only_presql_tables_appear_in_finsql_prompt(db, llm):
    add_models(db, llm, ["pre", "other"])
    llm.add_rule(
        Rule(
            model="pre",
            response="SELECT s.name FROM singer s JOIN singer_in_concert sc "
            "ON s.singer_id = sc.singer_id",
        )
    )
    llm.add_rule(Rule(model="other", response="SELECT name FROM singer"))
    trace = db.execute("SELECT nl2sql.explain('Which singers performed in a concert?')").fetchone()[
        0
    ]
    assert trace["linked_tables"] == ["singer", "singer_in_concert"]
    reqs = llm.requests
    assert len(reqs) == 3  # PreSQL + 2 FinSQL
    pre_prompt = reqs[0]["messages"][-1]["content"]
    fin_prompts = [r["messages"][-1]["content"] for r in reqs[1:]]
    assert "CREATE TABLE stadium" in pre_prompt and "CREATE TABLE concert " in pre_prompt
    for p in fin_prompts:
        assert "CREATE TABLE singer " in p and "CREATE TABLE singer_in_concert " in p
        assert "CREATE TABLE stadium" not in p and "CREATE TABLE concert " not in p
    assert trace["finsql"]["prompt"] == fin_prompts[0]


def test_three_models_two_agree_majority_wins(db, llm):
    db.execute("SELECT nl2sql.set_setting('presql_votes', 'off')")
    add_models(db, llm, ["wrong", "right1", "right2"])  # the odd one out writes the PreSQL too
    llm.add_rule(Rule(model="wrong", response="SELECT count(*) FROM concert"))
    llm.add_rule(Rule(model="right1", response="SELECT count(*) FROM singer"))
    llm.add_rule(Rule(model="right2", response="```sql\nSELECT COUNT(singer_id) FROM singer;\n```"))
    trace = db.execute("SELECT nl2sql.explain(%s)", (Q_COUNT,)).fetchone()[0]
    assert trace["vote"]["groups"][0]["size"] == 2
    assert set(trace["vote"]["groups"][0]["sources"]) == {"finsql:right1", "finsql:right2"}
    assert "singer" in trace["sql"].lower() and abs(trace["confidence"] - 2 / 3) < 1e-9
    sql = db.execute("SELECT nl2sql(%s)", (Q_COUNT,)).fetchone()[0]
    assert "singer" in sql.lower()


def test_tie_is_broken_by_execution_time(db, llm):
    db.execute("SELECT nl2sql.set_setting('presql_votes', 'off')")
    # a busy machine (CI runs suites side by side) must not time the slow one out
    db.execute("SELECT nl2sql.set_setting('candidate_timeout_ms', '60000')")
    add_models(db, llm, ["slow", "fast"])
    slow = "SELECT count(*) FROM singer, generate_series(1, 100000) AS g"
    fast = "SELECT count(*) FROM singer"
    llm.add_rule(Rule(model="slow", response=slow))
    llm.add_rule(Rule(model="fast", response=fast))
    trace = db.execute("SELECT nl2sql.explain(%s)", (Q_COUNT,)).fetchone()[0]
    groups = trace["vote"]["groups"]
    by_src = {c["source"]: c for c in trace["candidates"]}
    assert len(groups) == 2 and groups[0]["size"] == groups[1]["size"] == 1, by_src
    assert "tie" in trace["vote"]["reason"]
    assert by_src["finsql:slow"]["exec_ms"] > by_src["finsql:fast"]["exec_ms"]
    assert "generate_series" not in trace["sql"]


def test_failing_and_ddl_candidates_are_discarded_rest_still_vote(db, llm):
    add_models(db, llm, ["good", "ddl", "broken", "prose"])
    llm.add_rule(Rule(model="good", response="SELECT count(*) FROM singer"))
    llm.add_rule(Rule(model="ddl", response="DROP TABLE singer"))
    llm.add_rule(Rule(model="broken", response="SELECT no_such_column FROM singer"))
    llm.add_rule(Rule(model="prose", response="I cannot help with that."))
    before = db.execute("SELECT count(*) FROM singer").fetchone()[0]
    trace = db.execute("SELECT nl2sql.explain(%s)", (Q_COUNT,)).fetchone()[0]
    st = {c["source"]: c for c in trace["candidates"]}
    assert st["finsql:ddl"]["status"] == "refused" and "Drop" in st["finsql:ddl"]["reason"]
    assert (
        st["finsql:broken"]["status"] == "error"
        and "no_such_column" in st["finsql:broken"]["reason"]
    )
    assert st["finsql:prose"]["status"] == "refused"
    assert st["finsql:good"]["status"] == "ok"
    assert trace["sql"].lower().replace(" ", "") == "selectcount(*)fromsinger"
    assert db.execute("SELECT count(*) FROM singer").fetchone()[0] == before


def test_candidate_runs_read_only_even_when_the_check_lets_it_through(db, llm):
    # a user function that writes but is declared STABLE, so the volatility check (pg_proc)
    # lets it through; it calls a volatile writer: the read-only transaction refuses the write
    db.execute("CREATE TABLE IF NOT EXISTS audit_t (x int)")
    db.execute(
        "CREATE OR REPLACE FUNCTION writer() RETURNS int LANGUAGE sql AS "
        "'INSERT INTO audit_t VALUES (1) RETURNING x'"
    )
    db.execute(
        "CREATE OR REPLACE FUNCTION sneaky() RETURNS int LANGUAGE plpgsql STABLE AS "
        "'BEGIN RETURN writer(); END'"
    )
    add_models(db, llm, ["w", "v", "ok"])
    llm.add_rule(Rule(model="w", response="SELECT sneaky()"))
    llm.add_rule(Rule(model="v", response="SELECT writer()"))
    llm.add_rule(Rule(model="ok", response="SELECT count(*) FROM singer"))
    trace = db.execute("SELECT nl2sql.explain(%s)", (Q_COUNT,)).fetchone()[0]
    st = {c["source"]: c for c in trace["candidates"]}
    assert st["finsql:w"]["status"] == "error" and "read-only" in st["finsql:w"]["reason"]
    assert st["finsql:v"]["status"] == "refused" and "volatile" in st["finsql:v"]["reason"]
    assert db.execute("SELECT count(*) FROM audit_t").fetchone()[0] == 0
    assert db.execute("SHOW transaction_read_only").fetchone()[0] == "off"
    db.execute("DROP FUNCTION sneaky(); DROP FUNCTION writer(); DROP TABLE audit_t")


def test_candidate_that_never_ends_is_cancelled_at_the_time_limit(db, llm):
    db.execute("SELECT nl2sql.set_setting('candidate_timeout_ms', '400')")
    db.execute("SELECT nl2sql.set_setting('max_plan_cost', '0')")  # it must run, not be refused
    add_models(db, llm, ["endless", "ok"])
    llm.add_rule(
        Rule(model="endless", response="SELECT count(*) FROM generate_series(1, 10000000000)")
    )
    llm.add_rule(Rule(model="ok", response="SELECT count(*) FROM singer"))
    trace = db.execute("SELECT nl2sql.explain(%s)", (Q_COUNT,)).fetchone()[0]
    st = {c["source"]: c for c in trace["candidates"]}
    assert st["finsql:endless"]["status"] == "timeout"
    # cancelled at the 400 ms limit: the client's clock starts after the server's (CI saw 348)
    assert 300 <= st["finsql:endless"]["exec_ms"] < 3000
    assert trace["sql"] is not None
    # no stray cancel left behind: the next statements run normally
    assert db.execute("SELECT count(*) FROM generate_series(1, 200000)").fetchone()[0] == 200000


def test_no_model_configured_gives_a_clear_error(db):
    with pytest.raises(psycopg.Error) as e:
        db.execute("SELECT nl2sql(%s)", (Q_COUNT,))
    msg = str(e.value)
    assert "no model is configured" in msg and "nl2sql.add_model" in msg


def test_endpoint_down_gives_a_clear_error_and_backend_answers_next_query(db, llm):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # closed again at once: nothing listens there
    add_models(db, llm, ["down"], base_url=f"http://127.0.0.1:{dead}/v1", timeout_s=3)
    with pytest.raises(psycopg.Error) as e:
        db.execute("SELECT nl2sql(%s)", (Q_COUNT,))
    msg = str(e.value)
    assert "every model failed" in msg and "cannot reach" in msg and str(dead) in msg
    db.execute("DELETE FROM nl2sql.model")
    add_models(db, llm, ["up"])
    llm.add_rule(Rule(model="up", response="SELECT count(*) FROM singer"))
    assert "singer" in db.execute("SELECT nl2sql(%s)", (Q_COUNT,)).fetchone()[0].lower()


def test_bad_questions_are_refused_with_clear_errors(db, llm):
    add_models(db, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM singer")
    for q, needle in [("   ", "empty"), (None, "NULL"), ("x" * 5000, "over the limit")]:
        with pytest.raises(psycopg.Error) as e:
            db.execute("SELECT nl2sql(%s::text)", (q,))
        assert needle in str(e.value)
    assert len(llm.requests) == 0  # nothing was sent to a model


def test_explain_and_log_record_the_trace(db, llm):
    add_models(db, llm, ["m1", "m2"])
    llm.add_rule(Rule(model="m1", response="SELECT count(*) FROM singer"))
    llm.add_rule(Rule(model="m2", response="SELECT count(*) FROM singer"))
    trace = db.execute("SELECT nl2sql.explain(%s)", (Q_COUNT,)).fetchone()[0]
    for key in (
        "question",
        "masked_question",
        "examples",
        "presql",
        "linked_tables",
        "finsql",
        "candidates",
        "vote",
        "timings",
        "tokens",
        "log_id",
    ):
        assert key in trace, key
    assert trace["tokens"]["prompt"] > 0
    assert trace["timings"]["total_ms"] >= trace["timings"]["llm_wait_ms"]
    row = db.execute(
        "SELECT question, sql, trace->'vote'->>'reason' FROM nl2sql.query_log WHERE id = %s",
        (trace["log_id"],),
    ).fetchone()
    assert row[0] == Q_COUNT and row[1] == trace["sql"] and "majority" in row[2]


def test_ask_returns_the_rows(db, llm):
    add_models(db, llm, ["m1"])
    llm.set_default("SELECT country, count(*) AS n FROM singer GROUP BY country ORDER BY n DESC")
    rows = [r[0] for r in db.execute("SELECT * FROM nl2sql.ask('How many singers per country?')")]
    expect = db.execute("SELECT count(DISTINCT country) FROM singer").fetchone()[0]
    assert len(rows) == expect and set(rows[0]) == {"country", "n"}


def test_add_example_and_bulk_load(db):
    ex_id = db.execute(
        "SELECT nl2sql.add_example('Which singers are older than 40?', "
        "'SELECT name FROM singer WHERE age > 40')"
    ).fetchone()[0]
    row = db.execute(
        "SELECT db_id, masked_question, embedding IS NOT NULL FROM nl2sql.example WHERE id = %s",
        (ex_id,),
    ).fetchone()
    assert row[0] == "local" and "singer" not in row[1].lower() and row[2]
    with pytest.raises(psycopg.Error) as e:
        db.execute("SELECT nl2sql.add_example('Drop it', 'DROP TABLE singer')")
    assert "add_example" in str(e.value)
    data = json.dumps(
        [
            {
                "db_id": "pets",
                "question": 'How many dogs are named "Rex"?',
                "query": 'SELECT count(*) FROM dogs WHERE name = "Rex"',
            },
            {"db_id": "pets", "question": "Broken one", "query": "SELEC nonsense FROM"},
        ]
    )
    out = db.execute("SELECT nl2sql.load_examples(%s, 'sqlite')", (data,)).fetchone()[0]
    assert out["loaded"] == 1 and len(out["failed"]) == 1 and out["failed"][0]["index"] == 1
    sql = db.execute("SELECT sql FROM nl2sql.example WHERE db_id = 'pets'").fetchone()[0]
    assert "'Rex'" in sql  # SQLite's double-quoted string became a PostgreSQL literal


def test_nl2sql_index_cli(cluster, demo_conn):
    bin_dir = ROOT  # run the module with the test interpreter
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "nl2sql_indexer.cli",
            "--quiet",
            cluster.dsn("nl2sql_test"),
            cluster.dsn("postgres"),
        ],
        capture_output=True,
        text=True,
        cwd=bin_dir / "indexer",
        timeout=300,
    )
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == 1 and lines[0]["tables_skipped"] + lines[0]["tables_indexed"] == 4
    assert r.returncode == 1 and "CREATE EXTENSION nl2sql" in r.stderr  # 'postgres' db lacks it


def test_cancel_while_waiting_on_a_hanging_model(cluster, db, llm):
    err, seconds = cancel_while_model_hangs(cluster, db, llm, "nl2sql_test", Q_COUNT, "hang_e2e")
    assert isinstance(err, psycopg.errors.QueryCanceled)
    assert seconds < 1.5


def test_oversized_nul_and_nested_answers_cost_their_candidate_only(db, llm):
    # a 200,000-item IN list (it also writes the PreSQL), a NUL byte, 50,000 nested
    # parentheses: each is refused with its reason, quickly; the good answer is chosen
    import time

    from adversarial_corpus import OVERSIZED

    bad = {cid: text for cid, text, _ in OVERSIZED}
    add_models(db, llm, ["huge", "nul", "nested", "good"])
    llm.add_rule(Rule(model="huge", response=bad["in_list_200k"]))
    llm.add_rule(Rule(model="nul", response="SELECT count(*) FROM singer\x00"))
    llm.add_rule(Rule(model="nested", response=bad["nested_parens_50k"]))
    llm.add_rule(Rule(model="good", response="SELECT count(*) FROM singer"))
    t0 = time.monotonic()
    sql = db.execute("SELECT nl2sql(%s)", (Q_COUNT,)).fetchone()[0]
    assert time.monotonic() - t0 < 30
    assert sql.lower().replace(" ", "") == "selectcount(*)fromsinger"
    trace = db.execute("SELECT nl2sql.explain(%s)", (Q_COUNT,)).fetchone()[0]
    st = {c["source"]: c for c in trace["candidates"]}
    assert st["finsql:huge"]["status"] == "refused"
    assert "answer too large" in st["finsql:huge"]["reason"]
    assert st["presql:huge"]["status"] == "refused"
    assert "answer too large" in trace["presql"]["refused"]
    assert st["finsql:nul"]["status"] == "refused" and "NUL byte" in st["finsql:nul"]["reason"]
    assert "\x00" not in st["finsql:nul"]["raw_text"]  # the log row and explain hold it
    assert st["finsql:nul"]["raw_text"].startswith("SELECT count(*) FROM singer")
    assert st["finsql:nested"]["status"] == "refused"
    assert "answer too large" in st["finsql:nested"]["reason"]
    assert st["finsql:good"]["status"] == "ok"
    assert trace["sql"].lower().replace(" ", "") == "selectcount(*)fromsinger"


def test_a_failed_question_names_only_a_log_row_that_is_kept(db, llm):
    """A failed nl2sql()'s hint once named a log id whose row rolled back with the error; it
    names the row only now that the shared process keeps it (tests/db/test_failed_call_log.py),
    and points to nl2sql.explain, which returns (and logs) the trace."""
    add_models(db, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response="SELECT no_such_column FROM singer"))
    before = db.execute("SELECT max(id) FROM nl2sql.query_log").fetchone()[0] or 0
    with pytest.raises(psycopg.Error) as e:
        db.execute("SELECT nl2sql(%s)", (Q_COUNT,))
    hint = e.value.diag.message_hint or ""
    assert "nl2sql.explain" in hint
    kept = db.execute("SELECT id FROM nl2sql.query_log WHERE id > %s", (before,)).fetchall()
    assert len(kept) == 1 and f"logged as nl2sql.query_log id {kept[0][0]}" in hint, hint
    trace = db.execute("SELECT nl2sql.explain(%s)", (Q_COUNT,)).fetchone()[0]
    assert trace["sql"] is None and trace["log_id"] is not None
    logged = db.execute("SELECT count(*) FROM nl2sql.query_log WHERE id = %s", (trace["log_id"],))
    assert logged.fetchone()[0] == 1
