"""Questions racing DDL from another session (issue 31 §8): a table dropped or renamed while a
question is answered ends in the rows of the execution that was checked, or in an ``nl2sql:``
error that says the table went away, never in a raw ``UndefinedTable`` or in a claim that the
role may not read it.

The DDL is run by the loopback server's reply hook, from a second connection, at a chosen
moment of the call (every model answer here is scripted, not a model's).
"""

from __future__ import annotations

import json

import psycopg
import pytest

from conftest import DEMO_DB, add_models
from nl2sql_indexer.dev.loopback import Rule

Q = "How many named race rows are there?"
SETTINGS = ("selection", "selection_model", "presql_votes")


@pytest.fixture
def race(db, cluster):
    """A fresh indexed table ``race_t`` (5 rows); settings and the table cleaned up after."""
    db.execute("DROP TABLE IF EXISTS race_t, race_t_renamed CASCADE")
    db.execute("CREATE TABLE race_t (id int PRIMARY KEY, label text)")
    db.execute("INSERT INTO race_t SELECT g, 'label ' || g FROM generate_series(1, 5) g")
    db.execute("SELECT nl2sql.reindex()")
    yield db
    db.execute("DROP TABLE IF EXISTS race_t, race_t_renamed CASCADE")
    for k in SETTINGS:
        db.execute("SELECT nl2sql.reset_setting(%s)", (k,))
    db.execute("SELECT nl2sql.set_setting('presql_votes', 'on')")
    db.execute("SELECT nl2sql.reindex()")


def ddl_when(monkeypatch, llm, cluster, matches, ddl: str) -> dict:
    """Make the loopback server run ``ddl`` from a second connection the first time a request
    satisfies ``matches(model, prompt_text)``, before it answers that request.

    Returns:
        A dict filled with ``done`` (True) or ``error`` (the DDL's error) once it ran.
    """
    ran: dict = {}
    answer = llm.reply_to

    def reply_to(model, messages):
        text = " ".join(str(m.get("content")) for m in messages)
        if not ran and matches(model, text):
            try:
                with cluster.connect(DEMO_DB) as other:
                    other.execute("SET lock_timeout = '20s'")  # a wait here would be the bug
                    other.execute(ddl)
                ran["done"] = True
            except psycopg.Error as e:
                ran["error"] = str(e)
        return answer(model, messages)

    monkeypatch.setattr(llm, "reply_to", reply_to)
    return ran


# DDL run after every candidate executed and before nl2sql.ask returns (the multiple-choice
# call), which the re-run of the chosen SQL used to meet as UndefinedTable / UndefinedColumn
AFTER_CHOICE = [
    ("drop table", "DROP TABLE race_t"),
    ("rename table", "ALTER TABLE race_t RENAME TO race_t_renamed"),
    ("rename column", "ALTER TABLE race_t RENAME COLUMN label TO label2"),
    ("drop column", "ALTER TABLE race_t DROP COLUMN label"),
]


@pytest.mark.parametrize("ddl", [d for _, d in AFTER_CHOICE], ids=[n for n, _ in AFTER_CHOICE])
def test_ask_returns_the_checked_rows_when_ddl_lands_after_the_choice(
    race, llm, cluster, monkeypatch, ddl
):
    race.execute("SELECT nl2sql.set_setting('selection', 'multiple_choice')")
    race.execute("SELECT nl2sql.set_setting('selection_model', 'judge')")
    add_models(race, llm, ["a", "b", "judge"])
    llm.add_rule(Rule(model="judge", contains="Answer with one letter", response="Option A"))
    llm.add_rule(Rule(model="b", response="SELECT min(id) FROM race_t"))
    llm.set_default("SELECT count(label) AS n FROM race_t")
    ran = ddl_when(
        monkeypatch, llm, cluster, lambda m, t: m == "judge" and "Answer with one letter" in t, ddl
    )
    rows = [r[0] for r in race.execute("SELECT * FROM nl2sql.ask(%s)", (Q,))]
    assert ran == {"done": True}, ran  # the DDL did land between the choice and the return
    assert rows == [{"n": 5}]
    gone = race.execute(
        "SELECT to_regclass('race_t') IS NULL OR NOT EXISTS (SELECT 1 FROM pg_attribute "
        "WHERE attrelid = to_regclass('race_t') AND attname = 'label' AND NOT attisdropped)"
    ).fetchone()[0]
    assert gone


def test_narrate_answers_from_the_checked_rows_when_the_table_is_dropped(
    race, llm, cluster, monkeypatch
):
    race.execute("SELECT nl2sql.set_setting('selection', 'multiple_choice')")
    race.execute("SELECT nl2sql.set_setting('selection_model', 'judge')")
    add_models(race, llm, ["a", "b", "judge"])
    llm.add_rule(Rule(model="judge", contains="Answer with one letter", response="Option A"))
    llm.add_rule(Rule(model="b", response="SELECT min(id) FROM race_t"))
    llm.add_rule(Rule(model="a", contains="Answer the question in words", response="Five."))
    llm.set_default("SELECT count(label) AS n FROM race_t")
    ran = ddl_when(
        monkeypatch,
        llm,
        cluster,
        lambda m, t: m == "judge" and "Answer with one letter" in t,
        "DROP TABLE race_t",
    )
    assert race.execute("SELECT nl2sql.narrate(%s)", (Q,)).fetchone()[0] == "Five."
    assert ran == {"done": True}, ran
    asked = [r for r in llm.requests if "Answer the question in words" in str(r["messages"])]
    assert '{"n":5}' in str(asked[-1]["messages"]).replace(" ", "")


# DDL run when the model is asked (after the call read the schema): the candidates name a
# table that is gone by the time they are checked
BEFORE_CHECK = [
    ("drop table", "DROP TABLE race_t"),
    ("rename table", "ALTER TABLE race_t RENAME TO race_t_renamed"),
]


@pytest.mark.parametrize("ddl", [d for _, d in BEFORE_CHECK], ids=[n for n, _ in BEFORE_CHECK])
def test_a_table_gone_before_the_check_is_said_to_be_gone_not_unreadable(
    race, llm, cluster, monkeypatch, ddl
):
    add_models(race, llm, ["m"])
    llm.set_default("SELECT count(label) AS n FROM race_t")
    ran = ddl_when(monkeypatch, llm, cluster, lambda m, t: True, ddl)
    trace = race.execute("SELECT nl2sql.explain(%s)", (Q,)).fetchone()[0]
    assert ran == {"done": True}, ran
    assert trace["sql"] is None
    reasons = [c["reason"] or "" for c in trace["candidates"]]
    assert reasons and all("race_t no longer exists" in r for r in reasons), reasons
    assert "may not SELECT" not in json.dumps(trace)
    with pytest.raises(psycopg.Error) as err:
        race.execute("SELECT nl2sql(%s)", (Q,))
    msg = err.value.diag.message_primary
    assert "nl2sql: no candidate executed" in msg and "may not SELECT" not in msg


# --- reindex and DDL: a running reindex queues no DDL behind it ----------------------------------

# DDL on tables an open (not yet committed) reindex(force) has read and rewritten: each must
# pass under a lock_timeout far below the reindex's length (here: it never commits meanwhile)
DDL_DURING_REINDEX = [
    "ALTER TABLE lock_a ADD COLUMN extra int",
    "ALTER TABLE lock_b RENAME COLUMN tag TO label",
    "ALTER TABLE lock_a ALTER COLUMN note TYPE varchar(40)",
    "ALTER TABLE lock_a DROP COLUMN note",
    "ALTER TABLE lock_b RENAME TO lock_b2",
    "DROP TABLE lock_c",
]


@pytest.fixture
def lock_tables(db):
    db.execute("DROP TABLE IF EXISTS lock_a, lock_b, lock_b2, lock_c CASCADE")
    db.execute("CREATE TABLE lock_a (id int PRIMARY KEY, note text)")
    db.execute("CREATE TABLE lock_b (id int PRIMARY KEY, tag text)")
    db.execute("CREATE TABLE lock_c (id int PRIMARY KEY, word text)")
    for t, c in (("lock_a", "note"), ("lock_b", "tag"), ("lock_c", "word")):
        db.execute(f"INSERT INTO {t} SELECT g, '{c} ' || g FROM generate_series(1, 20) g")
    db.execute("SELECT nl2sql.reindex()")
    yield db
    db.execute("DROP TABLE IF EXISTS lock_a, lock_b, lock_b2, lock_c CASCADE")
    db.execute("SELECT nl2sql.reindex()")


def test_ddl_is_not_queued_behind_a_running_reindex(lock_tables, cluster):
    db = lock_tables
    with cluster.connect(DEMO_DB, autocommit=False) as indexing:
        out = indexing.execute("SELECT nl2sql.reindex(force => true)").fetchone()[0]
        assert out["tables_indexed"] >= 3  # lock_a .. lock_c read and rewritten, not committed
        with cluster.connect(DEMO_DB) as other:
            other.execute("SET lock_timeout = '5s'")  # LockNotAvailable here is the failure
            for ddl in DDL_DURING_REINDEX:
                other.execute(ddl)
        indexing.commit()
    db.execute("SELECT nl2sql.reindex()")
    cols = {
        (t, c)
        for t, c in db.execute(
            "SELECT table_name, column_name FROM nl2sql.visible_column "
            "WHERE table_name LIKE 'lock_%'"
        )
    }
    assert cols == {("lock_a", "id"), ("lock_a", "extra"), ("lock_b2", "id"), ("lock_b2", "label")}
    stale = db.execute(
        "SELECT count(*) FROM nl2sql.schema_table WHERE table_name IN ('lock_b', 'lock_c')"
    ).fetchone()[0]
    assert stale == 0


def test_reindex_holds_no_lock_on_a_table_it_has_read(lock_tables, cluster):
    with cluster.connect(DEMO_DB, autocommit=False) as indexing:
        indexing.execute("SELECT nl2sql.reindex(force => true)")
        held = indexing.execute(
            "SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "WHERE l.pid = pg_backend_pid() AND c.relname IN ('lock_a', 'lock_b', 'lock_c', "
            "'singer', 'concert', 'stadium', 'singer_in_concert')"
        ).fetchall()
        indexing.rollback()
    assert held == []
