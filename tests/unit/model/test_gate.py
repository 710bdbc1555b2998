"""The gate every text bound for a model passes (gate.py), without a server: value rules on
error messages, result rows, retrieved values and examples; ``values_withheld``."""

from __future__ import annotations

import json

import pytest
from sqlglot import exp

from adversarial_corpus import LITERAL_FORMS
from nl2sql.core import sqlcheck
from nl2sql.core.errors import CandidateRefused
from nl2sql.core.sqlcheck import constant_values, literal_value, parse_one, without_constants
from nl2sql.core.types import Column, Example, Schema, Table, Turn
from nl2sql.curated.narrate import NarrateRows, narrate_prompt
from nl2sql.curated.verified import VerifiedRow, as_examples
from nl2sql.model.gate import VERIFIED_DB, WITHHELD, Gate
from nl2sql.model.masking import mask_question

MARK = "MARKER-5f3a"


def _schema(opt_out: bool = True) -> Schema:
    venue = Table(
        "venue",
        "public",
        "venue",
        [
            Column("venue_id", "integer", True, sample_values=["1", "2"]),
            Column("venue_name", "text", sample_values=["Main Hall"]),
            Column(
                "secret_code",
                "text",
                sample_values=[MARK] if not opt_out else [],
                values_allowed=not opt_out,
            ),
        ],
    )
    singer = Table(
        "singer",
        "public",
        "singer",
        [Column("singer_id", "integer", True), Column("name", "text", sample_values=["Ann"])],
    )
    return Schema([venue, singer])


def test_nothing_withheld_passes_everything_unchanged():
    g = Gate(_schema(opt_out=False), True)
    assert not g.withholding
    err = f'invalid input syntax for type integer: "{MARK}"'
    assert g.error("repair", err, "SELECT 1") == err
    rows = [json.dumps({"secret_code": MARK})]
    assert g.rows("multiple_choice", "SELECT secret_code FROM venue", rows) == (rows, None)
    assert g.report()["held"] == {}


def test_error_details_lose_quoted_data_but_keep_names_and_the_models_own_words():
    g = Gate(_schema(), True)
    sql = "SELECT venue_name::int FROM venue WHERE venue_name = 'Side'"
    cases = [
        (f'invalid input syntax for type integer: "{MARK}"', True),
        (f"invalid input value for enum mood: '{MARK}'", True),
        (
            f'duplicate key value violates unique constraint "venue_pkey"\nDETAIL: Key (venue_id)=({MARK}) already exists.',
            True,
        ),
        (f'value "{MARK}" is out of range for type integer', True),
        ('column "nmae" does not exist', False),  # the model's own word
        ('relation "venue" does not exist', False),  # a schema name
        ('invalid input syntax for type integer: "Side"', False),  # the model's own literal
        (f'invalid input syntax for type integer: "a"{MARK}"', True),  # a quote inside the value
        (f'invalid input syntax for type integer: "{MARK}\nsecond line"', True),  # a newline
        (f"invalid input syntax for type integer: 'it''s {MARK}'", True),
        (f'invalid value "{MARK[:4]}" for "YYYY"', True),  # part of the value
        ("the plan doesn't fit: estimated cost 9e9 (max_plan_cost)", False),  # an apostrophe
        (f"it can't read '{MARK}' here", True),  # an apostrophe, then a quoted value
    ]
    for text, withheld in cases:
        out = g.error("repair", text, sql + " nmae")
        assert MARK not in out and "DETAIL" not in out, out
        assert (WITHHELD in out) == withheld, out
    assert g.error("repair", f"boom {MARK}", sql, "P0001").count(MARK) == 0
    held = g.report()["held"]["repair"]
    assert held["quoted values in errors"] == 10 and held["error detail lines"] == 2


def test_send_values_off_sends_no_rows_only_the_shape():
    g = Gate(_schema(opt_out=False), False)
    rows = [json.dumps({"venue_name": MARK, "n": 1})] * 3
    kept, note = g.rows("multiple_choice", "SELECT venue_name, 1 AS n FROM venue", rows)
    assert kept == [] and note.startswith("2 columns") and MARK not in note
    assert g.report()["held"]["multiple_choice"]["rows"] == 3
    assert g.report()["columns"] == [
        "public.singer.name",
        "public.singer.singer_id",
        "public.venue.secret_code",
        "public.venue.venue_id",
        "public.venue.venue_name",
    ]


def test_rows_lose_opted_out_columns_spelled_every_way():
    g = Gate(_schema(), True)
    row = lambda **kw: [json.dumps(kw)]  # noqa: E731
    keep = g.rows(
        "mc",
        "SELECT venue_name, secret_code FROM venue",
        row(venue_name="Main Hall", secret_code=MARK),
    )
    assert keep == (['{"venue_name": "Main Hall"}'], "1 column(s) withheld: secret_code")
    for sql, r in [
        ("SELECT v.secret_code AS c FROM venue v", row(c=MARK)),
        ("SELECT upper(secret_code) FROM venue", row(upper=MARK)),
        ("SELECT max(v.secret_code) || '' AS m FROM venue AS v", row(m=MARK)),
        ("SELECT * FROM venue", row(venue_id=1, venue_name="x", secret_code=MARK)),
        ("SELECT v.* FROM venue v", row(venue_id=1, venue_name="x", secret_code=MARK)),
        ("SELECT v FROM venue v", row(v={"secret_code": MARK})),
        ("WITH x AS (SELECT secret_code AS a FROM venue) SELECT a FROM x", row(a=MARK)),
        ("SELECT a FROM (SELECT secret_code AS a FROM venue) s", row(a=MARK)),
        ("SELECT secret_code FROM venue UNION SELECT name FROM singer", row(secret_code=MARK)),
        ("SELECT (SELECT secret_code FROM venue LIMIT 1) AS s, 1 AS one", row(s=MARK, one=1)),
    ]:
        kept, _ = g.rows("mc", sql, r)
        assert MARK not in "".join(kept), sql
    # a query reading no withheld column keeps its rows
    assert g.rows("mc", "SELECT name FROM singer", row(name="Ann"))[0] == row(name="Ann")


def test_values_and_examples_of_withheld_columns_are_held_back():
    g = Gate(_schema(), True)
    vals = [("venue", "secret_code", MARK), ("venue", "venue_name", "Main Hall")]
    assert g.values("presql", vals) == [("venue", "venue_name", "Main Hall")]
    assert Gate(_schema(), False).values("presql", vals) == []
    local = Example(
        1,
        "local",
        f"Which venue has code {MARK}?",
        f"SELECT venue_name FROM venue WHERE secret_code = '{MARK}'",
        masked_question="Which venue has code [V]?",
    )
    other = Example(2, "concert_singer", "How many singers?", "SELECT count(*) FROM singer")
    plain = Example(
        3, "local", "Names of venues?", "SELECT venue_name FROM venue WHERE venue_id = 1"
    )
    out = g.examples("finsql", [local, other, plain])
    assert MARK not in out[0].question + out[0].sql and "'value'" in out[0].sql
    assert out[1] == other and out[2] == plain  # shown as written
    off = Gate(_schema(), False).examples("finsql", [plain])
    assert "1" not in off[0].sql.replace("venue_id", "")


def test_withheld_sample_values_are_cleared_even_if_a_view_returned_them():
    s = _schema(opt_out=False)
    s.tables[0].columns[2].values_allowed = False  # as if the view had not blanked them
    g = Gate(s, True)
    assert s.tables[0].columns[2].sample_values == []
    assert g.report()["held"]["samples"]["sample values"] == 1


def test_verified_queries_shown_as_examples_are_masked_like_this_databases_examples():
    """Issue 24 finding 1: a verified query's literal of a withheld column never reaches a
    prompt as an example; with ``send_values = off`` no verified query keeps a literal."""
    row = VerifiedRow(
        id=7,
        kind="query",
        question=f"Which venue has code {MARK}?",
        sql=f"SELECT venue_name FROM venue WHERE secret_code = '{MARK}'",
        template_sql="",
        slots=[],
        info={},
        masked_question="Which venue has code [V]?",
        similarity=0.9,
    )
    plain = VerifiedRow(
        id=8,
        kind="query",
        question="Venue 42?",
        sql="SELECT venue_name FROM venue WHERE venue_name = 'Hall 42'",
        template_sql="",
        slots=[],
        info={},
        masked_question="Venue [V]?",
        similarity=0.8,
    )
    examples = as_examples([row, plain], 5)
    assert {e.db_id for e in examples} == {VERIFIED_DB}
    on = Gate(_schema(), True).examples("presql", examples)
    assert MARK not in on[0].question + on[0].sql and "'value'" in on[0].sql
    assert on[1] == examples[1]  # reads no withheld column: shown as written
    off = Gate(_schema(opt_out=False), False)
    shown = off.examples("finsql", examples)
    assert all(MARK not in e.question + e.sql and "42" not in e.sql for e in shown)
    assert off.report()["held"]["finsql"]["examples masked"] == 2


def test_the_sql_path_replaces_literals_only_when_a_withheld_column_is_read():
    """``Gate.sql``, the path narrate's and mining's SQL take (issue 24 finding 2)."""
    g = Gate(_schema(), True)
    secret = f"SELECT count(*) FROM venue WHERE secret_code = '{MARK}' AND venue_id > 3"
    out = g.sql("narrate", secret)
    assert MARK not in out and "'value'" in out and "> 0" in out
    plain = "SELECT venue_name FROM venue WHERE venue_name = 'Main Hall'"
    assert g.sql("narrate", plain) == plain
    assert "Main Hall" not in Gate(_schema(opt_out=False), False).sql("narrate", plain)
    assert g.sql("narrate", "not sql at all ((") == "SELECT ..."
    assert g.report()["held"]["narrate"]["literals of SQL"] == 2


def test_narrates_prompt_shows_the_chosen_sql_through_the_gate():
    """Issue 24 finding 2: the SQL beside narrate's rows passes ``Gate.sql``."""
    g = Gate(_schema(), True)
    sql = f"SELECT venue_name FROM venue WHERE secret_code = '{MARK}'"
    rows, note = g.rows("narrate", sql, [json.dumps({"venue_name": "Main Hall"})])
    prompt = narrate_prompt("Which venue?", sql, NarrateRows(g, rows, note), False)
    assert MARK not in prompt and "secret_code = 'value'" in prompt and "Main Hall" in prompt
    open_sql = "SELECT venue_name FROM venue WHERE venue_name = 'Main Hall'"
    plain = narrate_prompt("Which venue?", open_sql, NarrateRows(g, [], None), False)
    assert open_sql in plain


# --- every spelling of a constant (issue 31 §4) ------------------------------------------------

FORM_IDS = [f[0] for f in LITERAL_FORMS]


def _form_sql(where: str) -> str:
    return f"SELECT venue_name FROM venue WHERE {where}"


@pytest.mark.parametrize("cid, where, mark, node", LITERAL_FORMS, ids=FORM_IDS)
def test_sqlglot_reads_each_literal_form_as_the_gate_expects(cid, where, mark, node):
    """The node sqlglot's postgres dialect makes of each form is one the gate replaces, or the
    text does not parse (then it is withheld whole): a sqlglot that reads a form otherwise
    fails here first."""
    if node is None:
        with pytest.raises(CandidateRefused):
            parse_one(_form_sql(where))
        return
    tree = parse_one(_form_sql(where))
    assert node in {type(n).__name__ for n in tree.walk()}
    assert without_constants(tree, _form_sql(where)) is not None


@pytest.mark.parametrize("send_values", [True, False])
@pytest.mark.parametrize("cid, where, mark, node", LITERAL_FORMS, ids=FORM_IDS)
def test_every_literal_form_is_withheld_by_every_sql_path_of_the_gate(
    cid, where, mark, node, send_values
):
    """``Gate.sql`` (narrate, repair, multiple choice, mining, explain_sql), ``Gate.turns``,
    ``Gate.examples`` (this database's and verified queries: SQL and question) and
    ``Gate.expression`` (terms, the semantic model): the marker of no form is shown, with a column
    opted out and with ``send_values`` off."""
    g = Gate(_schema(opt_out=send_values), send_values)
    sql = _form_sql(where)
    try:  # a verified question or an older row's masked question may hold the value itself
        said = constant_values(parse_one(sql))[0]
    except CandidateRefused:
        said = mark
    masked = mask_question(f"Which venue has code {said}?")  # digits masked, words kept
    examples = [
        Example(i, db, f"Which venue has code {said}?", sql, masked_question=masked)
        for i, db in ((1, "local"), (2, VERIFIED_DB))
    ]
    shown = {
        "sql": g.sql("narrate", sql),
        "turn": g.turns("presql", (Turn(1, "Which venue?", sql),))[0].sql,
        "expression": g.expression("presql", where),
    }
    for e in g.examples("finsql", examples):
        shown[f"{e.db_id} example"] = e.sql
        shown[f"{e.db_id} question"] = e.question
        assert e.question == "(question withheld)" or said.isdigit(), e.question
        assert e.question in ("(question withheld)", masked), e.question
    for path, text in shown.items():
        assert mark.lower() not in text.lower(), (path, text)
    for path in ("sql", "turn", "local example", "verified example"):
        assert "'value'" in shown[path] or (node is None and shown[path] == "SELECT ..."), shown
    assert "'value'" in shown["expression"] or node is None, shown


def test_a_constant_left_over_after_replacing_withholds_the_text_whole(monkeypatch):
    """The check after the replacement: a form the replacement missed (sqlglot reading it as a
    node of a kind the gate does not know), or words of a constant sqlglot moved out of it, fail
    closed."""
    g = Gate(_schema(), True)
    keep = sqlcheck._blank
    for skipped, where in [
        (exp.ByteString, "secret_code = E'LEFTOVER-1'"),
        (exp.RawString, "secret_code = $$LEFTOVER-2$$"),
        (exp.Interval, "secret_code::interval > INTERVAL '5 LEFTOVER'"),
        (exp.JSONPath, "secret_code::jsonb ->> 'LEFTOVER-3' IS NULL"),
    ]:
        monkeypatch.setattr(
            sqlcheck, "_blank", lambda n, s=skipped: n if isinstance(n, s) else keep(n)
        )
        assert g.sql("narrate", _form_sql(where)) == "SELECT ...", where
        assert g.expression("presql", where) == "(expression withheld)", where
    monkeypatch.setattr(sqlcheck, "_blank", keep)
    assert "'value'" in g.sql("narrate", _form_sql("secret_code = E'LEFTOVER-1'"))


def test_comments_are_dropped_when_literals_are_replaced():
    g = Gate(_schema(), True)
    sql = "SELECT venue_name /* code 'CMT-1' */ FROM venue WHERE secret_code = 'x' -- CMT-2\n"
    out = g.sql("narrate", sql)
    assert "CMT" not in out and "'value'" in out
    assert "CMT" not in g.expression("presql", "secret_code = 'x' /* CMT-3 */")


def test_unicode_escapes_are_decoded_for_masking():
    for sql, value in [
        ("SELECT U&'d\\0061t\\+000061'", "data"),
        ("SELECT U&'d!0061t!!' UESCAPE '!'", "dat!"),
        ("SELECT U&'bad\\zz'", "bad\\zz"),  # malformed: the text as written
        ("SELECT E'a\\'b'", "a'b"),
        ("SELECT $q$x'y$q$", "x'y"),
    ]:
        assert literal_value(parse_one(sql).expressions[0]) == value, sql
