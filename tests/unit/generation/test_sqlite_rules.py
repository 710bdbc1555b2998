"""SQLite's semantics resolved against the schema (nl2sql.generation._sqlite.rules, through
cleaning): table-driven from tests/fixtures/sqlite_rules.sql (a new case is one block there),
then refusals, dialects and the fallback when the rules fail."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import FIXTURES
from nl2sql.core.sqlcheck import check_candidate
from nl2sql.core.types import Column, Schema, Table
from nl2sql.generation.cleaning import clean


def _schema():
    def col(name, ty, pk=False):
        return Column(name=name, data_type=ty, is_primary_key=pk)

    return Schema(
        tables=[
            Table(
                "singer",
                "public",
                "singer",
                [
                    col("singer_id", "integer", True),
                    col("name", "text"),
                    col("country", "text"),
                    col("age", "integer"),
                    col("zip", "text"),
                ],
            ),
            Table(
                "concert",
                "public",
                "concert",
                [
                    col("concert_id", "integer", True),
                    col("singer_id", "integer"),
                    col("year", "text"),
                    col("theme", "text"),
                ],
            ),
        ]
    )


def _sqlite(sql):
    return clean(sql, "sqlite", _schema())


FIXTURE = FIXTURES / "sqlite_rules.sql"


@dataclass
class Case:
    """One block of ``fixtures/sqlite_rules.sql``."""

    title: str
    steps: list[str]
    text: str
    sql: str


def read_cases(path: Path = FIXTURE) -> list[Case]:
    """The blocks of a fixture file: ``-- title:``, ``-- steps:``, the SQLite model text and the
    PostgreSQL SQL, each statement ending with ``;`` (other ``--`` lines are comments)."""
    cases = []
    for block in path.read_text().split("\n\n"):
        meta, statements, current = {}, [], []
        for line in block.strip().splitlines():
            if line.startswith("--"):
                key, _, value = line.removeprefix("--").strip().partition(": ")
                meta[key] = value
                continue
            current.append(line)
            if line.rstrip().endswith(";"):
                statements.append("\n".join(current).rstrip()[:-1])
                current = []
        if statements:
            assert len(statements) == 2 and not current, f"{path.name}: {block!r}"
            steps = [s.strip() for s in meta["steps"].split(",")]
            cases.append(Case(meta["title"], steps, *statements))
    return cases


CASES = read_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.title for c in CASES])
def test_sqlite_model_text_becomes_the_expected_postgres_sql(case):
    cl = _sqlite(case.text)
    assert cl.reason is None
    assert cl.sql == case.sql
    assert cl.steps == case.steps


def test_sqlite_derived_table_gets_an_alias():
    cl = _sqlite("SELECT count(*) FROM (SELECT country FROM singer GROUP BY country)")
    assert "sqlite:derived_alias" in cl.steps
    check_candidate(cl.sql, {"singer"})
    assert "AS derived_1" in cl.sql
    assert (
        "sqlite:derived_alias"
        not in _sqlite("SELECT count(*) FROM (SELECT country FROM singer) AS s").steps
    )


def test_sqlite_bare_column_not_dependent_is_refused_with_a_reason():
    cl = _sqlite("SELECT name, max(age) FROM singer GROUP BY country")
    assert cl.sql == "" and cl.steps[-1] == "refused"
    assert "name" in cl.reason and "GROUP BY country" in cl.reason
    # aggregated and grouped columns are fine
    ok = _sqlite("SELECT country, max(age), count(name) FROM singer GROUP BY country")
    assert ok.reason is None and "sqlite:group_by_dependent" not in ok.steps


def test_sqlite_rules_need_the_schema_and_the_sqlite_dialect():
    text = 'SELECT name FROM singer WHERE name LIKE "a%"'
    assert not any(s.startswith("sqlite:") for s in clean(text, "sqlite").steps)
    pg = clean("SELECT name FROM singer WHERE name LIKE 'a%'", "postgres", _schema())
    assert pg.steps == [] and "LIKE" in pg.sql and "ILIKE" not in pg.sql


def test_sqlite_rules_failing_fall_back_to_syntax_only(monkeypatch):
    import nl2sql.generation.cleaning as cleaning

    def boom(tree, schema):
        raise AttributeError("unforeseen tree")

    monkeypatch.setattr(cleaning, "apply_sqlite_rules", boom)
    cl = _sqlite('SELECT name FROM singer WHERE country = "France"')
    assert cl.steps[-1] == "sqlite:rules_skipped" and "'France'" in cl.sql and cl.reason is None
