"""What a model reader receives of result rows and SQL (``nl2sql.agent.view``), without a
server: the output-column lineage of the gate, matched by column name (``jsonb`` rows come with
their keys sorted), ``*`` expanded over the role's schema, fail-closed where the lineage cannot
be traced; the agent's own literals kept in SQL; ``agent_values = role`` hands all over."""

from __future__ import annotations

import pytest

from nl2sql.agent.view import AgentView, expand_stars, output_names
from nl2sql.core.types import Column, ForeignKey, Schema, Table
from nl2sql.model.gate import Gate


def _schema() -> Schema:
    singer = Table(
        "singer", "public", "singer",
        [Column("singer_id", "int", True), Column("name", "text", values_allowed=False),
         Column("country", "text"), Column("age", "int")],
    )  # fmt: skip
    concert = Table(
        "concert", "public", "concert",
        [Column("concert_id", "int", True), Column("singer_id", "int"), Column("theme", "text")],
    )  # fmt: skip
    fk = ForeignKey("concert", ["singer_id"], "singer", ["singer_id"])
    return Schema(tables=[singer, concert], foreign_keys=[fk])


def _view(send_values: bool = True, gated: bool = True) -> AgentView:
    view = AgentView.__new__(AgentView)  # no database: the schema and gate set by hand
    view.schema, view.gated = _schema(), gated
    view.gate = Gate(view.schema, send_values) if gated else None
    return view


ROW = {"age": 30, "country": "France", "name": "Ann", "singer_id": 1}  # jsonb: keys sorted

CASES = [
    # (sql, row, kept keys, withheld keys)
    ("SELECT name, age FROM singer", {"age": 30, "name": "Ann"}, ["age"], ["name"]),
    ("SELECT age, name FROM singer", {"name": "Ann", "age": 30}, ["age"], ["name"]),
    ("SELECT * FROM singer", ROW, ["age", "country", "singer_id"], ["name"]),
    ("SELECT s.*, c.theme FROM singer s JOIN concert c USING (singer_id)",
     {**ROW, "theme": "Rock"}, ["age", "country", "singer_id", "theme"], ["name"]),
    ("SELECT upper(name) AS n, age FROM singer", {"n": "ANN", "age": 30}, ["age"], ["n"]),
    ("SELECT string_agg(name, ', ') AS names FROM singer", {"names": "Ann, Bo"}, [], ["names"]),
    ("SELECT count(*) AS n FROM singer", {"n": 2}, ["n"], []),
    ("SELECT count(name) AS n FROM singer", {"n": 2}, [], ["n"]),
    ("SELECT s FROM singer s", {"s": dict(ROW)}, [], ["s"]),
    ("SELECT country, count(*) FROM singer GROUP BY country", {"count": 2, "country": "F"},
     ["count", "country"], []),
    ("SELECT theme FROM concert", {"theme": "Rock"}, ["theme"], []),
    ("SELECT age AS name FROM singer", {"name": 30}, ["name"], []),  # the alias, not the column
]  # fmt: skip


@pytest.mark.parametrize("sql,row,kept,withheld", CASES)
def test_a_withheld_columns_values_are_dropped_by_output_name(sql, row, kept, withheld):
    out = _view().rows(sql, [row])
    assert sorted(out["rows"][0]) == kept and out["withheld_columns"] == sorted(
        withheld, key=list(row).index
    )


@pytest.mark.parametrize(
    "sql",
    [
        "WITH x AS (SELECT name FROM singer) SELECT * FROM x",
        "SELECT n FROM (SELECT name AS n FROM singer) d",
        "SELECT name FROM singer UNION SELECT theme FROM concert",
        "not sql at all (",
    ],
)
def test_rows_whose_lineage_cannot_be_traced_are_all_withheld(sql):
    out = _view().rows(sql, [{"n": "Ann"}])
    assert out["rows"] == [] and "could not be traced" in out["rows_withheld"]


def test_send_values_off_sends_no_row_and_role_mode_sends_all():
    off = _view(send_values=False).rows("SELECT age FROM singer", [{"age": 3}])
    assert off["rows"] == [] and "send_values is off" in off["rows_withheld"]
    role = _view(gated=False).rows("SELECT name FROM singer", [{"name": "Ann"}])
    assert role["rows"] == [{"name": "Ann"}]


@pytest.mark.parametrize(
    "sql,known,masked",
    [
        ("SELECT age FROM singer WHERE name = 'Ann'", "How old is Ann?", False),
        ("SELECT age FROM singer WHERE name = 'Ann'", "How old is the oldest?", True),
        ("SELECT theme FROM concert WHERE theme = 'Rock'", "", False),  # no withheld column
    ],
)
def test_sql_keeps_the_readers_own_literals_and_masks_the_rest(sql, known, masked):
    shown = _view().sql(sql, known)
    assert (shown != sql) is masked and ("'Ann'" in shown) is (not masked and "Ann" in sql)


def test_errors_quote_no_value_and_stars_expand_over_the_schema():
    err = _view().error(
        'invalid input syntax for type integer: "Ann"', "SELECT name::int FROM singer"
    )
    assert "Ann" not in err
    expanded = expand_stars("SELECT * FROM singer", _schema())
    assert output_names(expanded) == ["singer_id", "name", "country", "age"]
    assert expand_stars("SELECT * FROM nowhere", _schema()) is not None  # left as is: a star
    assert output_names("SELECT 1 UNION SELECT 2") is None
