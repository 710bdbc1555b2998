"""The main job: a local cluster, the demo concert database, the extension, indexing, and the
demo questions answered by ``nl2sql()`` — printed as question → SQL → first rows.

Models: a real OpenAI-compatible endpoint when NL2SQL_LLM_BASE_URL and NL2SQL_LLM_MODEL are set
(key in the variable named by NL2SQL_LLM_API_KEY_ENV, default OPENAI_API_KEY); otherwise the
project's loopback server, whose answers are SCRIPTED (the gold SQL of the demo questions, one
model deliberately wrong) — not a model's. Safe to run twice.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from nl2sql_indexer.cluster import LocalCluster, postgres_can_access
from nl2sql_indexer.dev.demo_data import DEMO_QUESTIONS, demo_sql
from nl2sql_indexer.dev.loopback import LoopbackLLM

ROOT = (
    Path(__file__).resolve().parents[3]
    if (Path(__file__).resolve().parents[3] / "sql").exists()
    else Path.cwd()
)
DEMO_DB = "nl2sql_demo"


def default_datadir() -> Path:
    """``.nl2sql/cluster`` in the project folder, or a folder under /var/tmp when the postgres OS
    user cannot reach the project folder."""
    d = Path(os.environ.get("NL2SQL_DATADIR", Path.cwd() / ".nl2sql" / "cluster"))
    if not postgres_can_access(d.parent.parent if not d.parent.exists() else d.parent):
        d = Path("/var/tmp/nl2sql-demo-cluster")
    return d


def _wrong_variant(sql: str) -> str:
    """A plausible but wrong answer for the scripted third model (so the vote has work to do)."""
    if "count(*)" in sql.lower():
        return sql.replace("count(*)", "count(DISTINCT 1)").replace("COUNT(*)", "COUNT(DISTINCT 1)")
    return sql + " LIMIT 1" if "limit" not in sql.lower() else sql


def configure_models(conn, llm: LoopbackLLM | None) -> str:
    """Configure the demo's models; returns a line saying what answers come from."""
    conn.execute("DELETE FROM nl2sql.model")
    if llm is None:
        conn.execute(
            "SELECT nl2sql.add_model('real', %s, base_url => %s, api_key_env => %s)",
            (
                os.environ["NL2SQL_LLM_MODEL"],
                os.environ["NL2SQL_LLM_BASE_URL"],
                os.environ.get("NL2SQL_LLM_API_KEY_ENV", "OPENAI_API_KEY"),
            ),
        )
        return f"models: real endpoint {os.environ['NL2SQL_LLM_BASE_URL']} ({os.environ['NL2SQL_LLM_MODEL']})"
    gold = dict(DEMO_QUESTIONS)
    llm.set_replay("scripted-a", gold)
    llm.set_replay("scripted-b", gold)
    llm.set_replay("scripted-c", {q: _wrong_variant(s) for q, s in DEMO_QUESTIONS})
    for name in ("scripted-a", "scripted-b", "scripted-c"):
        conn.execute("SELECT nl2sql.add_model(%s, %s, base_url => %s)", (name, name, llm.base_url))
    return (
        "models: NO LLM is reachable here, so the project's loopback server answers with "
        "SCRIPTED SQL (the demo's reference answers; scripted-c is deliberately wrong "
        "sometimes) — this shows the pipeline and the vote, not a model's accuracy"
    )


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The demo's command line: ``--datadir`` and ``--rows``."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--datadir", type=Path, default=None, help="cluster folder (default .nl2sql/cluster)"
    )
    ap.add_argument("--rows", type=int, default=3, help="rows to print per answer")
    ap.add_argument(
        "--beside",
        action="store_true",
        help="run nl2sql beside the database: a database without PL/Python, owned by a "
        "non-superuser role, nl2sql install and the Python API (docs/install.md)",
    )
    return ap.parse_args(argv)


def _start_cluster(datadir: Path | None) -> LocalCluster:
    """Start the local cluster and say where it runs and how to stop it."""
    cluster = LocalCluster(datadir or default_datadir())
    cluster.start()
    print(
        f"cluster: {cluster.datadir} on 127.0.0.1:{cluster.port} "
        f"(stop: bash scripts/stop.sh, or pg_ctl -D {cluster.datadir} stop as user postgres)"
    )
    return cluster


def _real_endpoint_configured() -> bool:
    """Whether the environment names a real OpenAI-compatible endpoint and model."""
    return bool(os.environ.get("NL2SQL_LLM_BASE_URL") and os.environ.get("NL2SQL_LLM_MODEL"))


def _ask(conn, question: str, n_rows: int) -> bool:
    """Ask one demo question and print its SQL, confidence and first rows; False on an error."""
    print(f"\nQ: {question}")
    try:
        sql = conn.execute("SELECT nl2sql(%s)", (question,)).fetchone()[0]
    except Exception as e:  # noqa: BLE001 - show the error, keep going
        print(f"   error: {str(e).strip()}")
        return False
    print(f"   SQL: {sql}")
    log = conn.execute(
        "SELECT confidence, trace->'timings'->>'overhead_ms' FROM "
        "nl2sql.query_log ORDER BY id DESC LIMIT 1"
    ).fetchone()
    rows = conn.execute(sql).fetchmany(n_rows)
    print(f"   confidence {log[0]:.2f}, in-database {float(log[1]):.0f} ms; first rows: {rows}")
    return True


def _print_summary(cluster: LocalCluster, n_ok: int, scripted: bool, db: str = DEMO_DB) -> None:
    """Say how many demo questions were answered and where the traces are."""
    print(
        f"\nanswered {n_ok}/{len(DEMO_QUESTIONS)} demo questions. The traces are in "
        f'nl2sql.query_log: psql "{cluster.dsn(db)}" -c "SELECT question, sql, '
        f'confidence FROM nl2sql.query_log"'
    )
    if scripted:
        print(
            "The scripted loopback server stops with this demo: to ask your own "
            "questions, add a real endpoint with SELECT nl2sql.add_model(...) (README.md, 'Models')."
        )


def _run_demo(conn, cluster: LocalCluster, llm: LoopbackLLM | None, n_rows: int) -> int:
    """Configure the models, reindex, ask the demo questions and print the summary."""
    print(configure_models(conn, llm))
    counts = conn.execute("SELECT nl2sql.reindex()").fetchone()[0]
    print(f"reindex: {json.dumps(counts)}")
    n_ok = sum(_ask(conn, q, n_rows) for q, _gold in DEMO_QUESTIONS)
    _print_summary(cluster, n_ok, scripted=llm is not None)
    return n_ok


def _main_beside(cluster: LocalCluster, n_rows: int) -> int:
    """The demo beside the database (``--beside``); returns the process exit code."""
    from nl2sql_indexer.dev._demo_beside import BESIDE_DB, make_beside_db, run_beside

    dsn = make_beside_db(cluster, demo_sql())
    llm = None if _real_endpoint_configured() else LoopbackLLM().start()
    try:
        n_ok = run_beside(dsn, lambda c: configure_models(c, llm), DEMO_QUESTIONS, n_rows)
    finally:
        if llm is not None:
            llm.stop()
    _print_summary(cluster, n_ok, scripted=llm is not None, db=BESIDE_DB)
    return 0 if n_ok == len(DEMO_QUESTIONS) else 1


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    args = _parse_args(argv)
    cluster = _start_cluster(args.datadir)
    if args.beside:
        return _main_beside(cluster, args.rows)
    cluster.create_database(DEMO_DB, drop=True)
    with cluster.connect(DEMO_DB) as conn:
        conn.execute(demo_sql())
        conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
        llm = None if _real_endpoint_configured() else LoopbackLLM().start()
        try:
            n_ok = _run_demo(conn, cluster, llm, args.rows)
        finally:
            if llm is not None:
                llm.stop()
    return 0 if n_ok == len(DEMO_QUESTIONS) else 1  # a question that raised fails the demo


if __name__ == "__main__":
    sys.exit(main())
