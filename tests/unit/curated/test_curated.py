"""Curated knowledge without a database: the rules that keep the fast path (verified queries
and templates) from answering a different question, and binding a template's parameters.
tests/db/test_curated.py runs the SQL functions and the fast path inside PostgreSQL."""

from __future__ import annotations

from nl2sql.core.types import Column, Schema, Table
from nl2sql.curated._parameters import Slot
from nl2sql.curated._question_words import (
    meaning_words,
    name_words,
    question_numbers,
    strong_values,
)
from nl2sql.curated.fast_path import bind, same_meaning
from nl2sql.curated.verified import VerifiedRow
from nl2sql.retrieval.values import ValueMatch

SCHEMA = Schema(
    tables=[
        Table(
            "singer",
            "public",
            "singer",
            [
                Column("singer_id", "integer"),
                Column("name", "text"),
                Column("country", "text"),
                Column("age", "integer"),
            ],
        ),
        Table(
            "stadium",
            "public",
            "stadium",
            [Column("name", "text"), Column("location", "text"), Column("capacity", "integer")],
        ),
    ]
)


def _value(phrase, value, column="country", table="singer", how="exact", score=1.0):
    return ValueMatch("public", table, column, value, score, how, phrase, "question")


def _row(question, slots, info, template_sql, kind="query"):
    return VerifiedRow(1, kind, question, "", template_sql, slots, info, "", 0.99)


def test_meaning_words_and_schema_words_tell_questions_apart():
    assert meaning_words("Which singers are older than 40?") != meaning_words(
        "Which singers are younger than 40?"
    )
    assert meaning_words("Which singers aren't from France?") == {"not"}
    assert (
        meaning_words("How many singers come from Japan?")
        == meaning_words("How many singers are from France?")
        == set()
    )
    assert name_words("How many singers do we have?", SCHEMA, []) == {"singer"}
    assert name_words("How many stadiums from France?", SCHEMA, ["France"]) == {"stadium"}
    row = _row("How many singers are from France?", [], {"value_phrases": ["France"]}, "")
    assert same_meaning(row, "How many singers come from Japan?", SCHEMA, ["Japan"], [], []) is None
    assert "schema words" in same_meaning(
        row, "How many stadiums come from Japan?", SCHEMA, ["Japan"], [], []
    )
    assert "not" in same_meaning(
        row, "How many singers are not from Japan?", SCHEMA, ["Japan"], [], []
    )


def test_binding_fills_parameters_in_question_order_and_refuses_leftovers():
    slots = [
        Slot("a", "value", ["public", "singer", "country"], "text"),
        Slot("b", "value", ["public", "singer", "country"], "text"),
        Slot("n", "number", ["public", "singer", "age"], "integer"),
    ]
    row = _row(
        "Singers from :a or :b older than :n",
        slots,
        {"numbers": [":n"]},
        "SELECT name FROM singer WHERE country IN (:a, :b) AND age > :n",
        "template",
    )
    q = "Singers from Spain or Japan older than 25"
    strong = strong_values([_value("Japan", "Japan"), _value("Spain", "Spain")], SCHEMA, 0.9)
    b = bind(row, q, strong, question_numbers(q, list(strong)))
    assert b.sql == "SELECT name FROM singer WHERE country IN ('Spain', 'Japan') AND age > 25"
    # one value short, one too many, a decimal for an integer column, no number
    assert bind(
        row,
        "Singers from Spain older than 25",
        strong_values([_value("Spain", "Spain")], SCHEMA, 0.9),
        ["25"],
    ).reason.startswith("the question names 1")
    extra = strong_values(
        [
            _value("Japan", "Japan"),
            _value("Spain", "Spain"),
            _value("Riverside Arena", "Riverside Arena", "name", "stadium"),
        ],
        SCHEMA,
        0.9,
    )
    assert "Riverside Arena" in bind(row, q + " at Riverside Arena", extra, ["25"]).reason
    assert "not an integer" in bind(row, q, strong, ["25.5"]).reason
    assert "number" in bind(row, q, strong, []).reason
    # a weak (trigram) match does not bind; a literal is never text spliced into the SQL
    weak = strong_values(
        [_value("Spian", "Spain", how="trigram", score=0.5), _value("Japan", "Japan")], SCHEMA, 0.9
    )
    assert bind(row, q, weak, ["25"]).sql is None
    quote = strong_values([_value("O'Brien", "O'Brien"), _value("Spain", "Spain")], SCHEMA, 0.9)
    assert (
        "'O''Brien'" in bind(row, "Singers from O'Brien or Spain older than 25", quote, ["25"]).sql
    )


def test_a_verified_querys_constant_numbers_and_values_must_be_named_again():
    slots = [Slot("v1", "number", ["public", "singer", "age"], "integer", "40")]
    info = {"numbers": ["2", ":v1"], "constants": [[["public", "singer", "country", "France"]]]}
    row = _row(
        "Top 2 singers from France older than 40",
        slots,
        info,
        "SELECT name FROM singer WHERE country = 'France' AND age > :v1 LIMIT 2",
    )
    q = "Top 2 singers from France older than 50"
    strong = strong_values([_value("France", "France")], SCHEMA, 0.9)
    assert bind(row, q, strong, question_numbers(q, ["France"])).sql.endswith("age > 50 LIMIT 2")
    assert "writes 3 where" in bind(row, q, strong, ["3", "50"]).reason
    assert (
        "does not name 'France'"
        in bind(
            row,
            "Top 2 singers from Japan older than 50",
            strong_values([_value("Japan", "Japan")], SCHEMA, 0.9),
            ["50", "2"],
        ).reason
    )


def test_a_verified_querys_named_literals_become_typed_parameters():
    from nl2sql.core.sqlcheck import parse_one, to_sql
    from nl2sql.curated._parameters import query_slots, template_numbers

    q = "Top 5 singers from France older than 40"
    tree = parse_one(
        "SELECT name FROM singer WHERE country = 'France' AND age > 40 "
        "AND name <> 'Nobody' ORDER BY age LIMIT 5"
    )
    strong = strong_values([_value("France", "France")], SCHEMA, 0.9)
    slots, constants, numbers = query_slots(
        tree, SCHEMA, q, strong, question_numbers(q, ["France"])
    )
    by = {s.default: s for s in slots}
    assert set(by) == {"France", "40", "5"} and constants == []
    assert (by["France"].kind, by["France"].column) == ("value", ["public", "singer", "country"])
    assert (by["40"].kind, by["40"].data_type, by["5"].column) == ("number", "integer", None)
    assert numbers == [f":{by['5'].name}", f":{by['40'].name}"]
    sql = to_sql(tree)
    assert "'France'" not in sql and "'Nobody'" in sql  # a literal the question does not name stays
    row = _row(q, slots, {"numbers": numbers}, sql)
    q2 = "Top 3 singers from Japan older than 25"
    b = bind(
        row,
        q2,
        strong_values([_value("Japan", "Japan")], SCHEMA, 0.9),
        question_numbers(q2, ["Japan"]),
    )
    assert b.sql == (
        "SELECT name FROM singer WHERE country = 'Japan' AND age > 25 "
        "AND name <> 'Nobody' ORDER BY age LIMIT 3"
    )
    assert template_numbers(
        "Top :n singers older than :age born after 1990",
        [Slot("n", "number", None, "integer"), Slot("age", "number", None, "integer")],
    ) == [":n", ":age", "1990"]
