"""The one table of repair's rules (``rules.RULES``): every rule module named by its entry, each
entry with its source, names unique, states known; the order that reproduces repair's round 0
and its findings; the rules ``off`` skips, and setting ``rules_off`` read and refused."""

from __future__ import annotations

import pkgutil

import pytest

import nl2sql.rules as rules_pkg
from nl2sql.core.errors import ConfigError
from nl2sql.core.settings import settings_from_texts
from nl2sql.core.types import Column, ForeignKey, Schema, Table
from nl2sql.rules import RULES, STATES, Context, finding, rewrite, rules_off

# a module with two entries, and why: split_both's rewrite is round 0's first for a result with
# rows, its sentence the last finding (``split_both_said``)
TWO_ENTRIES = {"nl2sql.rules.shape.split_both": {"split_both", "split_both_said"}}


def _rule_modules() -> list[str]:
    """Every module under ``nl2sql.rules`` but helpers (``_x.py``) and packages."""
    found = []
    for info in pkgutil.walk_packages(rules_pkg.__path__, "nl2sql.rules."):
        leaf = info.name.rpartition(".")[2]
        if not info.ispkg and not leaf.startswith("_"):
            found.append(info.name)
    return sorted(found)


def test_every_rule_module_has_its_entry_and_every_entry_a_source():
    modules = _rule_modules()
    assert len(modules) == 13
    for module in modules:
        named = {r.name for r in RULES if r.run.__module__ == module}
        leaf = module.rpartition(".")[2]
        assert named == TWO_ENTRIES.get(module, {leaf}), f"{module}: entries {named}"
    # snap_names stays in linking.names (it serves the repair prompt's hints too)
    assert [r.name for r in RULES if r.run.__module__.endswith("_table")] == ["snap_names"]
    assert all(r.source.strip() for r in RULES)
    assert len({r.name for r in RULES}) == len(RULES)
    assert all(r.states and r.states <= set(STATES) for r in RULES)


def _order(state: str, gives: str) -> list[str]:
    """The names of the rules for ``state`` whose outcome may give ``gives``, in table order."""
    kinds = {
        "unjoined": "r",
        "snap_names": "r",
        "fix_by_sqlstate": "r",
        "split_contradiction": "r",
        "split_both": "r",
        "rehomed": "r",
        "off_key_link": "rs",
        "bridged": "rs",
        "anti_joined": "rs",
    }
    return [r.name for r in RULES if state in r.states and gives in kinds.get(r.name, "s")]


def test_the_table_order_is_round_0s_and_the_findings():
    assert _order("failed", "r") == ["unjoined", "snap_names", "fix_by_sqlstate"]
    assert _order("empty", "r") == [
        "split_contradiction",
        "off_key_link",
        "bridged",
        "anti_joined",
        "rehomed",
    ]
    assert _order("rows", "r") == [
        "split_both",
        "off_key_link",
        "bridged",
        "anti_joined",
        "rehomed",
    ]
    assert _order("rows", "s") == [
        "self_compared_join",
        "repeated_output",
        "off_key_link",
        "bridged",
        "anti_joined",
        "outer_bound",
        "grouped_by_key",
        "ungrouped_each",
        "split_both_said",
    ]
    assert _order("empty", "s") == ["off_key_link", "bridged", "anti_joined", "outer_bound"]
    assert _order("failed", "s") == []
    # what a round-0 rewrite means is read again: every finding but the text's own two
    plain = [r.name for r in RULES if not r.meaning]
    assert plain == ["self_compared_join", "repeated_output"]


SCHEMA = Schema(
    tables=[
        Table("countries", "public", "countries", [Column("countryid", "integer", True),
              Column("name", "text")]),
        Table("car_makers", "public", "car_makers", [Column("id", "integer", True),
              Column("country", "integer")]),
    ],
    foreign_keys=[ForeignKey("car_makers", ["country"], "countries", ["countryid"])],
)  # fmt: skip


def test_rewrite_and_finding_take_the_first_and_skip_what_is_off():
    sql = "SELECT name FROM countries WHERE countryid IN (SELECT id FROM car_makers)"
    ctx = Context(sql, SCHEMA, None, None, "rows")
    moved = rewrite(ctx)
    assert moved.rule == "off_key_link" and moved.final
    assert "(SELECT country FROM car_makers)" in moved.sql
    assert finding(ctx).rule == "off_key_link"
    assert rewrite(ctx, frozenset({"off_key_link"})) is None
    assert finding(ctx, frozenset({"off_key_link"})) is None
    # a join compared with itself is the text's own: not what a rewrite means
    self_join = "SELECT a.name FROM countries AS a JOIN countries AS b ON a.name = a.name"
    ctx = Context(self_join, SCHEMA, None, None, "rows")
    assert finding(ctx).rule == "self_compared_join"
    assert finding(ctx, meaning=True) is None
    # a rule only for its states: an empty result's contradiction, not a failed one's
    split = "SELECT name FROM countries WHERE countryid = 1 AND countryid = 2"
    assert rewrite(Context(split, SCHEMA, state="empty")).rule == "split_contradiction"
    assert rewrite(Context(split, SCHEMA, state="failed")) is None
    assert (
        rewrite(Context(split, SCHEMA, state="empty"), frozenset({"split_contradiction"})) is None
    )


def test_setting_rules_off_names_known_rules_only():
    assert settings_from_texts({}).rules_off == ""
    assert rules_off("") == frozenset() and rules_off(None) == frozenset()
    st = settings_from_texts({"rules_off": " split_both, snap_names "})
    assert rules_off(st.rules_off) == {"split_both", "snap_names"}
    with pytest.raises(ConfigError) as e:
        rules_off("split_both,no_such_rule")
    assert "no_such_rule" in str(e.value) and "off_key_link" in str(e.value)
