"""The semantic model's cost: importing a Cortex Analyst model of many objects, and what reading
it adds to each question (retrieve()'s ``business_ms``, which holds the semantic model's load),
with and without a model; prints the import report and a question's linking, then a last
``RESULT`` line.

    bash scripts/dev_locked.sh /opt/nl2sql/venv/bin/python bench/semantic_model.py --objects 150

A fresh cluster in a temporary directory (destroyed afterwards), the demo database plus three
tables that no foreign key joins, and the scripted loopback server (no model is reached).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from nl2sql_indexer.cluster import LocalCluster
from nl2sql_indexer.dev.demo_data import demo_sql

TABLES = """
CREATE TABLE sm_orders (order_id int PRIMARY KEY, cust_code text, amount numeric, status text);
CREATE TABLE sm_customers (code text PRIMARY KEY, full_name text, area_code text);
CREATE TABLE sm_areas (acode text PRIMARY KEY, area_name text);
INSERT INTO sm_areas VALUES ('N', 'North'), ('S', 'South');
INSERT INTO sm_customers VALUES ('c1', 'Ann', 'N'), ('c2', 'Bob', 'S');
INSERT INTO sm_orders VALUES (1, 'c1', 120, 'open'), (2, 'c2', 80, 'shipped');
"""
QUESTION = "What is the turnover per region?"


def model(n_objects: int) -> str:
    """A model of the three tables with ``n_objects`` extra metrics on the orders."""
    orders = {
        "name": "orders",
        "base_table": {"schema": "public", "table": "sm_orders"},
        "metrics": [
            {"name": "total_revenue", "synonyms": ["turnover"], "expr": "SUM(amount)"},
            *[{"name": f"m{i}", "expr": f"SUM(amount) * {i}"} for i in range(n_objects)],
        ],
        "filters": [{"name": "big_orders", "expr": "amount > 100"}],
    }
    return yaml.safe_dump(
        {
            "name": "bench",
            "tables": [
                orders,
                {"name": "customers", "base_table": {"table": "sm_customers"}},
                {
                    "name": "areas",
                    "base_table": {"table": "sm_areas"},
                    "dimensions": [
                        {"name": "area_name", "synonyms": ["region"], "expr": "area_name"}
                    ],
                },
            ],
            "relationships": [
                {
                    "name": "orders_to_customers",
                    "left_table": "orders",
                    "right_table": "customers",
                    "relationship_columns": [{"left_column": "cust_code", "right_column": "code"}],
                },
                {
                    "name": "customers_to_areas",
                    "left_table": "customers",
                    "right_table": "areas",
                    "relationship_columns": [{"left_column": "area_code", "right_column": "acode"}],
                },
            ],
        }
    )


def business_ms(conn, n: int) -> float:
    """Median ``business_ms`` of ``n`` retrieve() calls (the PreSQL given: linking runs too)."""
    out = []
    for _ in range(n):
        r = conn.execute(
            "SELECT nl2sql.retrieve(%s, NULL, 'SELECT SUM(amount) FROM sm_orders')", (QUESTION,)
        ).fetchone()[0]
        out.append(r["timings"]["business_ms"])
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=150, help="extra metrics in the model")
    ap.add_argument("--calls", type=int, default=20, help="retrieve() calls per measurement")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="nl2sql-bench-semantic-", dir="/tmp"))
    base.chmod(0o755)
    cluster = LocalCluster(base / "data").start()
    try:
        cluster.create_database("bench_semantic", drop=True)
        conn = cluster.connect("bench_semantic")
        conn.execute(demo_sql())
        conn.execute(TABLES)
        conn.execute("CREATE EXTENSION nl2sql CASCADE")
        conn.execute("SELECT nl2sql.reindex()")
        business_ms(conn, 3)  # warm: the embedding model, plans
        without = business_ms(conn, args.calls)
        text = model(args.objects)
        t = time.perf_counter()
        rep = conn.execute("SELECT nl2sql.import_semantic_model(%s)", (text,)).fetchone()[0]
        import_ms = (time.perf_counter() - t) * 1000
        print("import:", json.dumps(rep["counts"]), f"{len(text)} bytes, {import_ms:.0f} ms")
        with_model = business_ms(conn, args.calls)
        r = conn.execute(
            "SELECT nl2sql.retrieve(%s, NULL, 'SELECT SUM(amount) FROM sm_orders')", (QUESTION,)
        ).fetchone()[0]
        print("named:", json.dumps(r["semantic_model"]["named"]))
        print("linking:", json.dumps(r["linking"]["why"], indent=1))
        print(
            "prompt lines:",
            *[
                ln
                for ln in r["finsql_prompt"].splitlines()
                if "total_revenue" in ln or "REFER" in ln
            ],
            sep="\n  ",
        )
        conn.close()
        print(
            f"RESULT objects={rep['counts']['added']} import_ms={import_ms:.0f} "
            f"business_ms_without={without:.3f} business_ms_with={with_model:.3f}"
        )
    finally:
        cluster.destroy()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
