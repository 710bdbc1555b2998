"""Spider hardness of a PreSQL and PET-SQL's fine-grained routing of voters."""

from __future__ import annotations

import pytest

from nl2sql.core.errors import ConfigError
from nl2sql.core.setting_declaration import parse_hardness_voters as parse_voters
from nl2sql.core.settings import validate_setting
from nl2sql.selection.hardness import hardness, route


@pytest.mark.parametrize(
    "sql,level",
    [
        ("SELECT count(*) FROM singer", "easy"),
        ("SELECT name FROM singer WHERE age > 30", "easy"),
        ("SELECT name, country FROM singer WHERE age > 20", "medium"),
        (
            "SELECT s.name FROM singer s JOIN singer_in_concert c ON s.singer_id = c.singer_id "
            "GROUP BY s.name",
            "medium",
        ),
        ("SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer)", "hard"),
        ("SELECT name FROM singer UNION SELECT name FROM stadium", "hard"),
        ("SELECT name FROM singer WHERE age > 20 OR name LIKE '%a%' ORDER BY age LIMIT 3", "extra"),
    ],
)
def test_spider_hardness(sql, level):
    assert hardness(sql) == level


def test_hardness_of_unparsable_sql_is_none():
    assert hardness("SELECT FROM WHERE (") is None


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
