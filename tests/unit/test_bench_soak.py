"""bench/soak_checks.py: the names an answer's SQL uses, the stale-name rule and the error kinds
the soak (bench/soak.py) reports; a wrong checker would make the soak pass or fail for nothing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from soak_checks import EXPECTED, StaleNames, classify, sql_names


def test_sql_names_folds_unquoted_names_and_leaves_out_ctes():
    tables, columns = sql_names(
        'WITH recent AS (SELECT "Kind", region FROM public.Soak_Events) '
        "SELECT r.region, count(*) FROM recent r JOIN soak_t1 t ON t.c1_a = r.region "
        "WHERE t.id IN (SELECT x FROM z)"
    )
    assert tables == {"soak_events", "soak_t1", "z"}
    assert columns >= {"Kind", "region", "c1_a", "id", "x"}
    assert sql_names("SELEC nothing ((") is None


def test_a_name_is_stale_only_after_a_reindex_that_followed_its_ddl():
    s = StaleNames()
    s.gone("table", "soak_t0", at=10.0)
    s.gone("column", "c0_a", at=12.0)
    sql = "SELECT sum(c0_a) FROM soak_t0"
    assert s.stale(sql, asked_at=11.0) == []  # no reindex yet
    s.reindexed(started=5.0, finished=20.0)  # started before the DDL: not a cutoff for it
    assert s.stale(sql, asked_at=30.0) == []
    s.reindexed(started=40.0, finished=50.0)
    assert s.stale(sql, asked_at=45.0) == []  # asked before that pass finished
    assert s.stale(sql, asked_at=51.0) == ["column c0_a", "table soak_t0"]
    assert s.stale("SELECT count(*) FROM soak_t0_r", asked_at=51.0) == []
    with pytest.raises(ValueError):
        s.gone("view", "v", at=1.0)


@pytest.mark.parametrize(
    ("message", "sqlstate", "hint", "kind"),
    [
        (
            "nl2sql: every model failed: model 'm1': endpoint answered HTTP 500",
            None,
            None,
            "model_failed",
        ),
        (
            "nl2sql: every model failed: model 'm1' at x: no answer within 5 s",
            None,
            None,
            "model_timeout",
        ),
        (
            "nl2sql: no candidate executed successfully (relation missing)",
            None,
            None,
            "no_candidate",
        ),
        (
            "nl2sql: the question has 2 competing readings and none is convincing",
            None,
            None,
            "abstained",
        ),
        (
            'spiexceptions.UndefinedTable: relation "soak_t1" does not exist',
            "XX000",
            None,
            "raw_spiexception",
        ),
        (
            "nl2sql: the calling role may not SELECT public.soak_t1",
            None,
            None,
            "may_not_select_race",
        ),
        (
            "nl2sql: no candidate executed",
            None,
            "nl2sql.explain(...) shows it (log id 7)",
            "log_id_promise",
        ),
        (
            "plpy.Error: nl2sql: no candidate executed successfully (x)",
            "XX000",
            None,
            "no_candidate",
        ),
        ("deadlock detected", "40P01", None, "deadlock"),
        ("canceling statement due to statement timeout", "57014", None, "client_timeout"),
        ("KeyError: 'sql'", "XX000", None, "internal_error"),
        ('relation "soak_t1" does not exist', "42P01", None, "not_nl2sql"),
    ],
)
def test_classify(message, sqlstate, hint, kind):
    assert classify(message, sqlstate, hint) == kind
    assert kind in EXPECTED
