"""``nl2sql.chart`` through the extension (beside the database, ``Client.chart`` and
``nl2sql ask --chart``: tests/beside/test_tools_beside.py): the spec of the chosen SQL's rows, the chart chosen by rule, a spec
that says what happened for a result no chart fits and when no SQL is chosen, never an error."""

from __future__ import annotations

import pytest

from conftest import add_models
from nl2sql.charts.binning import PIE_SLICES
from nl2sql_indexer.dev.demo_data import demo_sql
from nl2sql_indexer.dev.loopback import Rule

DB = "nl2sql_charts"
CASES = [
    # (question, SQL the models answer, chart, x field, y field)
    ("How many concerts were held each year?",
     "SELECT year, count(*) AS concerts FROM concert GROUP BY year ORDER BY year",
     "bar", "year", "concerts"),
    ("How many singers come from each country? As a pie chart.",
     "SELECT country, count(*) AS singers FROM singer GROUP BY country", "pie", "country",
     "singers"),
    ("Capacity against average attendance of the stadiums",
     "SELECT capacity, average FROM stadium", "scatter", "capacity", "average"),
    ("How many singers do we have?", "SELECT count(*) FROM singer", "none", None, None),
    ("Which singers are from France?", "SELECT name FROM singer WHERE country = 'France'",
     "none", None, None),
]  # fmt: skip


@pytest.fixture(scope="module")
def cdb(cluster):
    cluster.create_database(DB, drop=True)
    conn = cluster.connect(DB)
    conn.execute(demo_sql())
    conn.execute("CREATE EXTENSION nl2sql CASCADE")
    conn.execute("SELECT nl2sql.reindex()")
    yield conn
    conn.close()


@pytest.fixture
def models(cdb, llm):
    llm.clear()
    llm.set_default(None)
    cdb.execute("DELETE FROM nl2sql.model")
    add_models(cdb, llm, ["m1", "m2"])
    for q, sql, *_ in CASES:
        llm.add_rule(Rule(question=q, response=sql))
    yield llm


def _fields(spec: dict) -> tuple:
    enc = spec.get("encoding", {})
    if "theta" in enc:
        return enc["color"]["field"], enc["theta"]["field"]
    if "x" not in enc:
        return None, None
    return enc["x"]["field"], enc["y"]["field"]


@pytest.mark.parametrize("question,sql,chart,x,y", CASES)
def test_chart_in_the_server(cdb, models, question, sql, chart, x, y):
    spec = cdb.execute("SELECT nl2sql.chart(%s)", (question,)).fetchone()[0]
    meta = spec["usermeta"]
    # the pipeline writes the chosen SQL back in its own spelling (COUNT)
    assert (meta["chart"], *_fields(spec), meta["sql"].lower()) == (chart, x, y, sql.lower())
    assert meta["log_id"] > 0 and meta["truncated"] is False
    if chart != "none":
        rows = cdb.execute(f"SELECT row_to_json(t) FROM ({sql}) t").fetchall()
        drawn = [r[0] for r in rows if None not in r[0].values()]
        # every row drawn (a pie past its slices folds the rest into "other": same total)
        assert sum(v[y] for v in spec["data"]["values"]) == sum(r[y] for r in drawn)
        assert len(spec["data"]["values"]) == (len(drawn) if chart != "pie" else PIE_SLICES)


def test_no_sql_chosen_is_a_spec_that_says_why(cdb, models):
    models.add_rule(Rule(question="Gibberish?", response="SELECT FROM nowhere_at_all"))
    spec = cdb.execute("SELECT nl2sql.chart('Gibberish?')").fetchone()[0]
    assert spec["usermeta"]["chart"] == "none" and spec["usermeta"]["sql"] is None
    assert spec["data"]["values"][0]["nl2sql_message"].startswith("no chart: ")
