"""Masked questions (DAIL-SQL §3.2): schema names and cell values replaced by <mask>;
table-driven from tests/fixtures/masking.txt (a new case is one block there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES
from nl2sql.model.masking import inflections, mask_question, name_words


def test_name_words_split_snake_and_camel_case():
    assert name_words("songReleaseYear") == ["song", "release", "year"]
    assert name_words("singer_in_concert") == ["singer", "in", "concert"]


def test_inflections_cover_plural_forms():
    assert {"city", "cities"} <= inflections("city")
    assert {"singer", "singers"} <= inflections("singers")
    assert {"class", "classes"} <= inflections("class")


def read_cases(path: Path = FIXTURES / "masking.txt") -> list[dict[str, str]]:
    """The blocks of ``masking.txt``: ``key: value`` lines (``#``: comments), blank-separated."""
    cases = []
    for block in path.read_text().split("\n\n"):
        lines = [x for x in block.strip().splitlines() if not x.startswith("#")]
        if lines:
            cases.append({k: v.strip() for k, _, v in (x.partition(":") for x in lines)})
    return cases


def _listed(field: str) -> list[str]:
    """The items of a ``names:`` or ``values:`` field, separated by `` | ``."""
    return [x.strip() for x in field.split(" | ") if x.strip()]


CASES = read_cases()


@pytest.mark.parametrize("case", CASES, ids=[c["title"] for c in CASES])
def test_masking_replaces_names_and_values_and_keeps_the_rest(case):
    masked = mask_question(
        case["question"], names=_listed(case["names"]), values=_listed(case["values"])
    )
    assert masked == case["masked"]
