"""A verified query as a template by itself (issue 42 §4), without a database: its literals that
its question names as cell values become parameters, a new question's value of the same column
takes their place as a sqlglot literal node (never text pasted into SQL), and a question in
other words answers only when its words differ in ``LIGHT_WORDS`` alone. Table-driven: each row
is one case. tests/db/test_curated.py asks the same inside PostgreSQL with zero model requests.
"""

from __future__ import annotations

import pytest
from sqlglot import exp

from nl2sql.core.sqlcheck import parse_one, to_sql
from nl2sql.core.types import Column, Schema, Table
from nl2sql.curated._parameters import query_slots
from nl2sql.curated._question_words import question_numbers, strong_values
from nl2sql.curated.fast_path import bind, same_meaning, same_other_words
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
COUNT_FRANCE = "SELECT count(*) FROM singer WHERE country = 'France'"
LIVE_FRANCE = "How many singers live in France?"
HOSTILE = "x'); DROP TABLE singer; --"


def _matches(pairs: list[tuple[str, str, str]]) -> dict[str, list]:
    """``(phrase, cell value, table.column)`` -> the strong values a question names."""
    found = []
    for phrase, value, where in pairs:
        table, column = where.split(".")
        found.append(ValueMatch("public", table, column, value, 1.0, "exact", phrase, "question"))
    return strong_values(found, SCHEMA, 0.9)


def _verified(question: str, sql: str, named: list[tuple[str, str, str]]) -> VerifiedRow:
    """The verified query as ``add_verified`` stores it (``query_slots`` on the parsed SQL)."""
    strong = _matches(named)
    tree = parse_one(sql)
    numbers = question_numbers(question, list(strong))
    slots, constants, numbers = query_slots(tree, SCHEMA, question, strong, numbers)
    info = {"value_phrases": list(strong), "constants": constants, "numbers": numbers}
    return VerifiedRow(1, "query", question, sql, to_sql(tree), slots, info, "", 0.85)


# (verified question, its SQL, the values it names, the new question, the values it names,
#  the bound SQL, or None and a part of the reason it does not bind)
SUBSTITUTION = [
    (
        LIVE_FRANCE,
        COUNT_FRANCE,
        [("France", "France", "singer.country")],
        "How many singers are there in Japan?",
        [("Japan", "Japan", "singer.country")],
        "SELECT COUNT(*) FROM singer WHERE country = 'Japan'",
    ),
    (  # the column's cell value is bound, not the phrase as the question writes it
        LIVE_FRANCE,
        COUNT_FRANCE,
        [("France", "France", "singer.country")],
        "How many singers live in japan?",
        [("japan", "Japan", "singer.country")],
        "SELECT COUNT(*) FROM singer WHERE country = 'Japan'",
    ),
    (  # a quote in a cell value is a quote inside one string literal
        LIVE_FRANCE,
        COUNT_FRANCE,
        [("France", "France", "singer.country")],
        "How many singers live in Côte d'Ivoire?",
        [("Côte d'Ivoire", "Côte d'Ivoire", "singer.country")],
        "SELECT COUNT(*) FROM singer WHERE country = 'Côte d''Ivoire'",
    ),
    (  # SQL in a cell value stays a value
        LIVE_FRANCE,
        COUNT_FRANCE,
        [("France", "France", "singer.country")],
        f"How many singers live in {HOSTILE}?",
        [(HOSTILE, HOSTILE, "singer.country")],
        "SELECT COUNT(*) FROM singer WHERE country = 'x''); DROP TABLE singer; --'",
    ),
    (  # an alias, the literal on the left, the value twice: one parameter, both places
        "How many singers live in France, of all singers living in France?",
        "SELECT count(*) FROM singer AS s WHERE 'France' = s.country "
        "AND s.age > 0 AND s.country IN (SELECT country FROM singer WHERE country = 'France')",
        [("France", "France", "singer.country")],
        "How many singers live in Peru, of all singers living in Peru?",
        [("Peru", "Peru", "singer.country")],
        "SELECT COUNT(*) FROM singer AS s WHERE 'Peru' = s.country AND s.age > 0 AND "
        "s.country IN (SELECT country FROM singer WHERE country = 'Peru')",
    ),
    (  # an IN list: two values of the column, in the order the question names them
        "How many singers live in France or Spain?",
        "SELECT count(*) FROM singer WHERE country IN ('France', 'Spain')",
        [("France", "France", "singer.country"), ("Spain", "Spain", "singer.country")],
        "How many singers live in Italy or Japan?",
        [("Japan", "Japan", "singer.country"), ("Italy", "Italy", "singer.country")],
        "SELECT COUNT(*) FROM singer WHERE country IN ('Italy', 'Japan')",
    ),
    (  # a value and a number; a literal the question does not name stays
        "Which singers living in France are older than 40?",
        "SELECT name FROM singer WHERE country = 'France' AND age > 40 AND name <> 'Nobody'",
        [("France", "France", "singer.country")],
        "Which singers living in Japan are older than 25?",
        [("Japan", "Japan", "singer.country")],
        "SELECT name FROM singer WHERE country = 'Japan' AND age > 25 AND name <> 'Nobody'",
    ),
    (  # a value of another column: no value of singer.country to bind
        LIVE_FRANCE,
        COUNT_FRANCE,
        [("France", "France", "singer.country")],
        "How many singers live in Springfield?",
        [("Springfield", "Springfield", "stadium.location")],
        None,
        "names 0 value(s) of singer.country",
    ),
    (  # a value the index does not hold
        LIVE_FRANCE,
        COUNT_FRANCE,
        [("France", "France", "singer.country")],
        "How many singers live in Atlantis?",
        [],
        None,
        "names 0 value(s) of singer.country",
    ),
    (  # one value too many
        LIVE_FRANCE,
        COUNT_FRANCE,
        [("France", "France", "singer.country")],
        "How many singers live in Japan or Peru?",
        [("Japan", "Japan", "singer.country"), ("Peru", "Peru", "singer.country")],
        None,
        "names 2 value(s) of singer.country",
    ),
]


@pytest.mark.parametrize("case", SUBSTITUTION, ids=[c[3] for c in SUBSTITUTION])
def test_a_new_value_of_the_column_takes_the_literals_place(case):
    vq, sql, named, q, asked, want, *why = case
    row = _verified(vq, sql, named)
    assert not any(s.default == "Nobody" for s in row.slots)
    strong = _matches(asked)
    b = bind(row, q, strong, question_numbers(q, list(strong)))
    assert b.sql == want, b.reason
    if want is None:
        assert why[0] in b.reason
        return
    # one read-only statement whose string literals are the cell values bound, whole
    tree = parse_one(b.sql)
    assert isinstance(tree, exp.Select)
    values = {v for _, v, _ in asked}
    assert values <= {lit.this for lit in tree.find_all(exp.Literal) if lit.is_string}
    assert [x["value"] for x in b.bindings if x["kind"] == "value"] == sorted(
        values, key=lambda v: q.find(next(p for p, w, _ in asked if w == v))
    )


# (verified question, new question naming Japan, answered: None, or a part of the reason)
OTHER_WORDS = [
    ("How many singers live in France?", "How many singers are there in Japan?", None),
    ("How many singers live in France?", "How many singers are from Japan?", None),
    ("How many singers live in France?", "How many singers do we have in Japan?", None),
    ("How many singers live in France?", "How many singers reside in Japan?", None),
    ("How many singers are from France?", "How many singers living in Japan are there?", None),
    ("How many singers live in France?", "How many singers died in Japan?", "died"),
    ("How many singers live in France?", "How many singers performed in Japan?", "performed"),
    ("How many singers live in France?", "How many singers moved to Japan?", "moved, to"),
    ("How many singers live in France?", "Which singers live in Japan?", "how, many, which"),
    ("How many singers live in France?", "How many singers live outside Japan?", "outside"),
    ("How many singers live in France?", "How many singers aren't in Japan?", "not"),
    ("How many singers live in France?", "How many stadiums are there in Japan?", "stadium"),
]


@pytest.mark.parametrize("vq, q, why", OTHER_WORDS, ids=[c[1] for c in OTHER_WORDS])
def test_other_words_answer_only_when_they_differ_in_light_words(vq, q, why):
    row = _verified(vq, COUNT_FRANCE, [("France", "France", "singer.country")])
    reason = same_meaning(row, q, SCHEMA, ["Japan"], [], []) or same_other_words(
        row, q, SCHEMA, ["Japan"], [], 0.93
    )
    if why is None:
        assert reason is None
    else:
        assert reason and why in reason, reason
