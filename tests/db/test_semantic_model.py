"""The semantic model inside PostgreSQL: a Cortex Analyst YAML the test writes is imported (what
was added, updated and skipped), a question is answered with a metric's expression over a
relationship the catalog does not declare (the prompts and the linking checked on the scripted
loopback server), the export reads back the same model, and every refusal leaves nothing
imported. The gate's side (withheld literals in expressions) is in tests/db/test_safety.py."""

from __future__ import annotations

import json

import psycopg
import pytest
import yaml

from conftest import add_models
from nl2sql_indexer.dev.loopback import Rule

IMPORTER = "nl2sql_sem_importer"
SHOP_SQL = """
CREATE TABLE sm_orders (order_id int PRIMARY KEY, cust_code text NOT NULL,
                        amount numeric NOT NULL, status text, ordered_at date);
CREATE TABLE sm_customers (code text PRIMARY KEY, full_name text, area_code text);
CREATE TABLE sm_areas (acode text PRIMARY KEY, area_name text);
CREATE TABLE sm_secret (secret_id int PRIMARY KEY, secret_note text);
INSERT INTO sm_areas VALUES ('N', 'North'), ('S', 'South');
INSERT INTO sm_customers VALUES ('c1', 'Ann', 'N'), ('c2', 'Bob', 'S'), ('c3', 'Cid', 'N');
INSERT INTO sm_orders VALUES (1, 'c1', 120, 'open', '2026-01-05'), (2, 'c2', 80, 'shipped',
    '2026-02-01'), (3, 'c3', 30, 'open', '2026-02-11');
INSERT INTO sm_secret VALUES (1, 'hidden');
"""
MODEL = """
name: shop
description: Orders, customers and their areas
custom_instructions: Amounts are in euros.
tables:
  - name: orders
    description: one row per order
    synonyms: [purchases]
    base_table: {database: SHOPDB, schema: PUBLIC, table: SM_ORDERS}
    primary_key: {columns: [order_id]}
    dimensions:
      - name: order_status
        synonyms: [state]
        expr: status
        data_type: text
        sample_values: [open, shipped]
      - name: broken
        expr: "amount +* ("
      - name: ghost_column
        expr: nosuch + 1
    time_dimensions:
      - name: order_date
        expr: ordered_at
        data_type: date
    facts:
      - name: order_amount
        expr: amount
    metrics:
      - name: total_revenue
        description: the sum of order amounts
        synonyms: [turnover, sales]
        expr: SUM(amount)
      - name: not_aggregated
        expr: amount * 2
    filters:
      - name: big_orders
        expr: amount > 100
  - name: customers
    base_table: {database: SHOPDB, schema: public, table: sm_customers}
    dimensions:
      - name: customer_name
        expr: full_name
  - name: areas
    base_table: {schema: public, table: sm_areas}
    dimensions:
      - name: area_name
        synonyms: [region]
        expr: area_name
  - name: ghosts
    base_table: {schema: public, table: no_such_table}
    dimensions: [{name: x, expr: y}]
relationships:
  - name: orders_to_customers
    left_table: orders
    right_table: customers
    relationship_columns: [{left_column: cust_code, right_column: code}]
    join_type: left_outer
    relationship_type: many_to_one
  - name: customers_to_areas
    left_table: customers
    right_table: areas
    relationship_columns: [{left_column: area_code, right_column: acode}]
    join_type: inner
    relationship_type: many_to_one
  - name: orders_to_ghosts
    left_table: orders
    right_table: ghosts
    relationship_columns: [{left_column: cust_code, right_column: code}]
verified_queries:
  - name: revenue_by_area
    question: What is the total order amount of each area name?
    sql: >-
      SELECT a.area_name, SUM(o.amount) FROM __orders o JOIN __customers c
      ON o.cust_code = c.code JOIN __areas a ON c.area_code = a.acode GROUP BY a.area_name
    verified_by: analyst
"""
SEMANTIC_TABLES = ("semantic_table", "semantic_model")


def wipe(conn) -> None:
    for t in SEMANTIC_TABLES:
        conn.execute(f"DELETE FROM nl2sql.{t}")
    conn.execute("DELETE FROM nl2sql.verified_query")


@pytest.fixture(scope="module")
def shop(demo_conn):
    """The demo database with the shop tables (no foreign keys between them), indexed."""
    demo_conn.execute(SHOP_SQL)
    demo_conn.execute("SELECT nl2sql.reindex()")
    yield demo_conn
    wipe(demo_conn)
    demo_conn.execute("DROP TABLE sm_orders, sm_customers, sm_areas, sm_secret")
    demo_conn.execute("SELECT nl2sql.reindex()")


@pytest.fixture
def sdb(shop, db):
    """The shop database with no semantic model before and after the test."""
    wipe(db)
    yield db
    wipe(db)
    db.execute("SELECT nl2sql.reset_setting('semantic_model_max_bytes')")


def import_model(conn, text: str) -> dict:
    return conn.execute("SELECT nl2sql.import_semantic_model(%s)", (text,)).fetchone()[0]


def names(items: list[dict]) -> set[tuple[str, str]]:
    return {(i["kind"], i["name"]) for i in items}


def count_rows(conn) -> int:
    return conn.execute(
        "SELECT (SELECT count(*) FROM nl2sql.semantic_table) + "
        "(SELECT count(*) FROM nl2sql.semantic_object) + "
        "(SELECT count(*) FROM nl2sql.semantic_relationship) + "
        "(SELECT count(*) FROM nl2sql.semantic_model) + "
        "(SELECT count(*) FROM nl2sql.verified_query)"
    ).fetchone()[0]


def test_import_reports_what_it_added_updated_and_skipped(sdb):
    rep = import_model(sdb, MODEL)
    assert rep["model"] == "shop"
    assert names(rep["added"]) == {
        ("table", "orders"),
        ("table", "customers"),
        ("table", "areas"),
        ("dimension", "orders.order_status"),
        ("time_dimension", "orders.order_date"),
        ("fact", "orders.order_amount"),
        ("metric", "orders.total_revenue"),
        ("filter", "orders.big_orders"),
        ("dimension", "customers.customer_name"),
        ("dimension", "areas.area_name"),
        ("relationship", "orders_to_customers"),
        ("relationship", "customers_to_areas"),
        ("verified_query", "revenue_by_area"),
    }
    skipped = {(s["kind"], s["name"]): s["reason"] for s in rep["skipped"]}
    assert "public.no_such_table does not exist" in skipped[("table", "ghosts")]
    assert "does not parse" in skipped[("dimension", "orders.broken")]
    assert "has no column nosuch" in skipped[("dimension", "orders.ghost_column")]
    assert "must aggregate" in skipped[("metric", "orders.not_aggregated")]
    assert (
        "right_table ghosts is not a table imported"
        in skipped[("relationship", "orders_to_ghosts")]
    )
    assert rep["counts"] == {"added": 13, "updated": 0, "skipped": 5}
    # the objects as stored: the expression as written and resolved against the catalog
    rows = sdb.execute(
        "SELECT name, expr, sql FROM nl2sql.semantic_object ORDER BY name"
    ).fetchall()
    assert ("total_revenue", "SUM(amount)", "SUM(public.sm_orders.amount)") in rows
    assert sdb.execute(
        "SELECT left_table, left_columns, right_table, right_columns, join_type "
        "FROM nl2sql.semantic_relationships WHERE name = 'customers_to_areas'"
    ).fetchone() == ("customers", ["area_code"], "areas", ["acode"], "inner")
    vq = sdb.execute("SELECT sql FROM nl2sql.verified_queries").fetchone()[0]
    assert "sm_orders" in vq and "__orders" not in vq
    # the same model again: every item is updated, none added
    again = import_model(sdb, MODEL)
    assert again["counts"] == {"added": 0, "updated": 13, "skipped": 5}


def test_a_question_uses_a_metric_and_undeclared_relationships(sdb, llm):
    import_model(sdb, MODEL)
    sdb.execute("DELETE FROM nl2sql.verified_query")  # the model's call, not the fast path
    sdb.execute("SELECT nl2sql.set_setting('presql_votes', 'off')")
    add_models(sdb, llm, ["m1", "m2", "m3"])
    # the PreSQL reads the orders only: linking must add the areas (named) and the customers
    # (the bridge over the two relationships the catalog does not declare)
    llm.add_rule(Rule(model="m1", response="SELECT SUM(amount) FROM sm_orders"))
    answer = (
        "SELECT a.area_name, SUM(o.amount) AS revenue FROM sm_orders o JOIN sm_customers c "
        "ON o.cust_code = c.code JOIN sm_areas a ON c.area_code = a.acode "
        "GROUP BY a.area_name ORDER BY a.area_name"
    )
    llm.set_default(answer)
    q = "What is the turnover per region?"
    trace = sdb.execute("SELECT nl2sql.explain(%s)", (q,)).fetchone()[0]
    named = {(n["kind"], n["name"], n["phrase"]) for n in trace["semantic_model"]["named"]}
    assert named == {("metric", "total_revenue", "turnover"), ("dimension", "area_name", "region")}
    why = trace["linking"]["why"]
    assert any("semantic metric total_revenue" in w for w in why["sm_orders"])
    assert any("semantic dimension area_name" in w for w in why["sm_areas"])
    assert any("fk bridge" in w for w in why["sm_customers"]), why
    assert {"sm_orders", "sm_customers", "sm_areas"} <= set(trace["linked_tables"])
    assert "metric sm_orders.total_revenue" in trace["semantic_model"]["shown"]
    assert set(trace["semantic_model"]["relationships"]) == {
        "orders_to_customers",
        "customers_to_areas",
    }
    prompts = [r["messages"][-1]["content"] for r in llm.requests]
    assert len(prompts) == 4  # PreSQL and three FinSQL
    for p in prompts:
        assert "-- metric sm_orders.total_revenue: SUM(sm_orders.amount) -- the sum of" in p
        assert "(also: turnover, sales)" in p
        assert (
            "FOREIGN KEY (cust_code) REFERENCES sm_customers(code) -- relationship "
            "orders_to_customers, many_to_one, left_outer join"
        ) in p
        assert "FOREIGN KEY (area_code) REFERENCES sm_areas(acode) -- relationship" in p
    assert trace["sql"].startswith("SELECT a.area_name")
    rows = sdb.execute(trace["sql"]).fetchall()
    assert [(r[0], float(r[1])) for r in rows] == [("North", 150.0), ("South", 80.0)]
    # retrieve() shows the same without a model
    r = sdb.execute("SELECT nl2sql.retrieve(%s)", (q,)).fetchone()[0]
    assert "-- metric sm_orders.total_revenue" in r["presql_prompt"]
    assert r["semantic_model"]["named"]


def test_export_writes_the_model_back_and_reimports_to_the_same(sdb):
    import_model(sdb, MODEL)
    first = sdb.execute("SELECT nl2sql.export_semantic_model()").fetchone()[0]
    doc = yaml.safe_load(first)
    assert doc["name"] == "shop" and doc["custom_instructions"] == "Amounts are in euros."
    orders = next(t for t in doc["tables"] if t["name"] == "orders")
    assert orders["base_table"]["schema"] == "public"
    assert orders["base_table"]["table"] == "sm_orders"
    assert orders["primary_key"] == {"columns": ["order_id"]}
    assert orders["metrics"] == [
        {
            "name": "total_revenue",
            "synonyms": ["turnover", "sales"],
            "description": "the sum of order amounts",
            "expr": "SUM(amount)",
        }
    ]
    assert orders["dimensions"][0]["sample_values"] == ["open", "shipped"]
    rel = next(r for r in doc["relationships"] if r["name"] == "customers_to_areas")
    assert rel["relationship_columns"] == [{"left_column": "area_code", "right_column": "acode"}]
    assert [q["question"] for q in doc["verified_queries"]] == [
        "What is the total order amount of each area name?"
    ]
    for t in SEMANTIC_TABLES:
        sdb.execute(f"DELETE FROM nl2sql.{t}")
    rep = import_model(sdb, first)
    assert rep["skipped"] == [] and rep["counts"]["added"] == 12  # the verified query: updated
    assert sdb.execute("SELECT nl2sql.export_semantic_model()").fetchone()[0] == first


BAD_MODELS = [
    ("", "is empty"),
    ("tables: [unclosed", "not valid YAML"),
    ("just: a mapping", "not a semantic model"),
    ("- a\n- b", "not a semantic model"),
    ("name: m\ntables: []", "not a semantic model"),
    ("tables:\n  - name: t\n    base_table: {table: sm_orders}", "has no name"),
    ("name: m\ntables:\n  - name: t\n    metrics: oops", r"metrics of tables\[0\] must be a list"),
    ("metrics:\n  - name: revenue", "dbt MetricFlow metrics without their semantic_models"),
]


@pytest.mark.parametrize("text, says", BAD_MODELS)
def test_a_text_that_is_not_a_semantic_model_is_refused(sdb, text, says):
    with pytest.raises(psycopg.Error, match=f"nl2sql.import_semantic_model: .*{says}"):
        import_model(sdb, text)
    assert count_rows(sdb) == 0


def with_object(kind: str, expr: str) -> str:
    """MODEL's orders table (and customers before it) with one more object of ``kind``."""
    doc = yaml.safe_load(MODEL)
    doc["tables"][0].setdefault(kind + "s", []).append({"name": "bad_one", "expr": expr})
    return yaml.safe_dump(doc)


@pytest.mark.parametrize(
    "kind, expr, says",
    [
        ("metric", "SUM(amount) + random()", "metric orders.bad_one: volatile function random"),
        ("dimension", "DELETE FROM sm_orders", "expected an SQL expression"),
        ("filter", "amount > 1; DROP TABLE sm_orders", "a second statement after .;.: DROP"),
        ("metric", "SUM(amount) + nextval('x')", "not allowed"),
    ],
)
def test_an_unsafe_expression_refuses_the_whole_import(sdb, kind, expr, says):
    with pytest.raises(psycopg.Error, match=f"nl2sql.import_semantic_model: .*{says}"):
        import_model(sdb, with_object(kind, expr))
    assert count_rows(sdb) == 0  # nothing half-imported: the tables before it are gone too
    assert sdb.execute("SELECT count(*) FROM sm_orders").fetchone()[0] == 3


# "close the expression, then a statement": however the expression before it ends (a
# parenthesis, a string, a comment), a statement refuses the whole import — with or without
# the semicolon, whatever the statement (write, transaction control, query, DO)
STATEMENT_SHAPES = [
    ("dimension", "status); DROP TABLE sm_orders; --"),
    ("metric", "SUM(amount)); DELETE FROM sm_orders; --"),
    ("filter", "status = 'open'); UPDATE sm_orders SET amount = 0; --"),
    ("fact", "amount /* ) */); COMMIT; --"),
    ("metric", "SUM(amount)) FROM sm_orders; DROP TABLE sm_orders; --"),
    ("time_dimension", "ordered_at);SELECT pg_sleep(10);--"),
    ("filter", "amount > 1); DO $$ BEGIN PERFORM 1; END $$; --"),
    ("dimension", "status)\n;\nTRUNCATE sm_orders"),
    ("dimension", "status) DROP TABLE sm_orders --"),
    ("filter", "(amount > 1)) DELETE FROM sm_orders"),
    ("dimension", "status) UNION SELECT secret_note FROM sm_secret --"),
]


@pytest.mark.parametrize("kind, expr", STATEMENT_SHAPES)
def test_a_statement_after_the_expression_refuses_the_whole_import(sdb, kind, expr):
    with pytest.raises(
        psycopg.Error,
        match=f"nl2sql.import_semantic_model: {kind} orders.bad_one: expected one SQL "
        "expression, but it holds a (second statement after ';'|statement after the expression)",
    ):
        import_model(sdb, with_object(kind, expr))
    assert count_rows(sdb) == 0
    assert sdb.execute("SELECT count(*), sum(amount) FROM sm_orders").fetchone() == (3, 230)


@pytest.mark.parametrize(
    "expr",
    [
        "status'); DROP TABLE sm_orders; --",  # the quote opens a literal that never closes
        "status -- ); DROP TABLE sm_orders",  # all of it after -- is a comment
        "status /* /* */ ); DROP TABLE sm_orders; */",  # nested comments, as PostgreSQL nests
    ],
)
def test_a_statement_inside_a_literal_or_comment_is_none(sdb, expr):
    rep = import_model(sdb, with_object("dimension", expr))
    expected = {("dimension", "orders.bad_one")}
    if "'" in expr:  # an unclosed literal does not parse: skipped, the rest imported
        assert expected <= names(rep["skipped"]) and rep["counts"]["added"] == 13
    else:  # a comment: the expression is `status`
        assert expected <= names(rep["added"])
    assert sdb.execute("SELECT count(*) FROM sm_orders").fetchone()[0] == 3


def test_a_huge_model_is_refused_before_it_is_read(sdb):
    sdb.execute("SELECT nl2sql.set_setting('semantic_model_max_bytes', '2048')")
    huge = MODEL + "\n# " + "x" * 3000
    with pytest.raises(psycopg.Error, match="more than setting semantic_model_max_bytes .2048."):
        import_model(sdb, huge)
    assert count_rows(sdb) == 0
    sdb.execute("SELECT nl2sql.set_setting('semantic_model_max_bytes', '65536')")
    assert import_model(sdb, MODEL)["counts"]["added"] == 13


@pytest.fixture
def importer(cluster, sdb):
    """A connection as an ordinary role allowed to import, reading the shop tables but not
    sm_secret."""
    sdb.execute(
        f"DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{IMPORTER}') "
        f"THEN CREATE ROLE {IMPORTER} LOGIN; END IF; END$$"
    )
    sdb.execute(f"GRANT SELECT ON sm_orders, sm_customers, sm_areas TO {IMPORTER}")
    sdb.execute(
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA nl2sql TO {IMPORTER}"
    )
    sdb.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA nl2sql TO {IMPORTER}")
    sdb.execute(f"GRANT EXECUTE ON FUNCTION nl2sql.import_semantic_model(text) TO {IMPORTER}")
    conn = cluster.connect("nl2sql_test", user=IMPORTER)
    yield conn
    conn.close()
    sdb.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA nl2sql FROM {IMPORTER}")
    sdb.execute(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA nl2sql FROM {IMPORTER}")
    sdb.execute(f"REVOKE ALL ON sm_orders, sm_customers, sm_areas FROM {IMPORTER}")
    sdb.execute(f"REVOKE EXECUTE ON FUNCTION nl2sql.import_semantic_model(text) FROM {IMPORTER}")


def test_the_importing_role_may_use_only_what_it_may_read(sdb, importer):
    sub = "(SELECT count(*) FROM sm_secret) > 0"
    with pytest.raises(psycopg.Error, match="nl2sql.import_semantic_model: .*sm_secret"):
        import_model(importer, with_object("filter", sub))
    doc = yaml.safe_load(MODEL)
    doc["tables"].append({"name": "secrets", "base_table": {"table": "sm_secret"}})
    with pytest.raises(psycopg.Error, match="may not SELECT sm_secret"):
        import_model(importer, yaml.safe_dump(doc))
    assert count_rows(sdb) == 0
    # what it may read imports, and the same object over sm_secret is accepted for the owner
    assert import_model(importer, MODEL)["counts"]["added"] == 13
    assert import_model(sdb, with_object("filter", sub))["counts"]["added"] == 1


def test_import_and_export_are_not_for_public(sdb, cluster):
    for fn in ("import_semantic_model(text)", "export_semantic_model()"):
        granted = sdb.execute(
            "SELECT has_function_privilege('public', %s, 'EXECUTE')", (f"nl2sql.{fn}",)
        ).fetchone()[0]
        assert granted is False, fn
    assert json.loads(json.dumps(import_model(sdb, MODEL)))["model"] == "shop"


METRICFLOW = """
semantic_models:
  - name: orders
    model: ref('sm_orders')
    entities:
      - {name: order, type: primary, expr: order_id}
      - {name: customer, type: foreign, expr: cust_code}
    dimensions:
      - {name: status, type: categorical}
    measures:
      - {name: revenue, agg: sum, expr: amount}
  - name: customers
    model: ref('sm_customers')
    entities:
      - {name: customer, type: primary, expr: code}
metrics:
  - {name: turnover, type: simple, type_params: {measure: revenue}}
  - {name: share, type: ratio, type_params: {numerator: turnover, denominator: turnover}}
"""


def test_dbt_metricflow_yaml_imports_as_the_same_objects(sdb):
    rep = import_model(sdb, METRICFLOW)
    assert names(rep["added"]) == {
        ("table", "orders"),
        ("table", "customers"),
        ("dimension", "orders.status"),
        ("metric", "orders.revenue"),
        ("metric", "orders.turnover"),
        ("relationship", "orders_to_customers"),
    }
    assert [(s["name"], s["reason"]) for s in rep["skipped"]] == [
        ("share", "a ratio metric has no counterpart")
    ]
    assert sdb.execute(
        "SELECT sql FROM nl2sql.semantic_objects o JOIN nl2sql.semantic_object s USING (id) "
        "WHERE o.name = 'turnover'"
    ).fetchone() == ("SUM(public.sm_orders.amount)",)
    doc = yaml.safe_load(sdb.execute("SELECT nl2sql.export_semantic_model()").fetchone()[0])
    assert doc["relationships"][0]["relationship_columns"] == [
        {"left_column": "cust_code", "right_column": "code"}
    ]


def test_keys_json_cannot_hold_are_kept_as_text(sdb):
    # a key YAML reads as a date (or a number) is kept for export under its text, not an
    # internal error while the kept keys are stored as JSON
    doc = MODEL.replace("    primary_key:", "    2026-01-05: launch day\n    primary_key:", 1)
    assert import_model(sdb, doc)["counts"]["added"] == 13
    out = yaml.safe_load(sdb.execute("SELECT nl2sql.export_semantic_model()").fetchone()[0])
    orders = next(t for t in out["tables"] if t["name"] == "orders")
    assert orders["2026-01-05"] == "launch day"
