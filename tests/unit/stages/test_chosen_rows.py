"""The rows ``nl2sql.ask`` returns come from the chosen SQL's checked execution (issue 31 §8):
``Run.chosen_rows`` picks them without a database, ``Candidate.to_json`` keeps them out of the
trace, and a second fetch that meets a table gone since becomes an ``nl2sql:`` error.
tests/db/test_ddl_races.py drops and renames tables between the choice and the return."""

from __future__ import annotations

import pytest

from nl2sql.core.errors import GONE_SQLSTATES
from nl2sql.core.settings import default_settings
from nl2sql.core.timing import StageTimer
from nl2sql.core.types import Candidate, Status, Vote
from nl2sql.curated.fast_path import FastPath
from nl2sql.stages.run import Outcome, Run
from nl2sql.udf import _questions

SQL = "SELECT count(*) AS n FROM t"


def cand(sql, status=Status.OK, rows=None, source="finsql:a"):
    return Candidate(source=source, model="a", raw_text=sql, sql=sql, status=status, rows=rows)


def run_with(candidates, chosen, fast=None):
    run = Run(None, default_settings(), [], "q", "public", None, StageTimer())
    run.candidates = candidates
    run.fast_path = fast
    if chosen is not None or candidates:
        vote = Vote(chosen, None, 1.0, [], "test")
        run.outcome = Outcome(vote, [], chosen, 1.0, {})
    return run


CASES = [
    ("the chosen candidate's rows", [cand(SQL, rows=['{"n":5}'])], SQL, None, ['{"n":5}']),
    (
        "an errored twin is passed over",
        [cand(SQL, Status.ERROR, rows=None), cand(SQL, rows=['{"n":5}'], source="finsql:b")],
        SQL,
        None,
        ['{"n":5}'],
    ),
    ("another SQL's rows are not taken", [cand("SELECT 1", rows=['{"x":1}'])], SQL, None, None),
    ("rows not kept", [cand(SQL, rows=None)], SQL, None, None),
    ("nothing chosen", [cand(SQL, rows=['{"n":5}'])], None, None, None),
    ("an empty result is rows", [cand(SQL, rows=[])], SQL, None, []),
    (
        "a verified query that answered",
        [],
        SQL,
        FastPath(candidate=cand(SQL, rows=['{"n":7}'], source="verified:1")),
        ['{"n":7}'],
    ),
]


@pytest.mark.parametrize(
    "candidates,chosen,fast,rows", [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_chosen_rows_are_those_of_the_checked_execution(candidates, chosen, fast, rows):
    assert run_with(candidates, chosen, fast).chosen_rows() == rows


def test_the_trace_never_holds_the_kept_rows():
    c = cand(SQL, rows=['{"n":5}'] * 3)
    c.sample_rows = ['{"n":5}']
    shown = c.to_json()
    assert "rows" not in shown and "prompt" not in shown
    assert shown["sample_rows"] == ['{"n":5}'] and shown["sql"] == SQL


class _Plpy:
    """Enough of PL/Python for ``_fetch_again``: ``plpy.error`` raises ``Error``."""

    class SPIError(Exception):
        def __init__(self, msg, sqlstate):
            super().__init__(msg)
            self.sqlstate = sqlstate

    class Error(Exception):
        pass

    def error(self, msg, hint=None):
        raise self.Error(msg, hint)


@pytest.mark.parametrize("sqlstate", sorted(GONE_SQLSTATES))
def test_a_second_fetch_that_meets_a_gone_table_is_an_nl2sql_error(monkeypatch, sqlstate):
    plpy = _Plpy()

    def gone(*args, **kwargs):
        raise plpy.SPIError('relation "t" does not exist', sqlstate)

    monkeypatch.setattr(_questions, "fetch_rows", gone)
    monkeypatch.setattr(_questions, "get_settings", lambda p: default_settings())
    with pytest.raises(_Plpy.Error) as e:
        _questions._fetch_again(plpy, SQL, "public")
    msg, hint = e.value.args
    assert msg.startswith("nl2sql: the chosen query no longer runs")
    assert "dropped or renamed" in msg and 'relation "t" does not exist' in msg
    assert hint.startswith("ask again")


def test_a_second_fetch_that_fails_otherwise_is_not_reworded(monkeypatch):
    plpy = _Plpy()

    def fails(*args, **kwargs):
        raise plpy.SPIError("division by zero", "22012")

    monkeypatch.setattr(_questions, "fetch_rows", fails)
    monkeypatch.setattr(_questions, "get_settings", lambda p: default_settings())
    with pytest.raises(_Plpy.SPIError):
        _questions._fetch_again(plpy, SQL, "public")
