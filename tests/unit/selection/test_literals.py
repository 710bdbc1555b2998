"""Issue 42 §2: a weak consensus weighs the candidates' literals against the value index."""

from __future__ import annotations

import pytest

from nl2sql.core.types import Column, Schema, Table
from nl2sql.selection import literals
from nl2sql.selection.consensus import VoteRule, weigh_evidence
from nl2sql.selection.literals import compared_literals, literal_misses, missing_literals

SCHEMA = Schema(
    tables=[
        Table(
            schema="public",
            table="superhero",
            name="superhero",
            columns=[Column("id", "integer"), Column("name", "text"), Column("power", "text")],
        ),
        Table(
            schema="public",
            table="team",
            name="team",
            columns=[Column("id", "integer"), Column("name", "text")],
        ),
    ]
)
HERO = ("public", "superhero", "power")
NAME = ("public", "superhero", "name")


@pytest.mark.parametrize(
    ("sql", "found"),
    [
        ("SELECT id FROM superhero WHERE power = 'stealth'", [(HERO, "stealth")]),
        ("SELECT id FROM superhero WHERE 'stealth' = power", [(HERO, "stealth")]),
        (
            "SELECT id FROM superhero WHERE power IN ('a', 'b', 'a')",
            [(HERO, "a"), (HERO, "b")],
        ),
        ("SELECT id FROM superhero WHERE name LIKE 'Bat'", [(NAME, "Bat")]),
        # a pattern with a wildcard is no cell value
        ("SELECT id FROM superhero WHERE name LIKE 'Bat%'", []),
        ("SELECT id FROM superhero WHERE name LIKE 'B_t'", []),
        # numbers, an ambiguous column and an unknown one say nothing
        ("SELECT id FROM superhero WHERE id = 3", []),
        ("SELECT 1 FROM superhero JOIN team USING (id) WHERE name = 'x'", []),
        ("SELECT id FROM superhero WHERE colour = 'x'", []),
        ("SELECT id FROM superhero s WHERE s.power <> 'x'", []),
        ("not sql at all (", []),
    ],
)
def test_compared_literals(sql, found):
    assert compared_literals(sql, SCHEMA) == found


class FakeSpi:
    """The value index as ``nl2sql._column_values`` would answer: column -> its values."""

    def __init__(self, index):
        self.index, self.calls = index, 0

    def __call__(self, plpy, sql, args, types):
        self.calls += 1
        out = []
        for i, (s, t, c, lit) in enumerate(zip(*args, strict=True), 1):
            vals = self.index.get((s, t, c), [])
            same = sorted((v for v in vals if v.lower() == lit.lower()), key=lambda v: v != lit)
            out.append({"i": i, "n": len(vals), "value": same[0] if same else None})
        return out


@pytest.fixture
def fake(monkeypatch):
    spi = FakeSpi({HERO: ["Stealth", "Flight"], NAME: ["Batman"] * 5})
    monkeypatch.setattr(literals.spi, "query", spi)
    return spi


@pytest.mark.parametrize(
    ("pair", "cap", "partial", "missing"),
    [
        ((HERO, "Stealth"), 100, (), False),
        ((HERO, "stealth"), 100, (), True),  # another case is another value
        ((HERO, "Telepathy"), 100, (), True),
        ((HERO, "stealth"), 2, (), False),  # at the cap: the column may hold more
        ((HERO, "stealth"), 100, (HERO,), False),  # partially indexed
        ((("public", "team", "name"), "x"), 100, (), False),  # not indexed
    ],
)
def test_missing_literals(fake, pair, cap, partial, missing):
    assert (pair in missing_literals(None, [pair], cap, partial)) is missing


def _group(sql, score, rows=1):
    return {"sql": sql, "score": score, "own_score": score, "answer": None, "row_count": rows}


def test_weak_consensus_prefers_the_group_whose_literals_are_cell_values(fake):
    wrong = _group("SELECT id FROM superhero WHERE power = 'stealth'", 2.0)
    right = _group("SELECT id FROM superhero WHERE power = 'Stealth'", 1.5)
    other = _group("SELECT 7", 1.5)
    kept = [wrong, right, other]
    misses = literal_misses(None, SCHEMA, 100)
    note = weigh_evidence(kept, 5.0, "which heroes have stealth?", VoteRule(), misses)
    assert kept[0] is right and "literals missing" in note
    assert fake.calls == 1  # one statement for every contender's literals


@pytest.mark.parametrize(
    ("total", "second"),
    [
        (3.0, 1.0),  # the top group holds a majority: no lookup
        (5.0, 0.5),  # the other group is no contender
    ],
)
def test_literal_evidence_only_in_a_weak_consensus(fake, total, second):
    wrong = _group("SELECT id FROM superhero WHERE power = 'stealth'", 2.0)
    kept = [wrong, _group("SELECT id FROM superhero WHERE power = 'Stealth'", second)]
    assert weigh_evidence(kept, total, "q", VoteRule(), literal_misses(None, SCHEMA, 100)) == ""
    assert kept[0] is wrong and fake.calls == 0
