"""Cell values embedded by the static table (setting ``value_embedding = 'static'``) against
the embedding model (``model``, the default), end to end in one database: the first reindex
records it and the value index takes its 128 dimensions while the catalog keeps 384; a question's
phrases are looked up the same way (a vector match is found; explain and doctor say which); a
changed setting waits for a forced reindex and the index keeps working meanwhile; the forced
reindex re-embeds every value with the model; an index built before the setting existed (no
record, values present) stays the model's."""

from __future__ import annotations

import psycopg
import pytest

from nl2sql.embedding import index_model, static

DB = "nl2sql_value_embedding"


@pytest.fixture(scope="module")
def conn(cluster):
    cluster.create_database(DB, drop=True)
    c = cluster.connect(DB)
    c.execute("CREATE TABLE ship (sid int PRIMARY KEY, sname text, flag text)")
    c.execute(
        "INSERT INTO ship VALUES (1, 'Northern Star', 'Malta'), (2, 'Blue Horizon', 'Greece'), "
        "(3, 'Silver Tide', 'Norway')"
    )
    c.execute("CREATE EXTENSION nl2sql CASCADE")
    c.execute("SELECT nl2sql.set_setting('value_embedding', 'static')")
    c.execute("SELECT nl2sql.reindex()")
    yield c
    c.close()


def _one(c, sql: str, *args):
    return c.execute(sql, args).fetchone()[0]


def _recorded(c) -> str | None:
    return _one(c, "SELECT max(value) FROM nl2sql.setting WHERE key = %s", index_model.VALUE_KEY)


def _dims(c, table: str) -> str:
    return _one(
        c,
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attname = 'embedding' AND attrelid = %s::regclass",
        table,
    )


def _vector_match(c, phrase: str) -> list[str]:
    rows = c.execute(
        "SELECT value FROM nl2sql._match_values(current_user, ARRAY[%s], ARRAY[NULL::text], "
        "ARRAY[%s::vector], 2, 0.8, 5) WHERE how = 'vector'",
        (phrase, _phrase_vector(c, phrase)),
    ).fetchall()
    return [r[0] for r in rows]


def _phrase_vector(c, phrase: str) -> str:
    """The phrase embedded as the index's values are (a value's own vector when it is one)."""
    got = c.execute(
        "SELECT embedding::vector::text FROM nl2sql.cell_value WHERE value = %s", (phrase,)
    ).fetchone()
    assert got, phrase
    return got[0]


def test_the_first_reindex_embeds_values_statically(conn):
    assert _recorded(conn) == static.NAME
    assert _dims(conn, "nl2sql.cell_value") == f"halfvec({static.DIM})"
    assert _dims(conn, "nl2sql.schema_column") == "vector(384)"
    assert _dims(conn, "nl2sql.example") == "vector(384)"
    assert _one(conn, "SELECT count(*) FROM nl2sql.cell_value WHERE embedding IS NULL") == 0
    # the value's own vector finds it: the HNSW index answers a 128-dimension query
    assert "Northern Star" in _vector_match(conn, "Northern Star")


def test_a_question_looks_values_up_the_same_way(conn):
    conn.execute("SELECT nl2sql.set_setting('value_trgm_min', '1')")  # no trigram match
    try:
        got = _one(conn, "SELECT nl2sql.retrieve('Which ship is the Northern Stars?')")
    finally:
        conn.execute("SELECT nl2sql.reset_setting('value_trgm_min')")
    hit = [v for v in got["values"] if v["value"] == "Northern Star"]
    assert hit and hit[0]["how"] == "vector", got["values"]
    doctor = dict(conn.execute('SELECT "check", detail FROM nl2sql.doctor()').fetchall())
    assert f"cell values: {static.NAME}" in doctor["embedding model"]


def test_a_changed_setting_waits_for_a_forced_reindex(conn):
    conn.execute("SELECT nl2sql.set_setting('value_embedding', 'model')")
    try:
        conn.execute("INSERT INTO ship VALUES (4, 'Golden Wave', 'Malta')")
        conn.execute("SELECT nl2sql.reindex()")  # not forced: the index stays static
        assert _recorded(conn) == static.NAME
        assert _dims(conn, "nl2sql.cell_value") == f"halfvec({static.DIM})"
        assert "Golden Wave" in _vector_match(conn, "Golden Wave")

        conn.execute("SELECT nl2sql.reindex(force => true)")
        assert _recorded(conn) == ""
        assert _dims(conn, "nl2sql.cell_value") == "halfvec(384)"
        assert _one(conn, "SELECT count(*) FROM nl2sql.cell_value WHERE embedding IS NULL") == 0
        assert "Golden Wave" in _vector_match(conn, "Golden Wave")
    finally:
        conn.execute("SELECT nl2sql.set_setting('value_embedding', 'static')")
        conn.execute("SELECT nl2sql.reindex(force => true)")
    assert _recorded(conn) == static.NAME
    assert _dims(conn, "nl2sql.cell_value") == f"halfvec({static.DIM})"


def test_an_index_from_before_the_setting_stays_the_models(conn):
    conn.execute("SELECT nl2sql.set_setting('value_embedding', 'model')")
    conn.execute("SELECT nl2sql.reindex(force => true)")
    conn.execute("DELETE FROM nl2sql.setting WHERE key = %s", (index_model.VALUE_KEY,))
    conn.execute("SELECT nl2sql.set_setting('value_embedding', 'static')")
    try:
        conn.execute("SELECT nl2sql.reindex()")
        assert _recorded(conn) == ""  # values present, nothing recorded: the model's
        assert _dims(conn, "nl2sql.cell_value") == "halfvec(384)"
    finally:
        conn.execute("SELECT nl2sql.reindex(force => true)")
    assert _recorded(conn) == static.NAME


def test_an_unknown_value_embedding_is_refused(conn):
    assert (
        _one(conn, "SELECT default_value FROM nl2sql.settings WHERE name = 'value_embedding'")
        == "model"
    )
    with pytest.raises(psycopg.Error, match="static"):
        conn.execute("SELECT nl2sql.set_setting('value_embedding', 'fast')")
