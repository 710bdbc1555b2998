"""Repair rounds' feedback and prompts."""

from __future__ import annotations

import pytest

from conftest import candidate as _c
from nl2sql.core.types import Candidate, Column, ForeignKey, Schema, Status, Table
from nl2sql.generation.repair import feedback, repair_prompt, snap_failed
from nl2sql.linking.names import schema_hints
from nl2sql.model.gate import open_gate


def test_repair_feedback_and_prompt_keep_the_question_last():
    assert feedback(_c("a", "h", 1, rows=0)).endswith("(empty result)")
    assert feedback(_c("a", "h", 1, rows=4)) is None
    err = _c("a", None, 1, "error")
    err.reason = 'column "nme" does not exist'
    assert "nme" in feedback(err)
    noans = _c("a", None, 1, "refused")
    noans.reason = "no answer: timeout"
    assert feedback(noans) is None
    p = repair_prompt(
        "schema...\n\n/* Answer the following: How many? */",
        open_gate().sql("repair", "SELECT nme FROM t"),
        feedback(err),
        ["singer.country: 'France'"],
        2,
        3,
    )
    assert "Repair round 2 of 3" in p and "SELECT nme FROM t;" in p
    assert "singer.country: 'France'" in p
    assert p.rstrip().endswith("How many? */")


HINT_SCHEMA = Schema(
    [
        Table("semesters", "public", "semesters", [Column("semester_id", "integer")]),
        Table("battle", "public", "battle", [Column("id", "integer"), Column("name", "text")]),
        Table(
            "ship",
            "public",
            "ship",
            [Column("id", "integer"), Column("lost_in_battle", "integer"), Column("name", "text")],
        ),
    ]
)


@pytest.mark.parametrize(
    "sql, hints",
    [
        # a misspelt table: the nearest real one, with its columns
        (
            "SELECT count(*) FROM semester",
            ["there is no table semester; the nearest: semesters(semester_id)"],
        ),
        # an invented column: the nearest of the query's tables
        (
            "SELECT battle_id FROM battle",
            ["no table of the query has a column battle_id; the nearest: battle.id, battle.name"],
        ),
        # a column of another table: that table named, to join
        (
            "SELECT lost_in_battle FROM battle",
            [
                "no table of the query has a column lost_in_battle; "
                "lost_in_battle is a column of ship (join it)"
            ],
        ),
        # every name real; output aliases and CTEs are names too
        ("SELECT name AS n, count(*) AS c FROM battle GROUP BY n ORDER BY c", []),
        ("WITH x AS (SELECT id FROM ship) SELECT count(*) FROM x", []),
        # an unknown table that is near nothing: said, with no nearest
        ("SELECT 1 FROM zzqqxx", ["there is no table zzqqxx"]),
        # not SQL: no hint
        ("this is not a query", []),
        (None, []),
    ],
)
def test_schema_hints_name_what_does_not_exist_and_the_nearest_real_names(sql, hints):
    assert schema_hints(sql, HINT_SCHEMA) == hints


def test_the_repair_prompt_carries_the_hints_before_the_question():
    p = repair_prompt(
        "schema...\n\n/* Answer the following: How many? */",
        open_gate().sql("repair", "SELECT count(*) FROM semester"),
        "the query was refused: unknown relation(s): semester",
        [],
        1,
        3,
        schema_hints("SELECT count(*) FROM semester", HINT_SCHEMA),
    )
    assert "/* Names: there is no table semester; the nearest: semesters(semester_id) */" in p
    assert p.rstrip().endswith("How many? */")


def test_a_self_compared_join_that_ran_is_sent_to_repair():
    c = _c("a", "h", 1, rows=12)
    c.sql = "SELECT t2.name FROM owners AS t1 JOIN dogs AS t2 ON t1.owner_id = t1.owner_id"
    said = feedback(c)
    assert "t1.owner_id = t1.owner_id compares a column with itself" in said
    c.sql = "SELECT t2.name FROM owners AS t1 JOIN dogs AS t2 ON t1.owner_id = t2.owner_id"
    assert feedback(c) is None


def test_an_output_named_twice_that_ran_is_sent_to_repair():
    c = Candidate(source="finsql:m", model="m", raw_text="x")
    c.status, c.row_count = Status.OK, 12
    c.sql = "SELECT conductor.name, conductor.name FROM conductor JOIN orchestra USING (cid)"
    assert "names conductor.name twice" in feedback(c)
    c.sql = "SELECT conductor.name, orchestra.orchestra FROM conductor JOIN orchestra USING (cid)"
    assert feedback(c) is None


def _table(name: str, columns: list[str], key: str | None = None):
    return Table(name, "public", name, [Column(c, "text", c == key) for c in columns])


LINK_SCHEMA = Schema(
    tables=[
        _table("countries", ["countryid", "countryname", "continent"], "countryid"),
        _table("car_makers", ["id", "maker", "country"], "id"),
    ],
    foreign_keys=[ForeignKey("car_makers", ["country"], "countries", ["countryid"])],
)


def test_a_candidate_related_off_the_key_goes_to_repair_saying_names_only():
    sql = (
        "SELECT countryname FROM countries WHERE countryname <> 'Secret' "
        "AND countryid IN (SELECT id FROM car_makers)"
    )
    c = Candidate(source="finsql:m", model="m", raw_text=sql)
    c.sql, c.status, c.row_count = sql, Status.OK, 4

    class Ev:
        schema = LINK_SCHEMA
        question = "Which countries have a car maker?"

    said = feedback(c, None, Ev())
    assert "car_makers.country refers to countries.countryid" in said
    assert "Secret" not in said
    assert feedback(c, None, None) is None  # without the schema, the text shows nothing


class _Ev:
    """An evaluator without a database: every attempt runs, with rows unless it still compares
    a subquery with ``=``; the schema, question and rules skipped as the real one carries them."""

    def __init__(self, schema=None, question=None, rules_off=frozenset()):
        self.schema, self.question, self.rules_off = schema, question, rules_off
        self.dialects, self.ran = {}, []

    def run(self, c, text):
        self.ran.append(text)
        c.sql, c.status, c.row_count = text, Status.OK, 1
        if "= (SELECT" in text:
            c.status, c.row_count, c.sqlstate = Status.ERROR, None, "21000"


def test_round_0_records_the_rule_that_rewrote_and_the_one_that_found():
    sql = "SELECT a FROM t WHERE b = (SELECT b FROM u)"
    c = Candidate(source="finsql:m", model="m", raw_text=sql, sql=sql, status=Status.ERROR)
    c.reason, c.sqlstate = "more than one row returned by a subquery", "21000"
    assert snap_failed(c, _Ev(Schema([])), open_gate())
    entry = c.repairs[0]
    assert (entry["round"], entry["rule"], entry["problem_rule"]) == (0, "fix_by_sqlstate", None)
    assert entry["snapped"] == ["= (subquery) → IN"] and c.sql.endswith("IN (SELECT b FROM u)")
    # the rule skipped (setting rules_off): nothing to rewrite
    c = Candidate(source="finsql:m", model="m", raw_text=sql, sql=sql, status=Status.ERROR)
    c.reason, c.sqlstate = "more than one row", "21000"
    ev = _Ev(Schema([]), rules_off=frozenset({"fix_by_sqlstate"}))
    assert not snap_failed(c, ev, open_gate()) and not c.repairs and not ev.ran


def test_a_finding_names_its_rule_beside_the_rewrite_that_mends_it():
    sql = "SELECT s.name FROM stadium AS s JOIN concert AS c ON s.id = c.sid WHERE c.year IN (2014, 2015)"
    c = Candidate(source="finsql:m", model="m", raw_text=sql, sql=sql, status=Status.OK)
    c.row_count = 3
    ev = _Ev(Schema([]), "Which stadiums had concerts in both 2014 and 2015?")
    assert "both of two values" in feedback(c, None, ev)
    assert snap_failed(c, ev, open_gate())  # the INTERSECT is final once it runs
    entry = c.repairs[0]
    assert (entry["rule"], entry["problem_rule"]) == ("split_both", "split_both_said")
    assert "INTERSECT" in c.sql
    # ablated: its sentence too is the rule's to skip, so nothing is found
    ev = _Ev(Schema([]), ev.question, frozenset({"split_both", "split_both_said"}))
    c2 = Candidate(source="finsql:m", model="m", raw_text=sql, sql=sql, status=Status.OK)
    c2.row_count = 3
    assert feedback(c2, None, ev) is None and not snap_failed(c2, ev, open_gate())
