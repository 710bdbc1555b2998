"""The Python API, the ``nl2sql`` command and ``nl2sql-mcp`` against a database where nl2sql is
installed without PL/Python (issue 32 §3, §5): ``nl2sql install`` by a non-superuser owner,
then reindex, questions and the privileges of a role, all from this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

import nl2sql

if not (Path(__file__).parent / "conftest.py").exists():  # the install branch's fixtures
    pytest.skip("tests/beside/conftest.py (nl2sql install) is not merged", allow_module_level=True)

from conftest import ROOT
from nl2sql_indexer.dev.demo_data import demo_sql

from .conftest import READER, copy_db


@pytest.fixture
def demo(cluster, owner, demo_template, llm):
    """A copy of ``demo_template`` (tests/beside/conftest.py): the installed database with the
    demo tables, indexed from this process, a loopback model, and a login role that may read
    singer only; ``counts`` is what its reindex returned."""
    llm.clear()
    template, counts = demo_template
    db = copy_db(cluster, template, owner)
    db.counts = counts
    return db


def test_reindex_ask_and_privileges_beside_the_database(cluster, demo, llm):
    assert demo.counts["tables_indexed"] >= 4 and demo.counts["values_embedded"] > 0
    llm.set_default("SELECT country, count(*) AS n FROM singer GROUP BY country ORDER BY country")
    with nl2sql.connect(demo.dsn) as client:
        answer = client.ask("How many singers per country?")
        # a copy's tables' statistics start anew (the data state a reindex compares), so its
        # first reindex reads them again, embedding none of their values anew; the next one
        # skips every table and leaves the vector index as it is
        first = client.reindex()
        again = client.reindex()
    assert first["tables_indexed"] == 4 and first["values_embedded"] == 0, first
    assert again["tables_indexed"] == 0 and again["values_embedded"] == 0, again
    assert again["tables_skipped"] == 4 and not again["vector_index_built"], again
    with psycopg.connect(demo.dsn) as c:
        expected = c.execute(
            "SELECT country, count(*) FROM singer GROUP BY country ORDER BY country"
        ).fetchall()
        logged = c.execute(
            "SELECT question FROM nl2sql.query_log WHERE id = %s", (answer.log_id,)
        ).fetchone()
    assert answer.rows == expected and logged == ("How many singers per country?",)
    # a role without SELECT on stadium: not in its prompts, no rows of it
    llm.clear()
    llm.set_default("SELECT name, capacity FROM stadium")
    with nl2sql.connect(cluster.dsn(demo.name, READER)) as client:
        with pytest.raises(nl2sql.ClientError) as e:
            client.ask("Which stadium is the largest?")
    seen = "\n".join(m.get("content") or "" for r in llm.requests for m in r["messages"])
    assert "CREATE TABLE singer" in seen, (str(e.value), e.value.hint, e.value.trace)
    assert "CREATE TABLE stadium" not in seen
    assert str(e.value).startswith("nl2sql")
    assert all(c["row_count"] is None for c in e.value.trace["candidates"])


def test_cli_and_mcp_beside_the_database(demo, llm):
    llm.set_default("SELECT count(*) AS n FROM singer")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "py_udf"))
    out = subprocess.run(
        [sys.executable, "-m", "nl2sql.client.cli", "ask", "--json", "--dsn", demo.dsn, "How many singers?"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["rows"][0][0] > 0
    from nl2sql_indexer.mcp._database import Database
    from nl2sql_indexer.mcp._tools import Tools

    tools = Tools(Database(demo.dsn))  # no PL/Python functions: in process by itself
    got = tools.ask("How many singers?")
    assert tools.db.in_process and got["rows"][0]["n"] > 0


def _prompts(llm) -> str:
    return "\n".join(m.get("content") or "" for r in llm.requests for m in r["messages"])


def test_value_rules_and_quotas_hold_beside_the_database(cluster, demo, llm):
    # the guards a DBA sets apply to the client process as in the server: a column whose values
    # may not be sent shows none of them in any prompt (the same question shows them without the
    # rule), and a role over its questions_per_minute is refused before any model call
    with psycopg.connect(demo.dsn, autocommit=True) as c:
        countries = {r[0] for r in c.execute("SELECT DISTINCT country FROM singer")}
    question = "How many singers come from each country?"
    if time.gmtime().tm_sec >= 45:  # the quota counts per calendar minute: all in one
        time.sleep(61 - time.gmtime().tm_sec)
    llm.set_default("SELECT country, count(*) AS n FROM singer GROUP BY country")
    reader = cluster.dsn(demo.name, READER)
    with nl2sql.connect(reader) as client:
        client.ask(question)
    assert any(f"'{v}'" in _prompts(llm) for v in countries)  # sent without a rule
    with psycopg.connect(demo.dsn, autocommit=True) as c:
        c.execute("SELECT nl2sql.set_value_policy('singer', false, 'country')")
        # the question asked above counts: this minute's second is the last
        c.execute(f"SELECT nl2sql.set_quota('{READER}', questions_per_minute => 2)")
    llm.clear()
    llm.set_default("SELECT country, count(*) AS n FROM singer GROUP BY country")
    with nl2sql.connect(reader) as client:
        client.ask(question)
        seen = _prompts(llm)
        asked = len(llm.requests)
        with pytest.raises(nl2sql.ClientError, match="over questions_per_minute = 2"):
            client.ask(question)
    assert seen and not any(f"'{v}'" in seen for v in countries)
    assert len(llm.requests) == asked  # refused before any model request


def test_questions_beside_embed_with_the_index_s_recorded_precision(demo, llm):
    """The client reads the index's recorded model as the server's door does: after a forced
    reindex with ``embedding_precision`` int8, questions embed with int8 even when this
    process's default is fp32 (and back after fp32 is set and forced again)."""
    from nl2sql.embedding import encode, index_model

    if not encode.onnx_path("int8").exists():
        pytest.skip("no int8 model file: scripts/install.sh makes it")
    llm.set_default("SELECT count(*) FROM singer")
    try:
        for wanted in ("int8", "fp32"):
            with psycopg.connect(demo.dsn, autocommit=True) as c:
                c.execute("SELECT nl2sql.set_setting('embedding_precision', %s)", (wanted,))
            with nl2sql.connect(demo.dsn) as client:
                client.reindex(force=True)
                encode.set_precision(None)  # this process's own default
                client.ask("How many singers are there?")
                assert encode.precision() == wanted
            with psycopg.connect(demo.dsn) as c:
                recorded = c.execute(
                    "SELECT value FROM nl2sql.setting WHERE key = %s", (index_model.KEY,)
                ).fetchone()[0]
            assert index_model.precision_of(recorded) == wanted
    finally:
        encode.set_precision(None)


def test_reindex_by_two_workers_beside_the_database(installed):
    """``nl2sql reindex --jobs 2`` without PL/Python: two client processes claim the tables
    from nl2sql.reindex_queue and leave the value index one process leaves."""
    with psycopg.connect(installed.dsn, autocommit=True) as c:
        c.execute(demo_sql())
    query = "SELECT table_name, column_name, value FROM nl2sql.cell_value ORDER BY 1, 2, 3"
    with nl2sql.connect(installed.dsn) as client:
        one = client.reindex()
    with psycopg.connect(installed.dsn) as c:
        before = c.execute(query).fetchall()
    r = subprocess.run(
        [sys.executable, "-m", "nl2sql.client.cli", "reindex", "--dsn", installed.dsn]
        + ["--force", "--jobs", "2", "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    two = json.loads(r.stdout.strip().splitlines()[-1])
    assert two["tables_indexed"] == one["tables_indexed"] >= 4
    with psycopg.connect(installed.dsn) as c:
        assert c.execute(query).fetchall() == before
        done = c.execute(
            "SELECT count(*) = count(done_at) FROM nl2sql.reindex_queue WHERE run_id = "
            "(SELECT max(run_id) FROM nl2sql.reindex_queue)"
        ).fetchone()[0]
    assert done
