"""Spider hardness of a PreSQL (table-driven from tests/fixtures/hardness.sql: a new case is one
line there) and PET-SQL's fine-grained routing of voters."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIXTURES
from nl2sql.core._setting_declaration import parse_hardness_voters as parse_voters
from nl2sql.core.errors import ConfigError
from nl2sql.core.settings import validate_setting
from nl2sql.selection.hardness import hardness, route


def read_cases(path: Path = FIXTURES / "hardness.sql") -> list[tuple[str, str | None]]:
    """(SQL, level) of each line ``SQL  -- level`` (``none``: None; ``--`` lines: comments)."""
    cases = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("--"):
            sql, _, level = line.rpartition("--")
            cases.append((sql.strip(), None if level.strip() == "none" else level.strip()))
    return cases


@pytest.mark.parametrize("sql,level", read_cases())
def test_spider_hardness(sql, level):
    assert hardness(sql) == level


def test_routing_picks_the_configured_voters_for_the_level():
    voters = parse_voters('{"easy": ["small"], "extra": ["big", "huge"]}')
    models = ["big", "small", "huge"]
    assert route("easy", voters, models)[0] == ["small"]
    assert route("extra", voters, models)[0] == ["big", "huge"]
    assert route("medium", voters, models)[0] == models  # not configured → all
    assert route(None, voters, models)[0] == models  # PreSQL unparsable → all
    assert route("easy", parse_voters('{"easy": ["gone"]}'), models)[0] == models
    assert route("easy", {}, models) == (models, "hardness voting off")


@pytest.mark.parametrize(
    "bad,needle",
    [
        ('{"simple": ["a"]}', "unknown hardness level"),
        ('{"easy": []}', "non-empty list"),
        ("easy=a", "not JSON"),
        ('["a"]', "JSON object"),
    ],
)
def test_hardness_voters_setting_is_validated(bad, needle):
    with pytest.raises(ConfigError, match=needle):
        validate_setting("hardness_voters", bad)
    assert validate_setting("hardness_voters", "off") == ""
