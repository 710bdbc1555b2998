"""bench/result_eq.py: the strict rule, Spider's official rule (test-suite-sql-eval's
``result_eq``: columns in any order) and BIRD's (sets of rows), one table of cases; a wrong rule
would move every benchmark figure."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from result_eq import RULES

# (what, gold rows, predicted rows, ordered, {rule: expected})
CASES = [
    (
        "same rows",
        [(1, "a"), (2, "b")],
        [(2, "b"), (1, "a")],
        False,
        {"strict": True, "spider": True, "bird": True},
    ),
    (
        "columns swapped",
        [("x", 3), ("y", 4)],
        [(3, "x"), (4, "y")],
        False,
        {"strict": False, "spider": True, "bird": False},
    ),
    (
        "columns swapped, ordered rows",
        [("x", 3), ("y", 4)],
        [(3, "x"), (4, "y")],
        True,
        {"strict": False, "spider": True, "bird": False},
    ),
    (
        "ordered, rows out of order",
        [(1,), (2,)],
        [(2,), (1,)],
        True,
        {"strict": False, "spider": False, "bird": True},
    ),
    (
        "a duplicate row more",
        [(1,), (1,), (2,)],
        [(1,), (2,), (2,)],
        False,
        {"strict": False, "spider": False, "bird": True},
    ),
    (
        "one duplicate fewer",
        [(1,), (1,)],
        [(1,)],
        False,
        {"strict": False, "spider": False, "bird": True},
    ),
    ("an extra column", [(1,)], [(1, 1)], False, {"strict": False, "spider": False, "bird": False}),
    ("both empty, different widths", [], [], False, {"strict": True, "spider": True, "bird": True}),
    (
        "values paired differently across columns",
        [(1, 2), (3, 4)],
        [(2, 3), (4, 1)],
        False,
        {"strict": False, "spider": False, "bird": False},
    ),
    (
        "four columns permuted",
        [(1, "a", 2.5, None), (2, "b", 3.5, None)],
        [(None, 2.5, "a", 1), (None, 3.5, "b", 2)],
        False,
        {"strict": False, "spider": True, "bird": False},
    ),
    (
        "four columns, one value off",
        [(1, "a", 2.5, 7), (2, "b", 3.5, 8)],
        [(7, 2.5, "a", 1), (8, 3.5, "b", 3)],
        False,
        {"strict": False, "spider": False, "bird": False},
    ),
    (
        "two equal columns, either order",
        [(5, 5), (6, 6)],
        [(6, 6), (5, 5)],
        False,
        {"strict": True, "spider": True, "bird": True},
    ),
]


@pytest.mark.parametrize(
    ("what", "gold", "pred", "ordered", "want"), CASES, ids=[c[0] for c in CASES]
)
def test_each_rule_judges_each_case(what, gold, pred, ordered, want):
    got = {name: RULES[name](gold, pred, ordered) for name in want}
    assert got == want, what


def test_a_match_by_the_strict_rule_is_one_by_every_rule():
    for _, gold, pred, ordered, _want in CASES:
        if RULES["strict"](gold, pred, ordered):
            assert RULES["spider"](gold, pred, ordered) and RULES["bird"](gold, pred, ordered)
        if RULES["spider"](gold, pred, ordered):  # any column order: same values per row
            assert sorted(sorted(map(repr, r)) for r in gold) == sorted(
                sorted(map(repr, r)) for r in pred
            )
