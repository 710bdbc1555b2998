"""The beside-the-database demo (``scripts/demo.sh --beside``) on the test cluster: a database
without PL/Python owned by a non-superuser role, ``nl2sql install`` as that role, reindex and
every demo question answered through ``nl2sql.connect(dsn).ask()`` with SQL and rows (the scripted
models: the local model's demo runs in .ci/run), each compared with the reference answer."""

from __future__ import annotations

from nl2sql_indexer.dev import demo
from nl2sql_indexer.dev._demo_beside import BESIDE_DB, BESIDE_ROLE
from nl2sql_indexer.dev.demo_data import DEMO_QUESTIONS


def _drop(cluster) -> None:
    with cluster.connect() as c:
        c.execute(f"DROP DATABASE IF EXISTS {BESIDE_DB} WITH (FORCE)")


def test_demo_beside_answers_every_question(cluster, capsys):
    try:
        for _run in range(2):  # safe to run twice
            assert demo._main_beside(cluster, demo.SCRIPTED, 1) == 0
        out = capsys.readouterr().out
    finally:
        _drop(cluster)
    last = out.split("no PL/Python in pg_language")[-1]
    assert f"owner {BESIDE_ROLE} (not a superuser)" in out
    assert last.count("\nQ: ") == len(DEMO_QUESTIONS)
    assert last.count("   SQL: SELECT") == len(DEMO_QUESTIONS)
    assert last.count("first rows: [(") == len(DEMO_QUESTIONS)
    assert "error:" not in out
    assert f"answered {len(DEMO_QUESTIONS)}/{len(DEMO_QUESTIONS)}" in last
    # the scripted majority answers with the reference SQL: every answer matches, said last
    n = len(DEMO_QUESTIONS)
    assert last.count("matches the reference") == n
    assert out.rstrip().splitlines()[-1] == f"{n}/{n} match the reference"
