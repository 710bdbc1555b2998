"""The judge after the vote (``selection = judge``) inside a real PostgreSQL, with a scripted
loopback judge: when it is asked, how its verdicts in both orders decide, that any unusable
reply keeps the vote, and that the gate keeps a withheld column's values out of its prompts.

Every model answer here is scripted (tests/conftest.py), not a model's: these tests check the
mechanics, never whether a judge picks the right answer.
"""

from __future__ import annotations

import json

import pytest

from conftest import add_models
from nl2sql_indexer.dev.loopback import Rule

KEYS = ["selection", "selection_model", "tie_break", "repair_rounds", "send_values"]
Q = "How many singers do we have?"
TOP = "SELECT count(*) FROM singer"  # model a's answer: the top group (priority breaks the tie)
SECOND = "SELECT count(*) FROM concert"  # model b's answer
MARK = "-- Candidate A"  # in every judge prompt, in no other


@pytest.fixture
def jdb(db):
    """The demo connection with the judge on (the first model judges), ties to priority, no
    repair, PreSQL not voting; the settings reset afterwards."""
    for k, v in [
        ("presql_votes", "off"),
        ("selection", "judge"),
        ("tie_break", "priority"),
        ("repair_rounds", "0"),
    ]:
        db.execute("SELECT nl2sql.set_setting(%s, %s)", (k, v))
    yield db
    for k in KEYS:
        db.execute("SELECT nl2sql.reset_setting(%s)", (k,))


def _script(llm, judge_rules, answers=(TOP, SECOND)):
    """Models a, b, … answering ``answers`` (a writes the PreSQL and judges); the judge's
    rules first (they match only judge prompts)."""
    names = [chr(ord("a") + i) for i in range(len(answers))]
    for r in judge_rules:
        llm.add_rule(r)
    for n, sql in zip(names, answers):
        llm.add_rule(Rule(model=n, response=sql))
    return names


def _explain(conn, q=Q):
    return conn.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]


def _judge_prompts(llm) -> list[str]:
    return [
        m["content"]
        for r in llm.requests
        for m in r["messages"]
        if m["role"] == "user" and MARK in m["content"]
    ]


def _prefers(sql_fragment: str) -> list[Rule]:
    """A judge that names the candidate whose SQL holds ``sql_fragment``, in either order."""
    return [
        Rule(model="a", contains=f"{MARK} (1 rows)\n{sql_fragment}", response="<result>A</result>"),
        Rule(model="a", contains=MARK, response="Thinking it over.\n<result>B</result>"),
    ]


def test_judge_is_skipped_when_the_top_group_holds_sixty_percent(jdb, llm):
    add_models(jdb, llm, _script(llm, _prefers("SELECT COUNT(*) FROM concert"), (TOP, TOP, SECOND)))
    trace = _explain(jdb)
    j = trace["judge"]
    assert j["skipped"].startswith("the top group holds 0.67") and j["top_share"] == 0.6667
    assert _judge_prompts(llm) == [] and j["verdicts"] == {}
    assert "singer" in trace["sql"] and trace["vote"]["method"] == "majority"


def test_judge_that_prefers_the_second_group_in_both_orders_picks_it(jdb, llm):
    add_models(jdb, llm, _script(llm, _prefers("SELECT COUNT(*) FROM concert")))
    trace = _explain(jdb)
    j = trace["judge"]
    assert j["skipped"] is None and j["top_share"] == 0.5
    assert j["verdicts"] == {"AB": ["B", "B"], "BA": ["A", "A"]}
    assert j["wins"] == [0.0, 1.0] and j["winner"] == "second"
    assert "concert" in trace["sql"] and trace["vote"]["method"] == "judge"
    assert trace["vote"]["groups"][0]["sql"] == trace["sql"]
    assert "judge a (AB: B/B, BA: A/A): the second group wins" in trace["vote"]["reason"]
    # both orders were asked, the vote's top group first in AB, second first in BA
    ab, ba = j["prompts"]["AB"], j["prompts"]["BA"]
    assert ab.index("FROM singer") < ab.index("FROM concert")
    assert ba.index("FROM concert") < ba.index("FROM singer")
    assert sorted(_judge_prompts(llm)) == sorted([ab, ba])
    # its calls count in the call's tokens (two judge requests beyond PreSQL and FinSQL)
    by_model = trace["tokens"]["by_model"]["a"]
    assert by_model["calls"] == 4


@pytest.mark.parametrize(
    "rules, verdicts, why",
    [
        # always the first shown: the orders disagree, a tie
        (
            [Rule(model="a", contains=MARK, response="<result>A</result>")],
            {"AB": ["A", "A"], "BA": ["A", "A"]},
            "the vote's choice stands",
        ),
        (
            [Rule(model="a", contains=MARK, response="<result>TIE</result>")],
            {"AB": ["TIE", "TIE"], "BA": ["TIE", "TIE"]},
            "the vote's choice stands",
        ),
        (
            [Rule(model="a", contains=MARK, response="Both look plausible; hard to say.")],
            {"AB": [None, None], "BA": [None, None]},
            "no usable verdict in order AB/BA",
        ),
        (
            [Rule(model="a", contains=MARK, response="")],
            {"AB": [], "BA": []},
            "no usable verdict in order AB/BA",
        ),
        (
            [Rule(model="a", contains=MARK, status=400, response="content policy refusal")],
            {"AB": [], "BA": []},
            "no usable verdict in order AB/BA",
        ),
    ],
    ids=["order-inconsistent", "tie", "garbage", "empty", "refusal"],
)
def test_judge_replies_that_decide_nothing_keep_the_vote(jdb, llm, rules, verdicts, why):
    add_models(jdb, llm, _script(llm, rules))
    trace = _explain(jdb)
    j = trace["judge"]
    assert j["skipped"] is None and j["verdicts"] == verdicts
    assert j["winner"] == "vote" and why in j["why"]
    assert "singer" in trace["sql"] and trace.get("error") is None
    assert trace["vote"]["method"].endswith("(judge kept the vote)")
    if rules[0].status != 200:
        assert set(j["errors"]) == {"AB", "BA"} and "400" in json.dumps(j["errors"])


def test_judge_prompt_passes_the_gate_withheld_columns_and_send_values(jdb, llm):
    young = "SELECT name, age FROM singer WHERE age < 40"
    old = "SELECT name, age FROM singer WHERE age >= 40"
    names = [r[0] for r in jdb.execute("SELECT name FROM singer").fetchall()]
    ages = [str(r[0]) for r in jdb.execute("SELECT age FROM singer").fetchall()]
    judge = [Rule(model="a", contains=MARK, response="<result>TIE</result>")]

    def sent() -> str:
        asked = _judge_prompts(llm)
        assert len(asked) == 2
        return "\n".join(asked)

    add_models(jdb, llm, _script(llm, judge, (young, old)))
    _explain(jdb)
    text = sent()  # the positive control: allowed values do reach the judge
    assert any(n in text for n in names) and "--   row:" in text
    jdb.execute("SELECT nl2sql.set_value_policy('singer', false, 'name')")
    try:
        llm.clear()
        _script(llm, judge, (young, old))
        trace = _explain(jdb)
        text = sent()
        assert not any(n in text for n in names), "a withheld column's value reached the judge"
        assert "1 column(s) withheld: name" in text and any(f'"age": {a}' in text for a in ages)
        assert trace["values_withheld"]["held"]["judge"]["columns of rows"] >= 1
        jdb.execute("SELECT nl2sql.set_setting('send_values', 'off')")
        llm.clear()
        _script(llm, judge, (young, old))
        _explain(jdb)
        text = sent()
        assert "--   row:" not in text and "rows withheld (cell values are not sent)" in text
        assert "40" not in text  # the SQL's literals are masked as well
    finally:
        jdb.execute("DELETE FROM nl2sql.value_policy WHERE table_name = 'singer'")
        jdb.execute("SELECT nl2sql.reset_setting('send_values')")
        jdb.execute("SELECT nl2sql.reindex(force => true)")


def test_a_judge_that_never_answers_times_out_and_keeps_the_vote(jdb, llm):
    hang = [Rule(model="a", contains=MARK, hang=True)]
    add_models(jdb, llm, _script(llm, hang), timeout_s=2)
    trace = _explain(jdb)
    j = trace["judge"]
    assert j["skipped"] is None and set(j["errors"]) == {"AB", "BA"}
    assert j["verdicts"] == {"AB": [], "BA": []} and j["winner"] == "vote"
    assert "singer" in trace["sql"] and trace.get("error") is None
