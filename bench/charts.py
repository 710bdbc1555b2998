"""nvBench on the visible Spider databases: ``nl2sql.chart`` with the gold SQL as the model's
answer (one loopback model replays nvBench's SQL part, SQLite dialect, which the pipeline
transpiles), scored against nvBench's gold chart: chart type, axes (x, y and colour fields in
the gold's column order, the date binning) and data after nvBench's normalisation (NULLs
dropped, dates cut, duplicates removed, empty bins dropped, numbers to 4 significant digits).

The replayed SQL is nvBench's ``sql_part`` with what SQLite tolerates and PostgreSQL refuses
made explicit (sqlglot): a select that aggregates gets a ``GROUP BY`` of its other selected
columns (SQLite takes an arbitrary row's value of a bare column; for a ``BIN`` item the chart
then bins the dates, as ``BIN`` does), a nested aggregate (``SUM(avg(x))``) keeps its inner
one, and a grouping chart's group column is selected last. Numbers of 10 or more are compared
as their whole part (nvBench cuts binned aggregates). Each request is asked with its own
chart's SQL (15 pairs of charts share a request's words).

The gold's own check, by PostgreSQL alone: each chart's replayed SQL run directly, its first
column put in the ``BIN`` unit (a timestamp without one cut to its date) and the measure
aggregated per bin, its rows normalised as above. Where they are not nvBench's data, the data
came from elsewhere (nvBench drew them from the Spider query its VQL was made from, whose
DISTINCT, HAVING or per-id grouping the VQL dropped) and no chart of that SQL can match them:
``data_reproduced`` is the data figure over the requests whose gold passes this check, and
``named_type_runs`` the named chart's type over those whose SQL PostgreSQL runs.

  bash scripts/dev_locked.sh python bench/charts.py --data ../shared/bench-data [--per-vis 1]
  python bench/charts.py --beside ...   (nl2sql installed beside each database, no PL/Python:
                                          the pipeline in this process, nl2sql.connect().chart)
  ... --live 1.5b --per-vis 1 --charts-per-db 8 [--set examples_when=on_failure]
      a REAL MODEL writes the SQL (Qwen2.5-Coder-1.5B- or 0.5B-Instruct in llama.cpp's
      llama-server on this CPU, bench/live.py's server; small models: their figures are
      theirs); each request also scored by execution accuracy (its chosen SQL's rows against
      the gold SQL's, bench/common.py's rule)

Prints per-class figures, the misses by class, and a last line starting ``RESULT``."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "py_udf"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "indexer"))

import psycopg
import sqlglot
from sqlglot import exp

import common as C
from live import MODELS, Server, free_port
from nl2sql.client import connect
from nl2sql.client.install import install
from nl2sql_indexer.dev.llama_models import fetch
from nl2sql_indexer.dev.loopback import LoopbackLLM

MODEL = "gold"
_NAMES_A_CHART = re.compile(r"\b(chart|plot|graph)s?\b", re.I)
_DAY_NAMES = {"thur": "thu", "thurs": "thu", "tues": "tue", "weds": "wed"}
_KIND = {"grouping line": "grouped line", "grouping scatter": "scatter"}


def _parse(sql_part: str) -> tuple[exp.Expression, str | None]:
    """The SQL part parsed, and the group column nvBench's VQL sometimes writes after it
    ("... ) name BIN ..."), which is selected last and grouped by."""
    try:
        return sqlglot.parse_one(sql_part, read="sqlite"), None
    except sqlglot.errors.ParseError:
        m = re.match(r"^(.*\))\s+(\w+)\s*$", sql_part.strip(), re.S)
        if not m:
            raise
        return sqlglot.parse_one(m.group(1), read="sqlite"), m.group(2)


def _group_bare_columns(sel: exp.Select) -> None:
    """SQLite's grouping made explicit (it takes an arbitrary row's value of a bare column;
    nvBench's data come from SQLite): a select that aggregates without ``GROUP BY`` groups by
    its other columns (a ``BIN`` item's dates, binned by the chart); in one with ``GROUP BY``,
    a bare selected or ordered-by column becomes ``min(column)``, one row's value per group."""
    group = sel.args.get("group")
    if not group:
        if any(e.find(exp.AggFunc) for e in sel.expressions):
            plain = [e.unalias() for e in sel.expressions if not e.find(exp.AggFunc)]
            if plain:
                sel.group_by(*[p.copy() for p in plain], copy=False)
        return
    grouped = {g.sql().lower() for g in group.expressions}
    grouped |= {g.name.lower() for g in group.expressions if isinstance(g, exp.Column)}
    order = sel.args.get("order")
    targets = list(sel.expressions) + [o.this for o in (order.expressions if order else [])]
    for t in targets:
        col = t.this if isinstance(t, exp.Alias) else t
        bare = isinstance(col, exp.Column) and col.sql().lower() not in grouped
        if bare and col.name.lower() not in grouped:
            wrapped = exp.Min(this=col.copy())
            col.replace(
                exp.alias_(wrapped, col.name) if t is col and t in sel.expressions else wrapped
            )


def replay_sql(item: dict) -> str:
    """nvBench's SQL part as PostgreSQL will take it (module docstring)."""
    try:
        tree, extra = _parse(item["sql_part"])
    except sqlglot.errors.ParseError:
        return item["sql_part"]
    for agg in list(tree.find_all(exp.AggFunc)):
        inner = agg.this.find(exp.AggFunc) if isinstance(agg.this, exp.Expression) else None
        if inner is not None and agg.parent is not None:
            agg.replace(inner)
    sel = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    grouping = item["chart"].startswith("grouping") or item["chart"] == "stacked bar"
    group = sel.args.get("group")
    if extra:
        sel.select(exp.column(extra), copy=False)
    elif grouping and group and len(sel.expressions) == 2:
        sel.select(group.expressions[0].copy(), copy=False)
    for s in tree.find_all(exp.Select):
        _group_bare_columns(s)
    return tree.sql(dialect="sqlite")


def _norm(v) -> object:
    if v is None:
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float):  # nvBench cuts binned aggregates to whole numbers
        return float(int(v)) if abs(v) >= 10 else float(f"{float(v):.4g}")
    t = str(v).strip()
    if t.lower() in _DAY_NAMES:  # nvBench writes "Thur", "Tues"
        return _DAY_NAMES[t.lower()]
    if re.match(r"^\d{4}-01-01$", t):
        return float(t[:4])
    if re.match(r"^\d{4}-\d{2}-\d{2}", t):
        return t[:10]
    try:
        return _norm(float(t))
    except ValueError:
        return t.lower()


def _cells(rows: list[dict], fields: list[str | None], binned: bool) -> set[tuple]:
    out = set()
    for r in rows:
        t = tuple(_norm(r.get(f)) if f else None for f in fields)
        if any(v is None for v, f in zip(t, fields) if f):
            continue
        if binned and t[1] == 0:
            continue
        out.add(t)
    return out


def _fields(spec: dict) -> tuple[str | None, str | None, str | None]:
    enc = spec.get("encoding", {})

    def f(ch):
        return (enc.get(ch) or {}).get("field", "").replace("\\", "") or None

    if "theta" in enc:
        return f("color"), f("theta"), None
    return f("x"), f("y"), f("color")


def _unit(item: dict) -> str | None:
    """The request's BIN unit (``year``, ``month``, ``weekday``, ``day``), or None."""
    return (item["binning"] or {}).get("unit", "").lower() or None


def _data_sets(item: dict, values: list[dict], fields: list[str | None], by_day: bool):
    """nvBench's gold data and ``values`` (read at ``fields``: x, y and, where the gold has
    one, the colour) as comparable sets after nvBench's normalisation. ``by_day``: the values'
    x is already the day of the month (the reference's), not a date."""
    gold_color = "classify" in json.dumps(item["vega_lite"]["encoding"])
    unit = _unit(item)
    gold_rows = item["vega_lite"]["data"]["values"]
    g = _cells(gold_rows, ["x_data", "y_data", "classify" if gold_color else None], bool(unit))
    o = _cells(values, fields[:2] + [fields[2] if gold_color else None], bool(unit))
    if unit == "day":  # nvBench's DAY bin is the day of the month ("24th")
        g = {(re.sub(r"\D", "", str(a)), b, c) for a, b, c in g}
        if by_day:
            o = {(str(int(a)), b, c) for a, b, c in o}
        else:
            o = {(str(int(str(a)[8:10])) if len(str(a)) >= 10 else a, b, c) for a, b, c in o}
    return g, o


def judge(item: dict, spec: dict) -> dict[str, bool]:
    """Chart type, axes and data of our spec against the gold's."""
    meta = spec.get("usermeta", {})
    gold_kind = _KIND.get(item["chart"], item["chart"])
    gold_color = "classify" in json.dumps(item["vega_lite"]["encoding"])
    kind_ok = meta.get("chart") == gold_kind
    cols = meta.get("columns") or []
    x, y, color = _fields(spec)
    unit = _unit(item)
    ours_bin = meta.get("binning")
    # a year column given once per year needs no binning; nvBench cuts datetimes to dates, so
    # its unbinned data of a timestamp column are binned by day
    bin_ok = ours_bin == unit or (unit, ours_bin) in (("year", None), (None, "day"))
    want = cols[:3] if gold_color else cols[:2]
    got = [x, y, color] if gold_color else [x, y]
    if not gold_color and color is not None:
        got.append(color)
    axes_ok = kind_ok and got == want and bin_ok
    g, o = _data_sets(item, spec.get("data", {}).get("values", []), [x, y, color], False)
    return {"type": kind_ok, "axes": axes_ok, "data": g == o}


# nvBench's BIN units in PostgreSQL, for the reference (labels as nvBench's after _norm)
_BIN_SQL = {
    "year": "EXTRACT(YEAR FROM {x})",
    "month": "TO_CHAR({x}, 'Mon')",
    "weekday": "TO_CHAR({x}, 'Dy')",
    "day": "EXTRACT(DAY FROM {x})",
}


def _binned_sql(pg_sql: str, unit: str | None) -> str | None:
    """The replayed SQL (PostgreSQL) with its first column, a date, put in nvBench's bin (or,
    unbinned, cut to its date) where it is selected, grouped and ordered by; None where the
    SQL is not one select."""
    tree = sqlglot.parse_one(pg_sql, read="postgres")
    if not isinstance(tree, exp.Select):
        return None
    x = tree.expressions[0].unalias()
    text = x.sql(dialect="postgres")
    binned = sqlglot.parse_one(
        _BIN_SQL[unit].format(x=text) if unit else f"CAST({text} AS DATE)", read="postgres"
    )
    tree.expressions[0].replace(exp.alias_(binned.copy(), "x"))
    for key in ("group", "order"):
        for node in list((tree.args.get(key) or exp.Tuple()).find_all(type(x))):
            if node.sql(dialect="postgres") == text:
                node.replace(binned.copy())
    return tree.sql(dialect="postgres")


def reference(conn, item: dict) -> tuple[list[tuple] | None, str]:
    """nvBench's chart data as its own SQL gives them, computed by PostgreSQL alone (no
    nl2sql): the replayed SQL, its first column put in the request's ``BIN`` unit (a
    timestamp without one cut to its date: nvBench cuts datetimes) with the measure
    aggregated over the bin's rows.

    Args:
        conn: a connection to the request's database, its search path set.
        item: the nvBench visualization.

    Returns:
        ``(rows, why)``: the rows (x, y[, colour]), or None with why not — PostgreSQL refuses
        the SQL, or it bins a column that is not a date (nvBench bins integer years by
        weekday)."""
    unit = _unit(item)
    try:
        tree = sqlglot.parse_one(replay_sql(item), read="sqlite")
        for col in list(tree.find_all(exp.Column)):  # SQLite's "text" is a string there
            if not col.table and col.this.args.get("quoted"):
                col.replace(exp.Literal.string(col.name))
        pg = tree.sql(dialect="postgres")
        rows = conn.execute(pg).fetchall()
        first = [r[0] for r in rows if r[0] is not None]
        timed = any(isinstance(v, dt.datetime) for v in first)
        dated = first and all(isinstance(v, dt.date) for v in first)
        if unit is None and not timed:
            return rows, ""
        if unit and not dated and not (unit == "year" and all(isinstance(v, int) for v in first)):
            return None, "bins a column that is not a date"
        if unit == "year" and not dated:
            return rows, ""
        sql = _binned_sql(pg, unit)
        if sql is None:
            return None, "not one select"
        return conn.execute(sql).fetchall(), ""
    except (psycopg.Error, sqlglot.errors.SqlglotError) as e:
        conn.rollback()
        return None, f"PostgreSQL refuses it ({type(e).__name__})"


REPRODUCED = "its SQL's rows"


def gold_data(conn, item: dict) -> str:
    """What nvBench's gold data are, against its own SQL's rows (:func:`reference`) after
    its normalisation: :data:`REPRODUCED`, "not its SQL's rows" (nvBench drew them from the
    Spider query its VQL was made from, whose DISTINCT, HAVING or grouping the VQL dropped),
    or why its SQL gives no rows to compare."""
    try:
        rows, why = reference(conn, item)
        if rows is None:
            return why
        values = [dict(zip(("x", "y", "c"), r)) for r in rows]
        unit = _unit(item)
        g, o = _data_sets(item, values, ["x", "y", "c"], unit == "day")
    except Exception as e:  # noqa: BLE001 - a gold of a shape the check does not read: said
        conn.rollback()
        return f"not checked ({type(e).__name__})"
    return REPRODUCED if g == o else "not its SQL's rows"


def setup(cluster, llm, data: Path, db: str, items: list[dict], beside: bool, live=None) -> str:
    """One Spider database loaded, indexed, its requests' gold SQL on the loopback (or, with
    ``live``, a ``(name, base_url, settings)`` real model added instead)."""
    dump = data / "spider_dev" / "pg_dumps" / f"{db}.sql"
    C.load_dump(cluster, db, dump if dump.exists() else data / "pg_dumps" / f"{db}.sql")
    if beside:
        with cluster.connect(db) as conn:
            conn.execute(
                "CREATE EXTENSION IF NOT EXISTS vector; CREATE EXTENSION IF NOT EXISTS pg_trgm"
            )
        install(cluster.dsn(db), say=lambda _m: None)
    answers = {}
    for it in items:
        sql = replay_sql(it)
        for q in it["nl_queries"]:
            answers[q] = sql
    llm.set_replay(MODEL, answers)
    with cluster.connect(db) as conn:
        schemas = list(C.user_schemas(conn))
        if not beside:
            conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
        conn.execute("SELECT nl2sql.set_setting('schemas', %s)", (",".join(schemas),))
        if not beside:
            conn.execute("SELECT nl2sql.reindex()")
        conn.execute("DELETE FROM nl2sql.model")
        if live is None:
            conn.execute(
                "SELECT nl2sql.add_model(%s, %s, base_url => %s, dialect => 'sqlite')",
                (MODEL, MODEL, llm.base_url),
            )
        else:
            name, url, settings = live
            conn.execute(
                "SELECT nl2sql.add_model(%s, %s, base_url => %s, timeout_s => 300)",
                (name, name, url),
            )
            for k, v in settings:
                conn.execute("SELECT nl2sql.set_setting(%s, %s)", (k, v))
        names = [psycopg.sql.Identifier(n).as_string(conn) for n in schemas]
    return ", ".join(names + ([] if "public" in schemas else ["public"]))


def _asker(cluster, db: str, beside: bool):
    """``(question, search_path) → spec`` in the server, or beside it in this process."""
    if beside:
        client = connect(cluster.dsn(db))
        client.reindex()
        return lambda q, path: client.chart(q, search_path=path), client
    conn = cluster.connect(db)

    def ask(q: str, path: str) -> dict:
        return conn.execute("SELECT nl2sql.chart(%s, search_path => %s)", (q, path)).fetchone()[0]

    return ask, conn


def run_db(cluster, llm, data, db, items, per_vis, out, beside=False, live=None) -> None:
    path = setup(cluster, llm, data, db, items, beside, live)
    ask, closing = _asker(cluster, db, beside)
    score_conn = cluster.connect(db)
    score_conn.execute(f"SET search_path TO {path}")
    with closing, score_conn:
        for it in items:
            state, sql = gold_data(score_conn, it), replay_sql(it)
            for q in it["nl_queries"][: per_vis or None]:
                if live is None:  # 15 requests' words are another chart's too: each its own
                    llm.set_replay(MODEL, {q: sql})
                named = bool(_NAMES_A_CHART.search(q))
                t0 = time.perf_counter()
                try:
                    spec = ask(q, path)
                except Exception as e:  # noqa: BLE001 - a failed request is a miss, said
                    spec = {"usermeta": {"chart": "error", "reason": str(e).splitlines()[0]}}
                got = judge(it, spec)
                got["s"] = round(time.perf_counter() - t0, 2)
                if live is not None:
                    got["ex"] = _ex(score_conn, it, spec["usermeta"].get("sql"))
                out.append(
                    {
                        "db": db,
                        "vis": it["vis_id"],
                        "q": q,
                        "gold": it["chart"],
                        "named": named,
                        "ours": spec["usermeta"].get("chart"),
                        "reason": spec["usermeta"].get("reason"),
                        "gold_data": state,
                        **got,
                        "spec": spec,
                    }
                )


def _ex(conn, item: dict, sql: str | None) -> bool:
    """The chosen SQL's rows against the gold SQL's (``bench/common.py``'s rule); no SQL or a
    gold the database refuses: False."""
    if not sql:
        return False
    try:
        return C.execution_match(conn, replay_sql(item), sql, role=None)
    except Exception:  # noqa: BLE001 - a gold SQL PostgreSQL refuses scores no match
        conn.rollback()
        return False


def report(out: list[dict], secs: float) -> None:
    n = len(out)
    named = [r for r in out if r["named"]]
    print(
        f"nvBench visible: {n} requests, {len({(r['db'], r['vis']) for r in out})} charts, "
        f"{secs:.0f} s"
    )
    for key in ("type", "axes", "data"):
        ok = sum(r[key] for r in out)
        print(f"  {key:<5} {C.pct(ok, n):5.1f} % ({ok}/{n})")
    nt = sum(r["type"] for r in named)
    print(
        f"  type where the request names the chart: {C.pct(nt, len(named)):.1f} % "
        f"({nt}/{len(named)})"
    )
    by = Counter((r["gold"], r["ours"]) for r in out if not r["type"])
    print("  type misses (gold → ours):", dict(by.most_common(10)))
    for key in ("axes", "data"):
        miss = Counter(r["gold"] for r in out if r["type"] and not r[key])
        print(f"  {key} misses by gold chart (type right):", dict(miss))
    for r in [r for r in out if not r["type"]][:8]:
        print(f"    miss: {r['q'][:90]!r} gold {r['gold']} ours {r['ours']} ({r['reason']})")
    refused = [r for r in out if "no chart: nl2sql:" in (r["reason"] or "")]
    print(f"  gold SQL PostgreSQL refuses (no SQL chosen): {len(refused)} requests")
    mine = [r for r in out if r.get("gold_data") == REPRODUCED]
    dr = sum(r["data"] for r in mine)
    print(
        f"  data where nvBench's data are its own SQL's rows: {C.pct(dr, len(mine)):.1f} % "
        f"({dr}/{len(mine)}); the other requests' gold data:",
        dict(Counter(r.get("gold_data") for r in out if r not in mine)),
    )
    runs = [r for r in named if not (r.get("gold_data") or "").startswith("PostgreSQL refuses")]
    nr = sum(r["type"] for r in runs)
    print(
        f"  type where the request names the chart and its SQL runs: "
        f"{C.pct(nr, len(runs)):.1f} % ({nr}/{len(runs)})"
    )
    t, a, d = (C.pct(sum(r[k] for r in out), n) for k in ("type", "axes", "data"))
    live = ""
    if out and "ex" in out[0]:
        p50 = C.percentile([r["s"] for r in out], 50)
        live = f" ex={C.pct(sum(r['ex'] for r in out), n):.1f} p50_s={p50:.1f}"
    print(
        f"RESULT charts nvbench-visible n={n} type={t:.1f} named_type="
        f"{C.pct(nt, len(named)):.1f} axes={a:.1f} data={d:.1f} named_type_runs="
        f"{C.pct(nr, len(runs)):.1f} data_reproduced={C.pct(dr, len(mine)):.1f}{live}"
    )


def rescore(path: Path, items: list[dict]) -> None:
    """The verdicts of an earlier run's specs (``--out``) judged again, reported."""
    by_id = {i["vis_id"]: i for i in items}
    out = [json.loads(line) for line in path.read_text().splitlines()]
    for r in out:
        r.update(judge(by_id[r["vis"]], r["spec"]))
    report(out, 0.0)


def _live_server(args):
    """bench/live.py's ``llama-server`` for ``--live`` (its log in /tmp)."""
    alias = MODELS[args.live]
    return Server(alias, fetch(alias), free_port(), Path("/tmp"), args.threads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/bench-data"))
    ap.add_argument("--per-vis", type=int, default=0, help="requests per chart (0: all)")
    ap.add_argument("--db", action="append", help="only these databases")
    ap.add_argument("--beside", action="store_true", help="nl2sql beside each database")
    ap.add_argument("--datadir", type=Path, default=None, help="the cluster's data directory")
    ap.add_argument("--rescore", type=Path, help="score the specs of an earlier --out again")
    ap.add_argument("--out", type=Path, help="write each request's verdict and spec (JSONL)")
    ap.add_argument("--live", choices=sorted(MODELS), help="a real model writes the SQL")
    ap.add_argument("--charts-per-db", type=int, default=0, help="charts per database (0: all)")
    ap.add_argument("--threads", type=int, help="llama-server's --threads (live)")
    ap.add_argument("--set", action="append", default=[], help="an nl2sql setting k=v (live)")
    args = ap.parse_args()
    items = [json.loads(x) for x in (args.data / "nvbench" / "nvbench_visible.jsonl").open()]
    if args.rescore:
        rescore(args.rescore, items)
        return
    dbs = sorted({i["db_id"] for i in items} & set(args.db or [i["db_id"] for i in items]))
    cluster = C.start_cluster(args.datadir)
    out: list[dict] = []
    t0 = time.perf_counter()
    server = _live_server(args) if args.live else None
    live = None
    if server is not None:
        live = (server.alias, server.base_url, [kv.split("=", 1) for kv in args.set])
    try:
        with LoopbackLLM() as llm:
            for db in dbs:
                mine = [i for i in items if i["db_id"] == db][: args.charts_per_db or None]
                run_db(cluster, llm, args.data, db, mine, args.per_vis, out, args.beside, live)
                print(f"  {db}: {sum(r['db'] == db for r in out)} requests", flush=True)
    finally:
        if server is not None:
            server.stop()
    if args.out:
        args.out.write_text("".join(json.dumps(r, default=str) + "\n" for r in out))
    report(out, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
