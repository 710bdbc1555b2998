"""Generation and selection inside a real PostgreSQL, with scripted loopback models: repair
rounds, value alignment, confidence filtering, multiple-choice selection, hardness routing,
relative-time rewriting, prompt variants and samples, dialect transpiling, cleaning in the trace.

Every model answer here is scripted (tests/conftest.py), not a model's.
"""

from __future__ import annotations

import psycopg
import pytest

from conftest import add_models
from nl2sql_indexer.dev.loopback import Rule

GEN_KEYS = [
    "prompt_variants",
    "samples_per_model",
    "sample_temperature",
    "repair_rounds",
    "value_alignment",
    "align_min_trigram",
    "align_min_cosine",
    "confidence_threshold",
    "tie_break",
    "selection",
    "selection_model",
    "hardness_voters",
    "rewrite_time",
    "rules_off",
]
Q = "How many singers do we have?"


@pytest.fixture
def gen(db):
    """The demo connection with PreSQL not voting; generation settings back to their defaults
    afterwards."""
    db.execute("SELECT nl2sql.set_setting('presql_votes', 'off')")
    yield db
    for k in GEN_KEYS:
        db.execute("SELECT nl2sql.reset_setting(%s)", (k,))


def setting(conn, key, value):
    conn.execute("SELECT nl2sql.set_setting(%s, %s)", (key, value))


def explain(conn, q=Q):
    return conn.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]


def cand(trace, source):
    return next(c for c in trace["candidates"] if c["source"] == source)


# --- settings: only what a user set is stored ---------------------------------------------------


@pytest.fixture
def no_setting_rows(db):
    """nl2sql.setting emptied (every setting at its declared default); the rows are put back
    afterwards."""
    rows = db.execute("SELECT key, value FROM nl2sql.setting").fetchall()
    db.execute("DELETE FROM nl2sql.setting")
    yield db
    db.execute("DELETE FROM nl2sql.setting")
    for k, v in rows:
        db.execute("INSERT INTO nl2sql.setting (key, value) VALUES (%s, %s)", (k, v))


def test_pipeline_runs_on_declared_defaults_without_setting_rows(no_setting_rows, llm):
    conn = no_setting_rows
    add_models(conn, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM singer")
    trace = explain(conn)
    assert trace["sql"] is not None and trace.get("error") is None
    assert len(trace["examples"]) == 9  # k_examples default
    assert [c["source"] for c in trace["candidates"]] == ["finsql:m1"]  # presql_votes off
    assert conn.execute("SELECT nl2sql.set_setting('k_examples', ' 4 ')").fetchone()[0] == "4"
    assert conn.execute("SELECT key, value FROM nl2sql.setting").fetchall() == [("k_examples", "4")]
    with pytest.raises(psycopg.Error, match="did you mean k_examples"):
        conn.execute("SELECT nl2sql.set_setting('k_example', '4')")


# --- repair ----------------------------------------------------------------------------------


def test_failing_candidate_is_repaired_in_round_2(gen, llm):
    add_models(gen, llm, ["m1"])
    llm.add_rule(
        Rule(model="m1", contains="Repair round 2", response="SELECT count(*) FROM singer")
    )
    llm.add_rule(
        Rule(model="m1", contains="Repair round 1", response="SELECT count(qwrtz) FROM singer")
    )
    llm.add_rule(Rule(model="m1", response="SELECT count(xyzzy) FROM singer"))
    trace = explain(gen)
    c = cand(trace, "finsql:m1")
    assert c["status"] == "ok" and c["row_count"] == 1
    assert [r["round"] for r in c["repairs"]] == [1, 2]
    assert c["repairs"][0]["status"] == "error" and "qwrtz" in c["repairs"][0]["reason"]
    assert c["repairs"][1]["status"] == "ok"
    assert trace["sql"].lower().replace(" ", "") == "selectcount(*)fromsinger"
    reqs = [r["messages"][-1]["content"] for r in llm.requests]
    assert len(reqs) == 4  # PreSQL, FinSQL, 2 repair rounds
    assert "xyzzy" in reqs[2] and "does not exist" in reqs[2] and "Repair round 1 of 3" in reqs[2]
    assert "qwrtz" in reqs[3] and "Repair round 2 of 3" in reqs[3]
    assert [r["repaired"] for r in trace["repair"]["rounds"]] == [0, 1]
    n = gen.execute("SELECT count(*) FROM singer").fetchone()[0]
    assert gen.execute(trace["sql"]).fetchone()[0] == n


def test_repair_loop_stops_after_three_rounds_then_asks_the_last_resort(gen, llm):
    add_models(gen, llm, ["m1"])
    for r in (3, 2, 1):
        llm.add_rule(
            Rule(
                model="m1",
                contains=f"Repair round {r}",
                response=f"SELECT count(bad{r}) FROM singer",
            )
        )
    llm.add_rule(Rule(model="m1", response="SELECT count(bad0) FROM singer"))
    trace = explain(gen)
    c = cand(trace, "finsql:m1")
    assert [r["round"] for r in c["repairs"]] == [1, 2, 3]
    assert all(r["status"] == "error" for r in c["repairs"])
    assert c["status"] == "error" and trace["sql"] is None
    # PreSQL, FinSQL, 3 repairs and no 4th, then the last resort (which fails the same way)
    assert len(llm.requests) == 6
    assert cand(trace, "last_resort:m1")["status"] == "error"
    assert "no candidate executed" in trace["error"]


def test_a_misspelt_name_is_snapped_without_a_model_call(gen, llm):
    add_models(gen, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response="SELECT count(nmae) FROM singer"))
    trace = explain(gen)
    c = cand(trace, "finsql:m1")
    assert c["status"] == "ok" and c["row_count"] == 1
    assert [(r["round"], r["snapped"]) for r in c["repairs"]] == [(0, ["nmae → name"])]
    assert (c["repairs"][0]["rule"], c["repairs"][0]["problem_rule"]) == ("snap_names", None)
    assert len(llm.requests) == 2  # PreSQL and FinSQL: no repair call


def test_a_rule_named_in_rules_off_is_skipped_and_an_unknown_name_refused(gen, llm):
    with pytest.raises(psycopg.Error, match="no_such_rule.*snap_names"):
        setting(gen, "rules_off", "no_such_rule")
    setting(gen, "rules_off", "snap_names")
    setting(gen, "repair_rounds", "1")
    add_models(gen, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response="SELECT count(nmae) FROM singer"))
    trace = explain(gen)
    c = cand(trace, "finsql:m1")
    assert c["status"] != "ok"  # no round 0: the model's one round repeats its query
    assert all(r["round"] != 0 for r in c["repairs"]) and c["repairs"]


def test_the_last_resort_answers_from_the_schema_alone_when_nothing_ran(gen, llm):
    setting(gen, "repair_rounds", "1")
    add_models(gen, llm, ["m1"])
    # every prompt with the few-shot examples (PreSQL, FinSQL, repair) gets a failing query;
    # the last resort's prompt has none
    llm.add_rule(
        Rule(
            model="m1",
            contains="Some example questions",
            response="SELECT count(xyzzy) FROM singer",
        )
    )
    llm.add_rule(Rule(model="m1", response="SELECT count(*) FROM singer"))
    trace = explain(gen)
    last = cand(trace, "last_resort:m1")
    assert last["status"] == "ok" and trace["sql"] == last["sql"]
    prompt = trace["last_resort"]["prompt"]
    assert "CREATE TABLE singer" in prompt and "Some example questions" not in prompt
    assert (
        trace["tokens"]["prompt"]
        == sum(
            r["prompt_tokens"]
            for r in [
                trace["presql"]["reply"],
                *trace["finsql"]["replies"],
                trace["last_resort"]["reply"],
            ]
        )
        + trace["repair"]["prompt_tokens"]
    )


def test_the_last_resort_answer_has_its_names_snapped(gen, llm):
    """The last resort is asked plainly (no cell values, the basic instruction); its failing
    answer gets repair's round 0 — the misspelt name snapped, no further model call."""
    setting(gen, "repair_rounds", "1")
    add_models(gen, llm, ["m1"])
    llm.add_rule(
        Rule(
            model="m1", contains="Using valid PostgreSQL", response="SELECT count(nmae) FROM singer"
        )
    )
    llm.add_rule(Rule(model="m1", response="SELECT count(xyzzy) FROM singer"))
    trace = explain(gen)
    last = cand(trace, "last_resort:m1")
    assert last["status"] == "ok" and trace["sql"] == last["sql"]
    assert [(r["round"], r["snapped"]) for r in last["repairs"]] == [(0, ["nmae → name"])]
    prompt = trace["last_resort"]["prompt"]
    assert "minimize SQL execution time" not in prompt and "values:" not in prompt
    assert len(llm.requests) == 4  # PreSQL, FinSQL, one repair round, the last resort


@pytest.mark.parametrize(
    "answer, fixed, change",
    [
        # more than one row from a scalar subquery (SQLSTATE 21000): each of its rows
        (
            "SELECT name FROM singer WHERE singer_id = (SELECT singer_id FROM singer_in_concert)",
            "SELECT name FROM singer WHERE singer_id IN (SELECT singer_id FROM singer_in_concert)",
            "= (subquery) → IN",
        ),
        # a bare column beside an aggregate, ungrouped (42803): grouped by it
        (
            "SELECT country FROM singer ORDER BY count(*) DESC",
            "SELECT country FROM singer GROUP BY country ORDER BY COUNT(*) DESC",
            "GROUP BY country added",
        ),
        # a misspelt name first, then the error the snapped query gives
        (
            "SELECT countyr FROM singer ORDER BY count(*) DESC",
            "SELECT country FROM singer GROUP BY country ORDER BY COUNT(*) DESC",
            "countyr → country|GROUP BY country added",
        ),
        # an empty result no row could give (one column held to two ranges): an INTERSECT
        (
            "SELECT country FROM singer WHERE age > 40 AND age < 30",
            "SELECT country FROM singer WHERE age > 40 INTERSECT "
            "SELECT country FROM singer WHERE age < 30",
            "age > 40 AND age < 30 (no row at once) -> INTERSECT",
        ),
        # a misspelt name first, then the empty result's WHERE split
        (
            "SELECT country FROM singer WHERE agee > 40 AND age < 30",
            "SELECT country FROM singer WHERE age > 40 INTERSECT "
            "SELECT country FROM singer WHERE age < 30",
            "agee → age|age > 40 AND age < 30 (no row at once) -> INTERSECT",
        ),
    ],
)
def test_an_error_with_one_reading_is_fixed_in_round_0(gen, llm, answer, fixed, change):
    """What SQLite runs and PostgreSQL refuses, rewritten by the error's SQLSTATE, and a WHERE no
    row satisfies, split, without a model call: the candidate runs with rows, and no repair
    round asks the model."""
    add_models(gen, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response=answer))
    c = cand(explain(gen), "finsql:m1")
    assert c["status"] == "ok" and c["sql"] == fixed
    assert [(r["round"], r["snapped"]) for r in c["repairs"]] == [
        (0, [step]) for step in change.split("|")
    ]
    assert len(llm.requests) == 2  # PreSQL and FinSQL only


def test_an_output_named_twice_is_repaired(gen, llm):
    """A select list naming one column twice ran with rows, and is wrong: sent to repair, the
    problem said."""
    add_models(gen, llm, ["m1"])
    llm.add_rule(Rule(model="m1", contains="twice", response="SELECT name, country FROM singer"))
    llm.add_rule(Rule(model="m1", response="SELECT name, name FROM singer"))
    c = cand(explain(gen), "finsql:m1")
    assert c["status"] == "ok" and c["sql"] == "SELECT name, country FROM singer"
    assert "names name twice" in c["repairs"][0]["problem"]
    assert len(llm.requests) == 3  # PreSQL, FinSQL, one repair


JOINED = "SELECT s.name FROM stadium AS s JOIN concert AS c ON s.stadium_id = c.stadium_id"


def test_either_value_where_the_question_asks_for_both_is_split_in_round_0(gen, llm):
    """A query that ran with rows, keeping concerts of either year where the question asks for
    stadiums with both: round 0 intersects the two, without a model call, and keeps the
    intersection whatever its rows."""
    add_models(gen, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response=f"{JOINED} WHERE c.year IN (2014, 2015)"))
    c = cand(explain(gen, "Which stadiums had concerts in both 2014 and 2015?"), "finsql:m1")
    assert c["status"] == "ok"
    assert c["sql"] == f"{JOINED} WHERE c.year = 2014 INTERSECT {JOINED} WHERE c.year = 2015"
    assert [(r["round"], r["snapped"]) for r in c["repairs"]] == [
        (0, ["c.year IN (2014, 2015) (both) -> INTERSECT"])
    ]
    assert "both of two values" in c["repairs"][0]["problem"]
    assert len(llm.requests) == 2  # PreSQL and FinSQL only


SIC = "SELECT s.name, count(*) FROM stadium AS s JOIN singer_in_concert AS sic "
BETWEEN = (
    "SELECT s.name, COUNT(*) FROM stadium AS s JOIN concert AS concert "
    "ON s.stadium_id = concert.stadium_id JOIN singer_in_concert AS sic "
    "ON concert.concert_id = sic.concert_id GROUP BY s.name"
)


@pytest.mark.parametrize(
    "question, answer, fixed, snapped, problem",
    [
        # stadiums' keys compared with concerts' own keys: moved onto concert.stadium_id
        (
            "Which stadiums have had no concert?",
            "SELECT name FROM stadium WHERE NOT stadium_id IN (SELECT concert_id FROM concert)",
            "SELECT name FROM stadium WHERE NOT stadium_id IN (SELECT stadium_id FROM concert)",
            [["concert_id → stadium_id"]],
            "concert.stadium_id refers to stadium.stadium_id",
        ),
        # singer_in_concert.concert_id (a key to concert) joined to stadium: concert between
        (
            "How many singer performances has each stadium had?",
            SIC + "ON s.stadium_id = sic.concert_id GROUP BY s.name",
            BETWEEN,
            [["JOIN concert added between s.stadium_id and sic.concert_id"]],
            "join concert between them",
        ),
        # a misspelt column snapped onto that key: round 0 goes on and joins concert between
        (
            "How many singer performances has each stadium had?",
            SIC + "ON s.stadium_id = sic.concertid GROUP BY s.name",
            BETWEEN,
            [
                ["concertid → concert_id"],
                ["JOIN concert added between s.stadium_id and sic.concert_id"],
            ],
            "join concert between them",
        ),
        # an inner join held NULL for "no concert" (the count 0): the anti-join's LEFT JOIN
        (
            "How many stadiums have had no concert?",
            "SELECT count(s.stadium_id) FROM stadium AS s JOIN concert AS c "
            "ON s.stadium_id = c.stadium_id WHERE c.concert_id IS NULL",
            "SELECT COUNT(s.stadium_id) FROM stadium AS s LEFT JOIN concert AS c "
            "ON s.stadium_id = c.stadium_id WHERE c.concert_id IS NULL",
            [["JOIN concert made LEFT (c.concert_id IS NULL)"]],
            "LEFT JOIN it",
        ),
        # an IN subquery selecting singer_id, which concert lacks (the outer query's): read from
        # the one related table that has its columns and is not the outer query's
        (
            "Which singers sang in a concert after the first?",
            "SELECT name FROM singer WHERE singer_id IN "
            "(SELECT singer_id FROM concert WHERE concert_id > 1)",
            "SELECT name FROM singer WHERE singer_id IN "
            "(SELECT singer_id FROM singer_in_concert WHERE concert_id > 1)",
            [["FROM concert → singer_in_concert (IN subquery)"]],
            "none of its tables (concert)",
        ),
        # a failed join on a column neither table has, everything else the stadiums': dropped
        (
            "List the stadiums' names and capacities, largest first.",
            "SELECT T2.name, T2.capacity FROM concert AS T1 JOIN stadium AS T2 "
            "ON T1.singer_id = T2.singer_id ORDER BY T2.capacity DESC",
            "SELECT T2.name, T2.capacity FROM stadium AS T2 ORDER BY T2.capacity DESC",
            [["JOIN concert dropped"]],
            "does not exist",
        ),
    ],
)
def test_tables_related_the_wrong_way_are_rewritten_in_round_0(
    gen, llm, question, answer, fixed, snapped, problem
):
    """A query relating tables the wrong way, as the foreign keys and columns show: round 0
    rewrites it (each attempt on what the last gave), without a model call, and keeps what
    that gives; the problem said names tables and columns only."""
    add_models(gen, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response=answer))
    c = cand(explain(gen, question), "finsql:m1")
    assert c["status"] == "ok" and c["sql"] == fixed
    assert [(r["round"], r["snapped"]) for r in c["repairs"]] == [(0, s) for s in snapped]
    assert problem in c["repairs"][-1]["problem"]  # what the last rewrite mended
    assert len(llm.requests) == 2  # PreSQL and FinSQL only


def test_a_bound_the_question_says_inclusive_is_made_inclusive_before_running(gen, llm):
    """ "2014 or later" answered with a strict bound: the candidate runs with ``>=``, the
    change in its alignments."""
    add_models(gen, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response=f"{JOINED} WHERE c.year > 2014"))
    c = cand(explain(gen, "Which stadiums had concerts in 2014 or later?"), "finsql:m1")
    assert c["status"] == "ok" and c["sql"].endswith("WHERE c.year >= 2014")
    assert [(a["from"], a["to"], a["method"]) for a in c["alignments"]] == [
        ("c.year > 2014", "c.year >= 2014", "question")
    ]


@pytest.mark.parametrize(
    "question, answer, problem, mended",
    [
        # one row where the question asks for each country
        (
            "What is the average age of the singers in each country?",
            "SELECT avg(age) FROM singer",
            "without GROUP BY",
            "SELECT country, AVG(age) FROM singer GROUP BY country",
        ),
        # an IN subquery selecting a column its table lacks (the outer query's, true wherever
        # the subquery has a row) that no related table would hold: the model's to mend
        (
            "Which singers have sung in a stadium for more than 1000 people?",
            "SELECT name FROM singer WHERE singer_id IN "
            "(SELECT singer_id FROM stadium WHERE capacity > 1000)",
            "none of its tables (stadium)",
            "SELECT name FROM singer WHERE singer_id IN (SELECT sic.singer_id FROM "
            "singer_in_concert AS sic JOIN concert AS c ON sic.concert_id = c.concert_id "
            "JOIN stadium AS s ON c.stadium_id = s.stadium_id WHERE s.capacity > 1000)",
        ),
    ],
)
def test_a_result_the_question_or_the_keys_show_wrong_is_repaired(
    gen, llm, question, answer, problem, mended
):
    """A query that ran with rows and that the question's words or the schema's primary key
    show wrong: sent to repair with the problem said, and the model's mended query taken."""
    add_models(gen, llm, ["m1"])
    llm.add_rule(Rule(model="m1", contains=problem, response=mended))
    llm.add_rule(Rule(model="m1", response=answer))
    c = cand(explain(gen, question), "finsql:m1")
    assert c["status"] == "ok" and c["sql"] == mended
    assert problem in c["repairs"][0]["problem"]
    assert len(llm.requests) == 3  # PreSQL, FinSQL, one repair


COUNTED = (
    "SELECT stadium.stadium_id, stadium.name, COUNT(*) FROM stadium JOIN concert "
    "ON concert.stadium_id = stadium.stadium_id GROUP BY "
)


def test_counts_over_a_tables_own_key_count_the_one_table_referring_to_it(gen, llm):
    """Counts over groups of the stadium table's own key (every count 1), where one table
    (concert) refers to stadium: round 0 joins it, no model asked (rules.grouped_by_key)."""
    add_models(gen, llm, ["m1"])
    llm.add_rule(
        Rule(
            model="m1",
            response="SELECT stadium_id, name, count(*) FROM stadium GROUP BY stadium_id, name",
        )
    )
    c = cand(explain(gen, "How many concerts has every stadium had?"), "finsql:m1")
    assert c["status"] == "ok" and c["sql"] == COUNTED + "stadium.stadium_id, stadium.name"
    r0 = c["repairs"][0]
    assert r0["round"] == 0 and r0["rule"] == "grouped_by_key"
    assert r0["snapped"] == ["concert joined on concert.stadium_id"]
    assert len(llm.requests) == 2  # PreSQL and FinSQL: no repair asked


def test_a_round_0_rewrite_that_counts_one_row_a_group_is_mended_in_round_0(gen, llm):
    """Round 0 adds the missing GROUP BY column, the table's primary key: the query runs, and
    every count is 1 — which round 0 then mends too, joining the one table that refers to
    stadium; the model is asked nothing more."""
    add_models(gen, llm, ["m1"])
    llm.add_rule(
        Rule(model="m1", response="SELECT stadium_id, name, count(*) FROM stadium GROUP BY name")
    )
    c = cand(explain(gen, "How many concerts has every stadium had?"), "finsql:m1")
    assert c["status"] == "ok" and c["sql"] == COUNTED + "stadium.name, stadium.stadium_id"
    r0, r1 = c["repairs"][:2]
    assert r0["round"] == 0 and r0["snapped"] == ["GROUP BY stadium_id added"]
    assert r1["round"] == 0 and r1["rule"] == "grouped_by_key"
    assert len(llm.requests) == 2


def test_a_snap_that_names_an_output_twice_leaves_the_model_its_own_error(gen, llm):
    """Round 0 snapped an unknown name to a column the select list already has: the query runs
    and shows itself wrong, so the model is shown its own SQL and error, and the snapped query
    is kept only as the fallback."""
    add_models(gen, llm, ["m1"])
    llm.add_rule(Rule(model="m1", contains="nmae", response="SELECT name, country FROM singer"))
    llm.add_rule(Rule(model="m1", response="SELECT name, singer.nmae FROM singer"))
    c = cand(explain(gen), "finsql:m1")
    assert c["sql"] == "SELECT name, country FROM singer" and c["status"] == "ok"
    r0, r1 = c["repairs"][:2]
    assert r0["round"] == 0 and r0["snapped"] == ["nmae → name"]
    assert r0["row_count"] > 0
    assert r1["round"] == 1 and "column singer.nmae does not exist" in r1["problem"]


def test_repair_asks_once_more_warmer_when_the_model_repeats_itself(gen, llm):
    add_models(gen, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response="SELECT count(xyzzy) FROM singer"))
    trace = explain(gen)
    c = cand(trace, "finsql:m1")
    assert [r["status"] for r in c["repairs"]] == ["unchanged", "unchanged"]
    assert "asked again at temperature 0.7" in c["repairs"][0]["reason"]
    assert c["repairs"][1]["reason"].endswith("repair stopped")
    # PreSQL, FinSQL, the repair, the same repair warmer, the last resort
    assert len(llm.requests) == 5
    assert llm.requests[3]["temperature"] == 0.7


def test_repair_off_makes_no_extra_call(gen, llm):
    setting(gen, "repair_rounds", "0")
    add_models(gen, llm, ["m1"])
    llm.add_rule(Rule(model="m1", response="SELECT count(xyzzy) FROM singer"))
    trace = explain(gen)
    assert cand(trace, "finsql:m1")["repairs"] == [] and len(llm.requests) == 2


@pytest.mark.parametrize(
    ("failing", "repaired"),
    [
        (["m3"], False),  # m1 and m2 agree: 2 of 3, a majority a repaired m3 cannot outvote
        (["m2", "m3"], True),  # m1 alone: 1 of 3, so the failed two are repaired
    ],
)
def test_repair_is_skipped_when_one_answer_holds_a_majority(gen, llm, failing, repaired):
    add_models(gen, llm, ["m1", "m2", "m3"])
    for m in failing:
        llm.add_rule(Rule(model=m, contains="Repair round", response="SELECT count(*) FROM singer"))
        llm.add_rule(Rule(model=m, response="SELECT count(xyzzy) FROM singer"))
    llm.set_default("SELECT count(*) FROM singer")
    trace = explain(gen)
    asked = [r for r in llm.requests if "Repair round" in r["messages"][-1]["content"]]
    assert trace["sql"] is not None and trace["vote"]["groups"][0]["size"] == (3 if repaired else 2)
    assert len(asked) == (len(failing) if repaired else 0)
    assert ("skipped" in trace["repair"]) is not repaired
    if not repaired:  # nothing to repair: nothing skipped
        llm.clear()
        llm.set_default("SELECT count(*) FROM singer")
        assert "skipped" not in explain(gen)["repair"]
    assert all(cand(trace, f"finsql:{m}")["repairs"] == [] for m in failing) is not repaired


def test_empty_result_gets_a_repair_round_with_cell_values(gen, llm):
    setting(gen, "value_alignment", "off")
    add_models(gen, llm, ["m1"])
    llm.add_rule(
        Rule(
            model="m1",
            contains="Repair round 1",
            response="SELECT name FROM singer WHERE country = 'France'",
        )
    )
    llm.add_rule(Rule(model="m1", response="SELECT name FROM singer WHERE country = 'Frankreich'"))
    trace = explain(gen, "Which singers are from France?")
    c = cand(trace, "finsql:m1")
    assert c["repairs"][0]["problem"].endswith("(empty result)")
    assert c["status"] == "ok" and c["row_count"] > 0 and "'France'" in c["sql"]
    repair_prompt = llm.requests[2]["messages"][-1]["content"]
    assert "Relevant cell values:" in repair_prompt and "singer.country:" in repair_prompt


# --- value alignment ---------------------------------------------------------------------------


def test_lower_case_literal_is_aligned_to_the_stored_value(gen, llm):
    # every model writes 'france', the data has 'France' (cf. 'stealth' / 'Stealth')
    add_models(gen, llm, ["m1", "m2"])
    llm.set_default("SELECT count(*) FROM singer WHERE country = 'france'")
    trace = explain(gen, "How many singers are from france?")
    c = cand(trace, "finsql:m1")
    assert c["alignments"] == [
        {
            "column": "public.singer.country",
            "from": "france",
            "to": "France",
            "method": "case",
            "score": 1.0,
        }
    ]
    assert "'France'" in trace["sql"]
    n = gen.execute("SELECT count(*) FROM singer WHERE country = 'France'").fetchone()[0]
    assert gen.execute(trace["sql"]).fetchone()[0] == n > 0


def test_alignment_by_trigram_through_an_alias_and_in_list(gen, llm):
    add_models(gen, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM singer AS s WHERE s.country IN ('United State', 'Japan')")
    trace = explain(gen, "How many singers are from the US or Japan?")
    al = cand(trace, "finsql:m1")["alignments"]
    assert len(al) == 1 and al[0]["to"] == "United States" and al[0]["method"] == "trigram"
    assert 0.4 <= al[0]["score"] < 1


def test_alignment_by_embedding_when_trigrams_are_not_close(gen, llm):
    setting(gen, "align_min_trigram", "1")  # trigram only for identical strings
    setting(gen, "align_min_cosine", "0.5")
    add_models(gen, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM singer WHERE country = 'the netherlands'")
    trace = explain(gen, "How many singers are Dutch?")
    al = cand(trace, "finsql:m1")["alignments"]
    assert al and al[0]["to"] == "Netherlands" and al[0]["method"] == "vector"


def test_exact_values_and_unrelated_literals_are_left_alone(gen, llm):
    add_models(gen, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM singer WHERE country = 'France' AND name <> 'zzzz qqqq'")
    trace = explain(gen, "How many French singers?")
    c = cand(trace, "finsql:m1")
    assert c["alignments"] == [] and "'zzzz qqqq'" in c["sql"]


def test_alignment_off(gen, llm):
    setting(gen, "value_alignment", "off")
    setting(gen, "repair_rounds", "0")
    add_models(gen, llm, ["m1"])
    llm.set_default("SELECT name FROM singer WHERE country = 'france'")
    trace = explain(gen, "Which singers are from france?")
    c = cand(trace, "finsql:m1")
    assert c["alignments"] == [] and c["row_count"] == 0


# --- selection ---------------------------------------------------------------------------------


def test_low_confidence_group_is_dropped_and_reported(gen, llm):
    names = [f"m{i}" for i in range(6)]
    add_models(gen, llm, names)
    llm.set_default("SELECT count(*) FROM singer")
    llm.add_rule(Rule(model="m5", response="SELECT count(*) FROM concert"))
    trace = explain(gen)
    v = trace["vote"]
    assert [g["size"] for g in v["groups"]] == [5]
    assert len(v["dropped"]) == 1 and v["dropped"][0]["sources"] == ["finsql:m5"]
    assert abs(v["dropped"][0]["confidence"] - 1 / 6) < 1e-9
    assert "below confidence 0.2 dropped" in v["reason"]


def test_multiple_choice_call_gets_groups_in_confidence_order(gen, llm):
    setting(gen, "selection", "multiple_choice")
    setting(gen, "selection_model", "judge")
    add_models(gen, llm, ["a", "b", "judge"])
    llm.add_rule(Rule(model="judge", contains="Answer with one letter", response="Option B"))
    llm.add_rule(Rule(model="judge", response="SELECT count(*) FROM concert"))
    llm.set_default("SELECT count(*) FROM singer")
    trace = explain(gen)
    mc = trace["multiple_choice"]
    prompt = mc["prompt"]
    a, b = prompt.index("Option A"), prompt.index("Option B")
    assert a < b and "count(*) FROM singer" in prompt[a:b].replace("COUNT", "count")
    assert "confidence 0.67" in prompt[a:b] and "confidence 0.33" in prompt[b:]
    assert "concert" in prompt[b:]
    assert mc["choice"] == 1 and trace["vote"]["method"] == "multiple_choice"
    assert "concert" in trace["sql"].lower()
    assert llm.requests[-1]["model"] == "judge"


def test_multiple_choice_with_an_unknown_selection_model_says_how_to_fix(gen, llm):
    setting(gen, "selection", "multiple_choice")
    setting(gen, "selection_model", "nobody")
    add_models(gen, llm, ["a", "b"])
    llm.add_rule(Rule(model="b", response="SELECT count(*) FROM concert"))
    llm.set_default("SELECT count(*) FROM singer")
    with pytest.raises(psycopg.Error, match="selection_model"):
        explain(gen)


# --- hardness routing ---------------------------------------------------------------------------


def test_presql_hardness_routes_finsql_to_the_configured_models(gen, llm):
    setting(gen, "hardness_voters", '{"easy": ["small"], "extra": ["big", "other"]}')
    add_models(gen, llm, ["big", "small", "other"])
    llm.set_default("SELECT count(*) FROM singer")
    trace = explain(gen)
    assert trace["hardness"]["presql"] == "easy" and trace["hardness"]["voters"] == ["small"]
    assert [r["model"] for r in llm.requests] == ["big", "small"]
    assert [c["source"] for c in trace["candidates"]] == ["finsql:small"]
    llm.clear()
    llm.set_default(
        "SELECT name FROM singer WHERE age > 20 OR name LIKE '%a%' ORDER BY age LIMIT 3"
    )
    trace = explain(gen, "Which three youngest singers are over 20 or have an a?")
    assert trace["hardness"]["presql"] == "extra"
    assert sorted(r["model"] for r in llm.requests[1:]) == ["big", "other"]


# --- relative time ------------------------------------------------------------------------------


def test_this_month_is_rewritten_with_the_database_date(gen, llm):
    add_models(gen, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM concert")
    first, last = gen.execute(
        "SELECT date_trunc('month', now())::date::text, "
        "(date_trunc('month', now()) + interval '1 month - 1 day')::date::text"
    ).fetchone()
    trace = explain(gen, "How many concerts this month?")
    rw = trace["rewriting"]
    assert rw["rewritten"] == f"How many concerts this month (from {first} to {last})?"
    for r in llm.requests:
        assert f"this month (from {first} to {last})" in r["messages"][-1]["content"]
    setting(gen, "rewrite_time", "off")
    llm.clear()
    llm.set_default("SELECT count(*) FROM concert")
    trace = explain(gen, "How many concerts this month?")
    assert "rewriting" not in trace and "(from" not in llm.requests[0]["messages"][-1]["content"]


# --- prompt variants, samples, dialects, cleaning -------------------------------------------------


def test_prompt_variants_and_samples_make_more_candidates(gen, llm):
    setting(gen, "prompt_variants", "2")
    setting(gen, "samples_per_model", "3")
    setting(gen, "sample_temperature", "0.7")
    add_models(gen, llm, ["m1", "m2"])
    llm.set_default("SELECT count(*) FROM singer")
    trace = explain(gen)
    fin = llm.requests[1:]
    assert len(fin) == 4 and all(r["n"] == 3 and r["temperature"] == 0.7 for r in fin)
    prompts = {r["messages"][-1]["content"] for r in fin}
    assert len(prompts) == 2  # two prompt variants, shared by both models
    assert len(trace["candidates"]) == 12
    assert trace["vote"]["groups"][0]["size"] == 12 and trace["confidence"] == 1.0


def test_sqlite_dialect_model_is_transpiled_and_cleaning_steps_are_traced(gen, llm):
    gen.execute(
        "SELECT nl2sql.add_model('lite', 'lite', base_url => %s, dialect => 'sqlite')",
        (llm.base_url,),
    )
    add_models(gen, llm, ["pg"])
    llm.add_rule(
        Rule(
            model="lite",
            response='```sql\nSELECT count(*) FROM singer WHERE country = "France";\n```',
        )
    )
    llm.add_rule(
        Rule(
            model="pg",
            response="Here you go:\nSELECT count(*) FROM singer WHERE country = 'France';",
        )
    )
    trace = explain(gen, "How many singers are from France?")
    lite, pg = cand(trace, "finsql:lite"), cand(trace, "finsql:pg")
    assert (
        lite["status"] == "ok"
        and "transpile:sqlite" in lite["cleaning"]
        and "fence" in lite["cleaning"]
    )
    assert pg["cleaning"] == ["leading_prose", "trailing_semicolon"]
    assert lite["result_hash"] == pg["result_hash"]
    import psycopg

    with pytest.raises(psycopg.Error, match="dialect must be"):
        gen.execute("SELECT nl2sql.add_model('x', 'x', dialect => 'oracle')")


def test_sqlite_dialect_answers_keep_sqlite_semantics_in_the_pipeline(gen, llm):
    """A SQLite-dialect model's answer as real models write it: a double-quoted string, LIKE
    compared case-insensitively, a bare column dependent on the grouped key through the join,
    a derived table without alias; each rule is named in the candidate's cleaning. Its result
    equals the PostgreSQL model's answer."""
    gen.execute(
        "SELECT nl2sql.add_model('lite', 'lite', base_url => %s, dialect => 'sqlite')",
        (llm.base_url,),
    )
    add_models(gen, llm, ["pg"])
    llm.add_rule(
        Rule(
            model="lite",
            response=(
                "SELECT T2.name, count(*) FROM (SELECT singer_id AS sid FROM singer_in_concert) "
                'JOIN singer AS T2 ON sid = T2.singer_id WHERE T2.country LIKE "%A%" OR T2.country = "x" '
                "GROUP BY sid"
            ),
        )
    )
    llm.add_rule(
        Rule(
            model="pg",
            response=(
                "SELECT s.name, count(*) FROM singer_in_concert AS sc JOIN singer AS s "
                "ON sc.singer_id = s.singer_id WHERE s.country ILIKE '%a%' OR s.country = 'x' "
                "GROUP BY s.singer_id, s.name"
            ),
        )
    )
    trace = explain(gen, "How many concerts per singer from a country with an a?")
    lite, pg = cand(trace, "finsql:lite"), cand(trace, "finsql:pg")
    assert pg["status"] == "ok" and pg["row_count"] > 0
    assert lite["status"] == "ok", lite
    for step in (
        "sqlite:string_literal",
        "sqlite:like_nocase",
        "sqlite:derived_alias",
        "sqlite:group_by_dependent",
    ):
        assert step in lite["cleaning"]
    assert lite["result_hash"] == pg["result_hash"]


def test_sqlite_bare_column_not_dependent_on_the_key_is_refused_with_the_reason(gen, llm):
    gen.execute(
        "SELECT nl2sql.add_model('lite', 'lite', base_url => %s, dialect => 'sqlite')",
        (llm.base_url,),
    )
    llm.add_rule(Rule(model="lite", response="SELECT name, max(age) FROM singer GROUP BY country"))
    trace = explain(gen, "Who is the oldest singer per country?")
    lite = cand(trace, "finsql:lite")
    assert lite["status"] == "refused" and "not functionally dependent" in lite["reason"]
    assert lite["cleaning"][-1] == "refused"


def test_no_alignment_from_a_column_the_caller_may_not_read(gen, llm):
    add_models(gen, llm, ["m1"])
    llm.set_default("SELECT count(*) FROM singer WHERE country = 'france'")
    gen.execute("DROP ROLE IF EXISTS nl2sql_t_noalign")
    gen.execute("CREATE ROLE nl2sql_t_noalign")
    try:
        # the extension's own grants to PUBLIC are all it has on nl2sql; on singer, no country
        gen.execute("GRANT SELECT (singer_id, name) ON singer TO nl2sql_t_noalign")
        gen.execute("SET ROLE nl2sql_t_noalign")
        try:
            trace = explain(gen, "How many singers are from france?")
        finally:
            gen.execute("RESET ROLE")
        c = cand(trace, "finsql:m1")
        assert c["alignments"] == [] and "'france'" in (c["sql"] or "")
        assert c["status"] == "error" and "permission denied" in c["reason"]
    finally:
        gen.execute("RESET ROLE")
        gen.execute("DROP OWNED BY nl2sql_t_noalign")
        gen.execute("DROP ROLE nl2sql_t_noalign")
