"""Configuration functions called in SQL beside the database whose checks need Python
(sql/beside/003-deferred.sql): recorded as deferred calls, applied by the client process as the
role that made them (client/deferred.py), refused at call or apply time when that role may not
(docs/install.md, "PostgreSQL without PL/Python")."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

import nl2sql

if not (Path(__file__).parent / "conftest.py").exists():  # the install branch's fixtures
    pytest.skip("tests/beside/conftest.py is missing", allow_module_level=True)

from .conftest import OWNER, nl2sql_admin
from .test_client_beside import READER, demo  # noqa: F401  (the fixture)

CURATOR = "nl2sql_beside_curator"
Q_FRANCE = "How many singers are from France?"
SQL_FRANCE = "SELECT count(*) FROM singer WHERE country = 'France'"


@pytest.fixture
def curator(cluster, demo):  # noqa: F811
    """A login role granted the deferred functions and nl2sql's tables, that reads singer only;
    the owner's login may act as it (so the client applies its calls)."""
    with cluster.connect(demo.name) as su:
        su.execute(
            f"DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{CURATOR}') "
            f"THEN CREATE ROLE {CURATOR} LOGIN; END IF; END$$"
        )
        su.execute(f"GRANT {CURATOR} TO {OWNER}")
    with psycopg.connect(demo.dsn, autocommit=True) as c:
        c.execute(f"GRANT SELECT ON singer TO {CURATOR}")
        c.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA nl2sql TO {CURATOR}")
        c.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA nl2sql TO {CURATOR}")
        c.execute(f"REVOKE ALL ON nl2sql.deferred_call, nl2sql.deferred_calls FROM {CURATOR}")
        for fn in ("add_verified_query(text, text, text)", "add_term(text, text, text)",
                   "add_template(text, text)", "remove_term(text)"):  # fmt: skip
            c.execute(f"GRANT EXECUTE ON FUNCTION nl2sql.{fn} TO {CURATOR}")
    return cluster.dsn(demo.name, CURATOR)


def _call(dsn: str, sql: str, args=()) -> tuple[object, list[str]]:
    """Run one call; its value and the NOTICEs it raised."""
    notices: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as c:
        c.add_notice_handler(lambda d: notices.append(d.message_primary))
        return c.execute(sql, args).fetchone()[0], notices


def test_verified_query_called_in_sql_answers_on_the_fast_path(demo, curator, llm):  # noqa: F811
    got, notices = _call(
        curator, "SELECT nl2sql.add_verified_query(%s, %s)", (Q_FRANCE, SQL_FRANCE)
    )
    assert got is None  # never a made-up id
    assert any(f"applied as role {CURATOR}" in n and "deferred call" in n for n in notices)
    with psycopg.connect(curator) as c:
        mine = c.execute("SELECT function_name, status FROM nl2sql.my_deferred_calls").fetchall()
        assert mine == [("add_verified_query", "pending")]
        assert c.execute("SELECT count(*) FROM nl2sql.verified_query").fetchone() == (0,)
    llm.clear()
    llm.set_default("SELECT count(*) FROM stadium")  # what a model would say: wrong here
    with nl2sql.connect(demo.dsn) as client:  # the first question applies it
        a = client.ask("How many singers come from Japan?")
    assert llm.requests == []
    assert a.trace["vote"]["method"] == "verified_query" and "'Japan'" in a.sql
    with psycopg.connect(curator) as c:
        row = c.execute("SELECT status, result, error FROM nl2sql.my_deferred_calls").fetchone()
        assert row[0] == "done" and row[2] is None
        assert c.execute("SELECT id FROM nl2sql.verified_query").fetchone()[0] == row[1]


@pytest.mark.parametrize(
    "call, args, check, expected",
    [
        (
            "SELECT nl2sql.add_term(%s, %s, %s)",
            ("veteran", "a singer aged 40 or more", "singer.age >= 40"),
            "SELECT sql_expression FROM nl2sql.term WHERE term = 'veteran'",
            ("singer.age >= 40",),
        ),
        (
            "SELECT nl2sql.add_template(%s, %s)",
            ("Singers from :country", "SELECT name FROM singer WHERE country = :country"),
            "SELECT count(*) FROM nl2sql.verified_query",
            (1,),
        ),
    ],
)
def test_deferred_call_round_trips_through_nl2sql_apply(curator, demo, call, args, check, expected):  # noqa: F811
    assert _call(curator, call, args)[0] is None
    r = nl2sql_admin("apply", "--dsn", demo.dsn)
    assert r.returncode == 0, r.stderr
    assert f"as {CURATOR}: done" in r.stdout and "1 applied" in r.stdout
    with psycopg.connect(demo.dsn) as c:
        assert c.execute(check).fetchone() == expected
        assert c.execute(
            "SELECT count(*) FROM nl2sql.deferred_call WHERE status = 'pending'"
        ).fetchone() == (0,)


def test_call_without_the_privilege_is_refused_at_call_time(cluster, demo):  # noqa: F811
    reader = cluster.dsn(demo.name, READER)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        _call(reader, "SELECT nl2sql.add_verified_query(%s, %s)", (Q_FRANCE, SQL_FRANCE))
    # nor through the helper, naming a role it may not act as
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="^nl2sql: role"):
        _call(
            reader,
            "SELECT nl2sql._defer(%s, 'nl2sql.add_verified_query(text,text,text)', '[]')",
            (OWNER,),
        )
    with psycopg.connect(demo.dsn) as c:
        assert c.execute("SELECT count(*) FROM nl2sql.deferred_call").fetchone() == (0,)


def test_query_over_a_table_the_role_may_not_read_is_refused_at_apply(curator, demo, cluster):  # noqa: F811
    sql = "SELECT count(*) FROM stadium"
    assert _call(curator, "SELECT nl2sql.add_verified_query(%s, %s)", ("Stadiums?", sql))[0] is None
    with nl2sql.connect(demo.dsn) as client:
        calls = client.apply()
    assert [(c.function, c.role, c.status) for c in calls] == [
        ("add_verified_query", CURATOR, "refused")
    ]
    assert calls[0].error.startswith("nl2sql") and "stadium" in calls[0].error
    with psycopg.connect(curator) as c:
        assert c.execute("SELECT status, error FROM nl2sql.my_deferred_calls").fetchone() == (
            "refused",
            calls[0].error,
        )
    with psycopg.connect(demo.dsn) as c:
        assert c.execute("SELECT count(*) FROM nl2sql.verified_query").fetchone() == (0,)
    # a role sees only its own calls, not the table nor every role's view
    with psycopg.connect(cluster.dsn(demo.name, READER)) as c:
        assert c.execute("SELECT count(*) FROM nl2sql.my_deferred_calls").fetchone() == (0,)
        for table in ("nl2sql.deferred_call", "nl2sql.deferred_calls"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(f"SELECT * FROM {table}")
            c.rollback()


def test_schedule_reindex_refuses_beside(demo):  # noqa: F811
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="^nl2sql: schedule_reindex") as e:
        _call(demo.dsn, "SELECT nl2sql.schedule_reindex('0 3 * * *')")
    assert "nl2sql reindex --dsn" in e.value.diag.message_hint
