"""The shared process's ledger of questions in flight (model/quota.py ``Ledger``): what a
session's committed read cannot see, settled by the ids its snapshot saw end."""

from __future__ import annotations

import pytest

from nl2sql.model.quota import QUESTION, TOKENS, Ledger


def state(xid, minute_questions=0, tokens_used=0, settled=(), qpm=2, tpd=1000):
    return {
        "role": "analyst",
        "limited": True,
        "replica": False,
        "quota_of": "analyst",
        "questions_per_minute": qpm,
        "tokens_per_day": tpd,
        "minute_questions": minute_questions,
        "tokens_used": tokens_used,
        "resets_minute": "12:01",
        "resets_day": "tomorrow",
        "xid": xid,
        "settled": list(settled),
    }


def take(ledger, kind=QUESTION, db="d", **kw):
    return ledger.apply({"op": "take", "db": db, "kind": kind, "state": state(**kw)})


# (steps: (xid, committed minute questions, settled ids) -> refused?), the last slot of 2
CASES = [
    ("two in flight fill the minute", [(1, 0, ()), (2, 0, ()), (3, 0, ())], [0, 0, 1]),
    ("an aborted one frees its slot", [(1, 0, ()), (2, 0, ()), (3, 0, (1,))], [0, 0, 0]),
    # committed before the reader's snapshot: its question is in the committed count now
    ("a committed one counts once", [(1, 0, ()), (2, 0, ()), (3, 1, (1,))], [0, 0, 1]),
    ("the committed count alone", [(1, 2, ())], [1]),
    # a session's own earlier question of the same transaction is in its own rows
    ("its own entry is not counted twice", [(1, 0, ()), (1, 1, ())], [0, 0]),
]


@pytest.mark.parametrize("steps, refused", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_last_slot_is_taken_once(steps, refused):
    ledger = Ledger()
    got = ["refused" in take(ledger, xid=x, minute_questions=m, settled=s) for x, m, s in steps]
    assert got == [bool(r) for r in refused]


def test_a_refusal_names_the_limit_and_counts_the_flight():
    ledger = Ledger()
    take(ledger, xid=1)
    take(ledger, xid=2)
    r = take(ledger, xid=3, minute_questions=1, qpm=3)
    assert r["refused"] == "questions_per_minute" and r["used"] == 3 and r["limit"] == 3


def test_tokens_of_others_in_flight_count_against_the_day():
    ledger = Ledger()
    take(ledger, xid=1)
    ledger.apply({"op": "add", "db": "d", "role": "analyst", "xid": 1, "tokens": 600})
    assert "refused" not in take(ledger, TOKENS, xid=2, tokens_used=300)
    r = take(ledger, TOKENS, xid=3, tokens_used=400)
    assert r["refused"] == "tokens_per_day" and r["used"] == 1000
    assert "refused" not in take(ledger, TOKENS, xid=3, tokens_used=400, settled=(1,))


def test_databases_and_roles_keep_their_own_counts():
    ledger = Ledger()
    take(ledger, xid=1, db="a")
    take(ledger, xid=2, db="a")
    assert "refused" not in take(ledger, xid=3, db="b")
    assert ledger.apply({"op": "pending"})["xids"] == [1, 2, 3]


def test_entries_nobody_settles_expire():
    ledger = Ledger(ttl_s=0.0)
    take(ledger, xid=1)
    assert ledger.apply({"op": "pending"})["xids"] == []


@pytest.mark.parametrize(
    "req", [{}, {"op": "steal"}, {"op": "take", "db": "d"}, {"op": "add", "db": "d"}]
)
def test_a_malformed_request_raises_for_a_400(req):
    with pytest.raises((KeyError, ValueError, TypeError)):
        Ledger().apply(req)
