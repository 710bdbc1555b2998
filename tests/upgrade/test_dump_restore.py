"""pg_dump / pg_restore keeps every user-owned row: a configured database goes through
``pg_dump -Fc`` and ``pg_restore`` into a new database of the same cluster; every user row and
the sequences come back, and after ``reindex()`` ``nl2sql()`` answers and logs under a new id.

Model answers come from the scripted loopback server (conftest), not from a model.
"""

from __future__ import annotations

import subprocess

from nl2sql_indexer.cluster import PG_BIN
from nl2sql_indexer.dev.demo_data import demo_sql

from .usage import Q1, SQL1, USER_ROWS, configure_and_use, user_rows


def test_dump_and_restore_keep_every_user_row_and_nl2sql_answers(cluster, llm, tmp_path):
    llm.clear()
    cluster.create_database("nl2sql_dump", drop=True)
    with cluster.connect("nl2sql_dump") as c:
        c.execute(demo_sql())
        c.execute("CREATE EXTENSION nl2sql CASCADE")
        configure_and_use(c, llm, "dump")
        before = user_rows(c)
        seq_before = c.execute("SELECT last_value FROM nl2sql.query_log_id_seq").fetchone()[0]
    dump = tmp_path / "nl2sql.dump"
    conn_args = ["-h", "127.0.0.1", "-p", str(cluster.port), "-U", "postgres"]
    r = subprocess.run(
        [str(PG_BIN / "pg_dump"), *conn_args, "-Fc", "-f", str(dump), "nl2sql_dump"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    cluster.create_database("nl2sql_restored", drop=True)
    r = subprocess.run(
        [str(PG_BIN / "pg_restore"), *conn_args, "-d", "nl2sql_restored", str(dump)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    with cluster.connect("nl2sql_restored") as c:
        after = user_rows(c)
        for name in USER_ROWS:
            assert after[name] == before[name], name
        assert dict(
            c.execute("SELECT name, value FROM nl2sql.settings WHERE changed").fetchall()
        ) == {"k_examples": "5", "candidate_timeout_ms": "4000", "send_values": "on"}
        assert (
            c.execute("SELECT last_value FROM nl2sql.query_log_id_seq").fetchone()[0] == seq_before
        )
        c.execute("SELECT nl2sql.reindex()")
        assert c.execute("SELECT nl2sql(%s)", (Q1,)).fetchone()[0].lower() == SQL1.lower()
        new_id = c.execute("SELECT max(id) FROM nl2sql.query_log").fetchone()[0]
        assert new_id > seq_before
        # the example pool has the built-in examples again, and the user's once
        assert (
            c.execute("SELECT count(*) FROM nl2sql.example WHERE source = 'builtin'").fetchone()[0]
            > 0
        )
