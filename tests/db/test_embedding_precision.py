"""Setting embedding_precision (issue 33): the index records which model file embedded it, a
reindex with the other precision is refused unless forced, a forced one re-embeds every stored
vector with the new file, doctor warns while they differ, and questions keep using the index's
model until then."""

from __future__ import annotations

import psycopg
import pytest

from nl2sql.embedding import encode, index_model

DB = "nl2sql_precision"


@pytest.fixture(scope="module")
def conn(cluster):
    if not encode.onnx_path("int8").exists():
        pytest.skip("no int8 model file: scripts/install.sh makes it")
    cluster.create_database(DB, drop=True)
    c = cluster.connect(DB)
    c.execute("CREATE TABLE harbour (hid int PRIMARY KEY, hname text, country text)")
    c.execute(
        "INSERT INTO harbour VALUES (1, 'Valletta', 'Malta'), (2, 'Kotor', 'Montenegro'), "
        "(3, 'Piraeus', 'Greece')"
    )
    c.execute("CREATE EXTENSION nl2sql CASCADE")
    yield c
    c.close()


def _recorded(c) -> str | None:
    row = c.execute("SELECT value FROM nl2sql.setting WHERE key = %s", (index_model.KEY,))
    got = row.fetchone()
    return got[0] if got else None


def _vec(c, sql: str) -> list[float]:
    text = c.execute(sql).fetchone()[0]
    return [float(x) for x in str(text).strip("[]").split(",")]


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


VALUE = "SELECT embedding::text FROM nl2sql.cell_value WHERE value = 'Valletta'"
TERM = "SELECT embedding::text FROM nl2sql.term WHERE term = 'port'"


def test_a_precision_change_is_refused_then_forced_and_re_embeds(conn):
    conn.execute("SELECT nl2sql.reindex()")
    conn.execute("SELECT nl2sql.add_term('port', 'a harbour town')")
    assert _recorded(conn) == encode.MODEL_NAMES["fp32"]
    fp32_value, fp32_term = _vec(conn, VALUE), _vec(conn, TERM)

    conn.execute("SELECT nl2sql.set_setting('embedding_precision', 'int8')")
    with pytest.raises(psycopg.Error, match="nl2sql.*embedded with all-MiniLM-L6-v2 .*force"):
        conn.execute("SELECT nl2sql.reindex()")
    doctor = dict(
        conn.execute("SELECT \"check\", status || ': ' || detail FROM nl2sql.doctor()").fetchall()
    )
    assert doctor["onnx model"].startswith("warn") and "int8" in doctor["onnx model"]
    assert "warn" not in doctor["settings"], doctor["settings"]  # the record is no setting
    assert _recorded(conn) == encode.MODEL_NAMES["fp32"]  # questions still use the fp32 file

    conn.execute("SELECT nl2sql.reindex(force => true)")
    assert _recorded(conn) == encode.MODEL_NAMES["int8"]
    int8_value, int8_term = _vec(conn, VALUE), _vec(conn, TERM)
    for old, new in ((fp32_value, int8_value), (fp32_term, int8_term)):
        assert old != new  # re-embedded, not copied from the old index
        assert _cos(old, new) > 0.9  # the same text, the other model file
    nulls = conn.execute(
        "SELECT (SELECT count(*) FROM nl2sql.example WHERE embedding IS NULL) + "
        "(SELECT count(*) FROM nl2sql.schema_column c JOIN nl2sql.schema_table t "
        "USING (schema_name, table_name) WHERE c.embedding IS NULL)"
    ).fetchone()[0]
    assert nulls == 0
    doctor = dict(conn.execute('SELECT "check", status FROM nl2sql.doctor()').fetchall())
    assert doctor["onnx model"] == "ok"

    conn.execute("SELECT nl2sql.reindex()")  # the same precision: no refusal, nothing redone
    assert _vec(conn, VALUE) == int8_value
    conn.execute("SELECT nl2sql.reset_setting('embedding_precision')")
    conn.execute("SELECT nl2sql.reindex(force => true)")
    assert _recorded(conn) == encode.MODEL_NAMES["fp32"]
    assert _cos(_vec(conn, VALUE), fp32_value) > 0.9999
