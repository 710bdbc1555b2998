"""The main job: a local cluster, the demo concert database, the extension, indexing, and the
demo questions answered by ``nl2sql()`` — printed as question → SQL → first rows, and whether
the answer's rows are the reference answer's.

Models, by default: a private local model on this machine's CPU, Qwen2.5-Coder-1.5B-Instruct
served by llama.cpp's ``llama-server`` (``nl2sql model install``, ``start`` and ``register``:
built and downloaded once, cached; ``--model qwen2.5-coder-0.5b`` for a small machine) — a small
model: its figures are its own. A real OpenAI-compatible endpoint instead when
NL2SQL_LLM_BASE_URL and NL2SQL_LLM_MODEL are set (key in the variable named by
NL2SQL_LLM_API_KEY_ENV, default OPENAI_API_KEY). ``--scripted``: the project's loopback server,
whose answers are SCRIPTED (the gold SQL of the demo questions, one model deliberately wrong) —
not a model's. Safe to run twice.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from nl2sql.core.errors import LocalModelError
from nl2sql_indexer.cluster import LocalCluster, postgres_can_access
from nl2sql_indexer.dev._demo_match import same_result
from nl2sql_indexer.dev.demo_data import DEMO_QUESTIONS, demo_sql
from nl2sql_indexer.dev.loopback import LoopbackLLM

ROOT = (
    Path(__file__).resolve().parents[3]
    if (Path(__file__).resolve().parents[3] / "sql").exists()
    else Path.cwd()
)
DEMO_DB = "nl2sql_demo"
LOCAL = "local"  # the models: the local model (default), a real endpoint, or the scripted ones
ENDPOINT = "endpoint"
SCRIPTED = "scripted"
# with a real model the demo succeeds when this many questions got SQL that ran; how many match
# the reference is its last line (a small model's accuracy is printed, not a failure of the demo)
DEMO_PASS = 9


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


def configure_models(conn, llm: LoopbackLLM | None, source: str = SCRIPTED) -> str:
    """Configure the demo's models; returns a line saying what answers come from.

    Args:
        conn: a connection to the demo database. llm: the scripted loopback server (``source``
            ``scripted``). source: ``local``, ``endpoint`` or ``scripted``.
    """
    conn.execute("DELETE FROM nl2sql.model")
    if source == LOCAL:
        from nl2sql.client.local_model import register

        return "models: a private local model on this CPU: " + register(conn=conn)
    if source == ENDPOINT:
        conn.execute(
            "SELECT nl2sql.add_model('real', %s, base_url => %s, api_key_env => %s)",
            (
                os.environ["NL2SQL_LLM_MODEL"],
                os.environ["NL2SQL_LLM_BASE_URL"],
                os.environ.get("NL2SQL_LLM_API_KEY_ENV", "OPENAI_API_KEY"),
            ),
        )
        return f"models: real endpoint {os.environ['NL2SQL_LLM_BASE_URL']} ({os.environ['NL2SQL_LLM_MODEL']})"
    assert llm is not None
    gold = dict(DEMO_QUESTIONS)
    llm.set_replay("scripted-a", gold)
    llm.set_replay("scripted-b", gold)
    llm.set_replay("scripted-c", {q: _wrong_variant(s) for q, s in DEMO_QUESTIONS})
    for name in ("scripted-a", "scripted-b", "scripted-c"):
        conn.execute("SELECT nl2sql.add_model(%s, %s, base_url => %s)", (name, name, llm.base_url))
    return (
        "models: --scripted: the project's loopback server answers with SCRIPTED SQL (the "
        "demo's reference answers; scripted-c is deliberately wrong sometimes) — this shows "
        "the pipeline and the vote, not a model's accuracy"
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
        "--scripted",
        action="store_true",
        help="answer from the scripted loopback server instead of a model (fast; no model)",
    )
    ap.add_argument(
        "--model",
        default=None,
        help="the local model (default qwen2.5-coder-1.5b; qwen2.5-coder-0.5b on small machines)",
    )
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


def _source(args: argparse.Namespace) -> str:
    """Where the demo's answers come from: ``scripted``, ``endpoint`` or ``local``."""
    if args.scripted:
        return SCRIPTED
    return ENDPOINT if _real_endpoint_configured() else LOCAL


def _start_local_model(name: str | None) -> None:
    """``nl2sql model install`` and ``start``: the first time llama-server is compiled (about
    6 to 14 minutes on 2 cores) and the model downloaded (1.1 GB), with progress bars; later runs
    find both cached and the server running."""
    from nl2sql.client.local_model import install, start

    print("the local model: nl2sql model install && nl2sql model start", flush=True)
    done = install(name)
    s = start()
    print(f"{done.model} ({done.source}) at {s.base_url}, {s.parallel} slots, {s.threads} threads")


def _ask(conn, question: str, gold: str, n_rows: int) -> tuple[bool, bool]:
    """Ask one demo question and print its SQL, confidence, first rows and whether its rows
    are the reference answer's; returns (answered, matches)."""
    print(f"\nQ: {question}", flush=True)
    try:
        sql = conn.execute("SELECT nl2sql(%s)", (question,)).fetchone()[0]
    except Exception as e:  # noqa: BLE001 - show the error, keep going
        print(f"   error: {str(e).strip()}")
        return False, False
    print(f"   SQL: {sql}")
    log = conn.execute(
        "SELECT confidence, trace->'timings'->>'overhead_ms', trace->'timings'->>'total_ms' "
        "FROM nl2sql.query_log ORDER BY id DESC LIMIT 1"
    ).fetchone()
    rows = conn.execute(sql).fetchall()
    matches = same_result(conn.execute(gold).fetchall(), rows, gold)
    seconds = f", {float(log[2]) / 1000:.1f} s in all" if log[2] else ""
    print(
        f"   confidence {log[0]:.2f}, in-database {float(log[1]):.0f} ms{seconds}; "
        f"first rows: {rows[:n_rows]}"
    )
    print(f"   {'matches the reference' if matches else 'DIFFERS from the reference: ' + gold}")
    return True, matches


def _print_summary(
    cluster: LocalCluster,
    n_ok: int,
    n_match: int,
    source: str,
    db: str = DEMO_DB,
    owner: str | None = None,
) -> None:
    """Say how many demo questions were answered, where the traces are, how to ask more (as
    ``owner`` beside the database) and (last) how many answers match the reference."""
    n = len(DEMO_QUESTIONS)
    print(
        f"\nanswered {n_ok}/{n} demo questions. The traces are in "
        f'nl2sql.query_log: psql "{cluster.dsn(db)}" -c "SELECT question, sql, '
        f'confidence FROM nl2sql.query_log"'
    )
    if source == SCRIPTED:
        print(
            "The scripted loopback server stops with this demo: to ask your own questions, "
            "run the demo without --scripted (a local model) or add an endpoint with "
            "SELECT nl2sql.add_model(...) (README.md, 'Models')."
        )
    elif source == LOCAL:
        ask = (
            f'NL2SQL_DSN="{cluster.dsn(db, owner)}" nl2sql ask "..."'
            if owner
            else f'psql "{cluster.dsn(db)}" -c "SELECT nl2sql(\'...\')"'
        )
        print(
            "The local model keeps serving (nl2sql model status; nl2sql model stop): ask your "
            f"own questions with {ask}"
        )
    print(f"{n_match}/{n} match the reference")


def _passed(source: str, n_ok: int) -> bool:
    """Scripted: every question answered. A real model: ``DEMO_PASS`` questions answered."""
    return n_ok == len(DEMO_QUESTIONS) if source == SCRIPTED else n_ok >= DEMO_PASS


def _run_demo(conn, cluster: LocalCluster, llm, source: str, n_rows: int) -> tuple[int, int]:
    """Configure the models, reindex, ask the demo questions and print the summary; returns
    (answered, matching)."""
    print(configure_models(conn, llm, source))
    counts = conn.execute("SELECT nl2sql.reindex()").fetchone()[0]
    print(f"reindex: {json.dumps(counts)}")
    results = [_ask(conn, q, gold, n_rows) for q, gold in DEMO_QUESTIONS]
    n_ok, n_match = sum(a for a, _ in results), sum(m for _, m in results)
    _print_summary(cluster, n_ok, n_match, source)
    return n_ok, n_match


def _main_beside(cluster: LocalCluster, source: str, n_rows: int) -> int:
    """The demo beside the database (``--beside``); returns the process exit code."""
    from nl2sql_indexer.dev._demo_beside import BESIDE_DB, BESIDE_ROLE, make_beside_db, run_beside

    dsn = make_beside_db(cluster, demo_sql())
    llm = LoopbackLLM().start() if source == SCRIPTED else None
    try:
        n_ok, n_match = run_beside(
            dsn, lambda c: configure_models(c, llm, source), DEMO_QUESTIONS, n_rows
        )
    finally:
        if llm is not None:
            llm.stop()
    _print_summary(cluster, n_ok, n_match, source, db=BESIDE_DB, owner=BESIDE_ROLE)
    return 0 if _passed(source, n_ok) else 1


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    args = _parse_args(argv)
    source = _source(args)
    if source == LOCAL:
        try:
            _start_local_model(args.model)
        except LocalModelError as e:
            print(f"{e}\nhint: {e.hint}" if e.hint else str(e), file=sys.stderr)
            return 1
    cluster = _start_cluster(args.datadir)
    if args.beside:
        return _main_beside(cluster, source, args.rows)
    cluster.create_database(DEMO_DB, drop=True)
    with cluster.connect(DEMO_DB) as conn:
        conn.execute(demo_sql())
        conn.execute("CREATE EXTENSION IF NOT EXISTS nl2sql CASCADE")
        llm = LoopbackLLM().start() if source == SCRIPTED else None
        try:
            n_ok, n_match = _run_demo(conn, cluster, llm, source, args.rows)
        finally:
            if llm is not None:
                llm.stop()
    return 0 if _passed(source, n_ok) else 1


if __name__ == "__main__":
    sys.exit(main())
