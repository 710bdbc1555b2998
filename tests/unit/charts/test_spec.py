"""The chart of a result (``nl2sql.charts``), without a server: the chart chosen by rule (the
chart the question names, then the result's shape), dates binned when asked and the SQL did
not, long tails folded, bad input answered with a spec that says what happened, and a model
reader's view of a chart (a withheld column's values not drawn)."""

from __future__ import annotations

import json
import random

import pytest
from tests.unit.agent.test_view import _view

from nl2sql.charts import spec as S
from nl2sql.charts.binning import BAR_CATEGORIES, PIE_SLICES

YEARS = [{"year": y, "concerts": n} for y, n in [(2014, 3), (2015, 5), (2016, 2)]]
COUNTRIES = [{"country": c, "n": n} for c, n in [("France", 3), ("USA", 5), ("Netherlands", 2)]]
DATES = [{"date_arrived": f"2017-0{m}-1{d}"} for m in (1, 2, 3) for d in range(m + 1)]
TWO_NUMS = [{"age": a, "weight": w} for a, w in [(3, 9.5), (5, 12.0), (8, 20.1)]]
GROUPED = [
    {"country": c, "gender": g, "n": n} for c in ("F", "US") for g, n in (("m", 1), ("f", 2))
]
DAILY = [{"day": f"2018-03-{d:02d}", "n": d} for d in range(1, 6)]
# counts per timestamp, two or three a day; readings per timestamp, not a count
STAMPS = [{"at": f"2018-03-0{d}T0{h}:00:00", "count": 1} for d in (1, 2) for h in range(d + 1)]
READINGS = [{"at": r["at"], "temperature": 20 + i} for i, r in enumerate(STAMPS)]

CASES = [
    # (question, rows, chart, x field, y field, colour field, binning)
    ("How many concerts per year?", YEARS, "bar", "year", "concerts", None, None),
    ("The trend of concerts per year", YEARS, "line", "year", "concerts", None, None),
    ("Treatments per day, a line chart that groups by date", DAILY, "line", "day", "n", None,
     None),
    ("Concerts per year as a bar chart", YEARS, "bar", "year", "concerts", None, None),
    ("Singers per country", COUNTRIES, "bar", "country", "n", None, None),
    ("Show the share of singers per country", COUNTRIES, "pie", "country", "n", None, None),
    ("Singers per country in a pie chart", COUNTRIES, "pie", "country", "n", None, None),
    ("Trend of singers by country", COUNTRIES, "line", "country", "n", None, None),
    ("Age against weight", TWO_NUMS, "scatter", "age", "weight", None, None),
    ("Dogs arrived by month", DATES, "bar", "date_arrived", "count", None, "month"),
    ("Dogs arrived per weekday, bar chart", DATES, "bar", "date_arrived", "count", None, "weekday"),
    ("How many dogs arrived in each year?", DATES, "line", "date_arrived", "count", None, "year"),
    ("Singers by country and gender", GROUPED, "stacked bar", "country", "n", "gender", None),
    ("Singers by country and gender, stacked bar", GROUPED, "stacked bar", "country", "n",
     "gender", None),
    ("Daily sales", DAILY, "line", "day", "n", None, None),
    ("Sales over time", DAILY, "line", "day", "n", None, None),
    ("Plot arrivals by how many arrivals as a trend line", STAMPS, "line", "at", "count", None,
     "day"),
    ("Arrivals as a bar chart", STAMPS, "bar", "at", "count", None, "day"),
    ("Arrivals per hour as a bar chart", STAMPS, "bar", "at", "count", None, None),
    ("Arrivals by month", STAMPS, "bar", "at", "count", None, "month"),
    ("Temperature as a trend line", READINGS, "line", "at", "temperature", None, None),
    ("Arrivals, one a day", [{"at": f"2018-03-0{d}T10:00:00", "count": d} for d in (1, 2, 3)],
     "line", "at", "count", None, None),
]  # fmt: skip


def _fields(spec):
    enc = spec["encoding"]
    if "theta" in enc:
        return enc["color"]["field"], enc["theta"]["field"], None
    return enc["x"]["field"], enc["y"]["field"], (enc.get("color") or {}).get("field")


@pytest.mark.parametrize("question,rows,chart,x,y,color,binning", CASES)
def test_the_chart_is_chosen_by_rule(question, rows, chart, x, y, color, binning):
    spec = S.build(question, "SELECT …", [json.dumps(r) for r in rows])
    meta = spec["usermeta"]
    assert (meta["chart"], *_fields(spec), meta["binning"]) == (chart, x, y, color, binning)
    assert spec["$schema"].endswith("/v5.json") and meta["cap"] == S.MAX_VALUES


def test_binning_by_month_counts_rows_and_sorts_the_months():
    spec = S.build("Dogs arrived by month", "SELECT date_arrived FROM dogs", DATES)
    values = {r["date_arrived"]: r["count"] for r in spec["data"]["values"]}
    assert values == {"Jan": 2, "Feb": 3, "Mar": 4}
    assert spec["encoding"]["x"]["sort"][:3] == ["Jan", "Feb", "Mar"]


def test_binning_averages_an_average_and_sums_a_count():
    rows = [
        {"d": "2017-01-01", "avg_w": 2.0, "count": 1},
        {"d": "2017-05-01", "avg_w": 4.0, "count": 2},
    ]
    spec = S.build(
        "Weight by year",
        "SELECT d, avg_w FROM t",
        [{"d": r["d"], "avg_w": r["avg_w"]} for r in rows],
    )
    assert spec["data"]["values"] == [{"d": "2017", "avg_w": 3.0}]
    spec = S.build(
        "Dogs by year", "SELECT d, count FROM t", [{"d": r["d"], "count": r["count"]} for r in rows]
    )
    assert spec["data"]["values"] == [{"d": "2017", "count": 3}]


def test_bars_are_sorted_by_the_measure_unless_the_sql_orders_them():
    spec = S.build("Singers per country", "SELECT country, n FROM t", COUNTRIES)
    assert spec["encoding"]["x"]["sort"] == {"field": "n", "op": "sum", "order": "descending"}
    spec = S.build("Singers per country", "SELECT country, n FROM t ORDER BY country", COUNTRIES)
    assert spec["encoding"]["x"]["sort"] is None


@pytest.mark.parametrize(
    "question,rows,says",
    [
        ("How many singers?", [{"count": 6}], "count: 6"),
        ("Names of singers", [{"name": "Ann", "country": "F"}], "no column holds numbers"),
        ("Nothing", [], "no rows"),
        ("All NULL", [{"c": None, "n": None}, {"c": None, "n": 2}], "every row has a NULL"),
    ],
)
def test_a_result_no_chart_fits_gets_a_spec_that_says_so(question, rows, says):
    spec = S.build(question, "SELECT …", rows)
    assert spec["usermeta"]["chart"] == "none" and spec["mark"]["type"] == "text"
    assert says in spec["data"]["values"][0][S.MESSAGE_FIELD]


def test_nulls_and_mixed_types_are_left_out_and_said():
    rows = [*COUNTRIES, {"country": None, "n": 4}, {"country": "Peru", "n": "many"}]
    spec = S.build("Singers per country", "SELECT country, n FROM t", rows)
    assert {r["country"] for r in spec["data"]["values"]} == {"France", "USA", "Netherlands"}
    notes = " ".join(spec["usermeta"]["notes"])
    assert "1 row(s) with NULL" in notes and "mixed types: 1 row(s)" in notes


def test_over_the_cap_the_spec_is_truncated_and_says_so():
    rows = [{"x": i, "y": i * 2} for i in range(30)]
    spec = S.build("x against y", "SELECT x, y FROM t", rows, cap=10)
    meta = spec["usermeta"]
    assert meta["truncated"] and meta["rows"] == 30 and len(spec["data"]["values"]) == 10
    assert "only the first 10 drawn" in meta["notes"][0]


def test_ten_thousand_categories_fold_into_other():
    rows = [{"name": f"c{i}", "n": i} for i in range(10_000)]
    spec = S.build("Count per name", "SELECT name, n FROM t", rows)
    cats = [r["name"] for r in spec["data"]["values"]]
    assert len(cats) == BAR_CATEGORIES and cats[-1] == "other" and "c4999" in cats
    assert spec["usermeta"]["truncated"] and spec["encoding"]["x"]["sort"][-1] == "other"
    pie = S.build("Share of each name", "SELECT name, n FROM t", rows[:20])
    assert len(pie["data"]["values"]) == PIE_SLICES


def test_field_names_with_dots_are_escaped():
    spec = S.build("per a.b", "SELECT …", [{"a.b": "x", "n": 1}, {"a.b": "y", "n": 2}])
    assert spec["encoding"]["x"]["field"] == "a\\.b"


def test_a_model_reader_sees_no_withheld_columns_values_in_a_chart():
    rows = [{"name": "Ann", "age": 30}, {"name": "Bo", "age": 41}]
    spec = S.build("Age per singer", "SELECT name, age FROM singer", rows)
    out = _view().chart(spec, "Age per singer")
    assert out["usermeta"]["chart"] == "none" and "Ann" not in json.dumps(out)
    assert out["usermeta"]["withheld_columns"] == ["name"]
    ok = S.build("Age per country", "SELECT country, age FROM singer", COUNTRIES)
    assert _view().chart(ok)["data"] == ok["data"]
    off = _view(send_values=False).chart(ok)
    assert off["usermeta"]["chart"] == "none" and "France" not in json.dumps(off)


def test_timestamps_are_binned_by_day_when_asked_and_dates_are_not():
    rows = [{"at": f"2018-03-0{d}T0{h}:00:00", "n": 1} for d in (1, 2) for h in (1, 2, 3)]
    spec = S.build("Treatments in each day, line chart", "SELECT at, n FROM t", rows)
    assert spec["usermeta"]["binning"] == "day"
    assert spec["data"]["values"] == [{"at": "2018-03-01", "n": 3}, {"at": "2018-03-02", "n": 3}]
    days = [{"at": r["at"][:10], "n": 1} for r in rows[::3]]
    assert S.build("Treatments in each day", "SELECT …", days)["usermeta"]["binning"] is None


def test_json_and_array_cells_are_drawn_as_their_text():
    rows = [{"tags": ["a", "b"], "n": 2}, {"tags": {"k": 1}, "n": 3}, {"tags": ["a", "b"], "n": 1}]
    spec = S.build("Count per tags", "SELECT tags, n FROM t", rows)
    assert spec["usermeta"]["chart"] == "bar"
    assert {r["tags"] for r in spec["data"]["values"]} == {'["a", "b"]', '{"k": 1}'}


ODD = [None, 0, -5, 2.5, float("nan"), True, "x", "", "2018-01-01", "2018-01-01T10:00:00",
       "2018-13-45", [1], {"a": 1}, 10**20, "1e5"]  # fmt: skip
QUESTIONS = ["", "pie", "bar chart by year", "per weekday", "stacked bar", "scatter", "by day"]


def test_any_result_gets_a_spec_never_an_error():
    rnd = random.Random(7)
    charts = set()
    for _ in range(2000):
        names = [
            rnd.choice(["a", "b", "a.b", "count", "year", ""]) for _ in range(rnd.randint(0, 4))
        ]
        rows = [{n: rnd.choice(ODD) for n in names} for _ in range(rnd.randint(0, 20))]
        spec = S.build(rnd.choice(QUESTIONS), "SELECT …", rows, cap=rnd.choice([5, 5000]))
        json.dumps(spec)
        charts.add(spec["usermeta"]["chart"])
    assert {"none", "bar", "pie"} <= charts


def test_a_text_that_only_looks_like_a_date_is_no_date():
    rows = [{"d": "2018-13-45", "n": 1}, {"d": "2018-02-30", "n": 2}]
    spec = S.build("n per d by month", "SELECT d, n FROM t", rows)
    assert spec["usermeta"]["binning"] is None and spec["encoding"]["x"]["type"] == "nominal"


def test_small_counts_get_whole_ticks_and_a_line_by_day_keeps_time():
    few = S.build("Arrivals as a trend line", "SELECT …", STAMPS)
    assert few["encoding"]["y"]["axis"]["values"] == [0, 1, 2, 3]
    assert few["encoding"]["y"]["axis"]["format"] == ",d"  # 1, not 1.0
    assert few["encoding"]["x"]["type"] == "temporal"  # days apart as far as in time
    bars = S.build("Arrivals as a bar chart", "SELECT …", STAMPS)
    assert bars["encoding"]["x"]["type"] == "ordinal"
    many = S.build("Singers per country", "SELECT …", [{"c": "F", "n": 40}, {"c": "U", "n": 3}])
    assert "values" not in many["encoding"]["y"]["axis"]  # the renderer's own whole ticks
    pts = [{"avg": 1.5, "max": 2}, {"avg": 3.0, "max": 3}]  # a scatter's scale is not from 0
    assert S.build("avg against max, scatter", "SELECT …", pts)["encoding"]["y"]["axis"][
        "values"
    ] == [2, 3]
    repeated = [{"c": "F", "n": 1}, {"c": "F", "n": 2}]  # bars of one x stack: no fixed ticks
    assert "values" not in S.build("n per c", "SELECT …", repeated)["encoding"]["y"]["axis"]
