"""The gallery of docs/charts.md: charts of the demo concert database asked through
``nl2sql.connect(dsn).chart`` beside the database (a loopback model answers each question with
the SQL below), and charts of nvBench requests picked from ``bench/charts.py --out``'s specs;
each drawn to PNG with vl-convert (``nl2sql.charts.render``) into docs/images/charts/.

  python bench/chart_gallery.py --nvbench /tmp/charts_all.jsonl [--datadir DIR]"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "py_udf"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "indexer"))

import common as C
from nl2sql.charts import render
from nl2sql.client import connect
from nl2sql.client.install import install
from nl2sql_indexer.dev.demo_data import demo_sql
from nl2sql_indexer.dev.loopback import LoopbackLLM

OUT = Path(__file__).resolve().parent.parent / "docs" / "images" / "charts"
DB = "nl2sql_chart_gallery"
DEMO = {
    "demo_line": (
        "Show the trend of concerts per year",
        "SELECT year, count(*) AS concerts FROM concert GROUP BY year ORDER BY year",
    ),
    "demo_bar": (
        "How many singers come from each country?",
        "SELECT country, count(*) AS singers FROM singer GROUP BY country",
    ),
    "demo_pie": (
        "Show the share of concerts per stadium as a pie chart",
        "SELECT s.name AS stadium, count(*) AS concerts FROM concert c "
        "JOIN stadium s ON s.stadium_id = c.stadium_id GROUP BY s.name",
    ),
    "demo_scatter": (
        "Capacity against average attendance of the stadiums",
        "SELECT capacity, average FROM stadium",
    ),
    "demo_stacked": (
        "Singers per country and gender",
        "SELECT country, CASE WHEN is_male THEN 'male' ELSE 'female' END AS gender, "
        "count(*) AS singers FROM singer GROUP BY 1, 2",
    ),
    "demo_none": ("How many singers do we have?", "SELECT count(*) FROM singer"),
}
NVBENCH = ["bar", "pie", "line", "scatter", "grouping scatter", "binned", "by day unasked"]


def demo_specs(datadir: Path | None) -> dict[str, dict]:
    """The demo questions charted beside the database."""
    cluster = C.start_cluster(datadir)
    cluster.create_database(DB, drop=True)
    with cluster.connect(DB) as conn:
        conn.execute("CREATE EXTENSION vector; CREATE EXTENSION pg_trgm")
        conn.execute(demo_sql())
    install(cluster.dsn(DB), say=lambda _m: None)
    out = {}
    with LoopbackLLM() as llm:
        llm.set_replay("m", dict(DEMO.values()))
        with cluster.connect(DB) as conn:
            conn.execute("SELECT nl2sql.add_model('m', 'm', base_url => %s)", (llm.base_url,))
        with connect(cluster.dsn(DB)) as client:
            client.reindex()
            for name, (q, _sql) in DEMO.items():
                out[name] = client.chart(q)
    return out


def nvbench_specs(path: Path) -> dict[str, dict]:
    """One request of each kind from ``bench/charts.py --out``, type and data right."""
    out: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        kind = "binned" if r["spec"]["usermeta"].get("binning") else r["gold"]
        if r["spec"]["usermeta"].get("binning") == "day" and " day" not in r["q"].lower():
            kind = "by day unasked"  # counts per timestamp, several a day
        if kind in NVBENCH and r["type"] and r["data"] and f"nvbench_{kind}" not in out:
            out[f"nvbench_{kind}".replace(" ", "_")] = r["spec"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nvbench", type=Path, help="bench/charts.py --out's JSONL")
    ap.add_argument("--out", type=Path, default=OUT, help="where the PNGs go")
    ap.add_argument("--datadir", type=Path, default=None, help="the cluster's data directory")
    args = ap.parse_args()
    specs = demo_specs(args.datadir)
    if args.nvbench:
        specs.update(nvbench_specs(args.nvbench))
    args.out.mkdir(parents=True, exist_ok=True)
    for name, spec in specs.items():
        render.write(spec, args.out / f"{name}.png")
        meta = spec["usermeta"]
        print(f"{name}.png  {meta['chart']:<12} {meta.get('reason')}  {meta.get('notes')}")
    print(f"RESULT chart_gallery images={len(specs)} out={args.out}")


if __name__ == "__main__":
    main()
