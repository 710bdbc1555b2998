"""Query rewriting (ReBoost): relative time made explicit."""

from __future__ import annotations

from datetime import date

import pytest

from nl2sql.retrieval.rewriting import needs_rewrite, original_question, rewrite_relative_time


def test_this_month_becomes_explicit_dates():
    rw = rewrite_relative_time("How many concerts this month?", date(2024, 2, 10))
    assert rw.question == "How many concerts this month (from 2024-02-01 to 2024-02-29)?"
    assert rw.rewrites[0].phrase == "this month" and rw.today == "2024-02-10"


@pytest.mark.parametrize(
    "q,expect",
    [
        ("concerts last year", "last year (from 2023-01-01 to 2023-12-31)"),
        ("concerts today", "today (on 2024-02-10)"),
        ("singers currently on tour", "currently (as of 2024-02-10)"),
        ("who is singing now", "now (as of 2024-02-10)"),
        ("sales in the last 2 weeks", "in the last 2 weeks (from 2024-01-27 to 2024-02-10)"),
        ("last month", "last month (from 2024-01-01 to 2024-01-31)"),
        ("this week", "this week (from 2024-02-05 to 2024-02-11)"),
    ],
)
def test_relative_time_phrases(q, expect):
    assert expect in rewrite_relative_time(q, date(2024, 2, 10)).question


def test_questions_without_relative_time_are_untouched():
    q = "What is the snow depth known about the nowhere stadium?"
    assert not needs_rewrite(q)
    rw = rewrite_relative_time(q, date(2024, 2, 10))
    assert rw.question == q and rw.rewrites == [] and rw.today is None


@pytest.mark.parametrize(
    "q",
    [
        "Which students currently live in Texas?",
        "How many players are now playing for the Bears?",
        "List the staff presently employed at the hospital.",
        "Who currently holds the record?",
    ],
)
def test_now_before_a_verb_of_state_is_not_a_time_filter(q):
    rw = rewrite_relative_time(q, date(2024, 2, 10))
    assert rw.question == q and rw.rewrites == []


def test_now_as_time_still_rewritten_next_to_a_state_phrase():
    rw = rewrite_relative_time(
        "Which singers currently on tour currently live in Paris?", date(2024, 2, 10)
    )
    assert rw.question == (
        "Which singers currently (as of 2024-02-10) on tour currently live in Paris?"
    )


@pytest.mark.parametrize(
    "q",
    [
        "How many concerts this month?",
        "concerts last year and today, singers currently on tour",
        "sales in the last 2 weeks (net)",
    ],
)
def test_original_question_undoes_the_rewrite(q):
    rw = rewrite_relative_time(q, date(2024, 2, 10))
    assert rw.question != q and original_question(rw.question) == q
