"""The semantic model without a database: the YAML's refusals, logical table names in verified
queries, what a question names, and the expressions the prompts show (through the gate).
tests/db/test_semantic_model.py runs the import, the export and a question inside PostgreSQL."""

from __future__ import annotations

import pytest

from nl2sql.core.errors import ConfigError
from nl2sql.core.types import Column, Schema, Table
from nl2sql.model.gate import Gate
from nl2sql.semantic.cortex import MAX_ITEMS, parse, physical_sql
from nl2sql.semantic.model import SemanticModel, SemanticObject

ORDERS = Table("sm_orders", "public", "sm_orders", [Column("amount", "numeric")])
AREAS = Table(
    "sm_areas",
    "public",
    "sm_areas",
    [Column("area_name", "text"), Column("secret", "text", values_allowed=False)],
)
MODEL = "name: m\ntables:\n  - name: orders\n    base_table: {table: sm_orders}\n"


@pytest.mark.parametrize(
    "text, says",
    [
        (None, "is empty"),
        ("   ", "is empty"),
        ("a: [", "not valid YAML"),
        ("42", "not a semantic model"),
        ("name: m\ntables: {a: 1}", "not a semantic model"),
        ("tables:\n  - name: t", "has no name"),
        ("name: m\ntables: [x]", "tables of the model must be a list of mappings"),
        ("name: m\ntables:\n  - name: t\n    facts: 3", "facts of tables.0. must be a list"),
        ("name: m\ntables: [{}]\nrelationships: x", "relationships of the model must be"),
        ("metrics: []", "dbt MetricFlow metrics without their semantic_models"),
        ("semantic_models: [{}]", "every semantic model needs a name"),
        ("semantic_models: []", "not a semantic model"),
        ("name: m\ntables: [{}]\n# " + "x" * 5000, "5023 bytes, more than setting"),
    ],
)
def test_what_is_not_a_semantic_model_is_refused_naming_why(text, says):
    with pytest.raises(ConfigError, match=says):
        parse(text, 4096)


def test_a_model_of_too_many_items_is_refused():
    dims = "\n".join(f"      - {{name: d{i}, expr: amount}}" for i in range(MAX_ITEMS + 1))
    with pytest.raises(ConfigError, match="items, more than"):
        parse(MODEL + "    dimensions:\n" + dims, 10**8)
    assert parse(MODEL, 4096)[0]["tables"][0]["name"] == "orders"


def test_logical_table_names_in_verified_sql_become_base_tables():
    logical = {"orders": ORDERS, "areas": AREAS}
    sql, dialect = physical_sql(
        "WITH orders AS (SELECT 1 AS amount) SELECT SUM(o.amount) FROM __orders o "
        "JOIN areas a ON TRUE JOIN other.areas x ON TRUE, orders",
        logical,
    )
    assert dialect == "snowflake"
    assert "FROM public.sm_orders AS o" in sql and "JOIN public.sm_areas AS a" in sql
    assert "other.areas AS x" in sql and sql.endswith(", orders")  # qualified, and the CTE


def objects() -> SemanticModel:
    return SemanticModel(
        objects=[
            SemanticObject(
                1,
                "metric",
                "total_revenue",
                "sm_orders",
                "SUM(sm_orders.amount)",
                ["sm_orders"],
                "sum of amounts",
                ["turnover"],
            ),
            SemanticObject(
                2, "filter", "secret_areas", "sm_areas", "sm_areas.secret = 'S-1'", ["sm_areas"]
            ),
            SemanticObject(
                3,
                "dimension",
                "area_name",
                "sm_areas",
                "sm_areas.area_name",
                ["sm_areas"],
                None,
                ["region"],
            ),
        ],
        tables={"sm_orders": ("orders", ["purchases"])},
    )


def test_a_question_names_objects_and_tables_by_name_or_synonym():
    sm = objects()
    named = sm.name_in("Total revenue and purchases per region?")
    assert [(n.kind, n.name, n.phrase) for n in named] == [
        ("metric", "total_revenue", "Total revenue"),
        ("dimension", "area_name", "region"),
        ("table", "orders", "purchases"),
    ]
    assert sm.links()[0] == ("sm_orders", "semantic metric total_revenue named ('Total revenue')")
    assert objects().name_in("How many singers?") == []


@pytest.mark.parametrize("send_values", [True, False])
def test_expressions_pass_the_gate_before_a_prompt_shows_them(send_values):
    sm = objects()
    gate = Gate(Schema([ORDERS, AREAS]), send_values)
    shown = sm.gated(gate, "presql")
    assert shown[1] == "SUM(sm_orders.amount)"
    assert shown[2] == "sm_areas.secret = 'value'"
    assert gate.held["presql"]["literals of expressions"] == (1 if send_values else 3)
    text = sm.prompt_text({"sm_orders"}, shown)
    assert "-- metric sm_orders.total_revenue: SUM(sm_orders.amount) -- sum of amounts" in text
    assert "(also: turnover)" in text and "sm_areas" not in text
    assert sm.shown == ["metric sm_orders.total_revenue"]
    assert "S-1" not in sm.prompt_text({"sm_orders", "sm_areas"}, shown)


METRICFLOW = """
semantic_models:
  - name: orders
    description: one row per order
    model: ref('sm_orders')
    entities:
      - {name: order, type: primary, expr: order_id}
      - {name: customer, type: foreign, expr: cust_code}
    dimensions:
      - {name: status, type: categorical}
      - {name: ordered_at, type: time, type_params: {time_granularity: day}}
    measures:
      - {name: revenue, agg: sum, expr: amount, description: order amounts}
      - {name: order_count, agg: count}
      - {name: p90_amount, agg: percentile, expr: amount}
  - name: customers
    model: ref('shop', 'sm_customers')
    entities:
      - {name: customer, type: primary, expr: code}
metrics:
  - {name: turnover, label: Sales, type: simple, type_params: {measure: revenue}}
  - {name: revenue, description: all order amounts, type: simple, type_params: {measure: revenue}}
  - {name: revenue_ratio, type: ratio, type_params: {numerator: revenue, denominator: revenue}}
"""


def test_dbt_metricflow_yaml_is_read_as_the_same_objects():
    doc, skipped = parse(METRICFLOW, 65536)
    orders, customers = doc["tables"]
    assert orders["base_table"] == {"table": "sm_orders"}
    assert customers["base_table"] == {"table": "sm_customers"}
    assert orders["primary_key"] == {"columns": ["order_id"]}
    assert orders["dimensions"] == [{"name": "status", "expr": "status"}]
    assert orders["time_dimensions"] == [{"name": "ordered_at", "expr": "ordered_at"}]
    assert orders["metrics"] == [
        {"name": "revenue", "expr": "SUM(amount)", "description": "all order amounts"},
        {"name": "order_count", "expr": "COUNT(*)"},
        {"name": "turnover", "expr": "SUM(amount)", "synonyms": ["Sales"]},
    ]
    assert doc["relationships"] == [
        {
            "name": "orders_to_customers",
            "left_table": "orders",
            "right_table": "customers",
            "relationship_columns": [{"left_column": "cust_code", "right_column": "code"}],
            "join_type": "left_outer",
            "relationship_type": "many_to_one",
        }
    ]
    assert [(s["name"], s["reason"]) for s in skipped] == [
        ("orders.p90_amount", "agg percentile"),
        ("revenue_ratio", "a ratio metric has no counterpart"),
    ]
