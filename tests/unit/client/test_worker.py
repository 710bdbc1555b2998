"""The worker's answer to one request, with a stub pipeline and a stand-in connection: it acts
as the submitting role and only while answering, keeps the rows as JSON objects under the
request_rows cap, and turns every failure into the request's error."""

from __future__ import annotations

from types import SimpleNamespace

import psycopg

from nl2sql.client.worker import Request, answer_one


class Conn:
    """Records the statements run on it; ``refuse`` makes statements starting with it fail."""

    def __init__(self, refuse: str | None = None):
        self.ran: list[str] = []
        self.refuse = refuse
        self.closed = False

    def execute(self, query, params=None):
        text = query if isinstance(query, str) else query.as_string(None)
        if self.refuse and text.startswith(self.refuse):
            raise psycopg.errors.InsufficientPrivilege("permission denied to set role")
        self.ran.append(text)
        return self


REQUEST = Request(7, 'analyst "a"', "how many singers?")


def test_the_answer_is_asked_as_the_submitting_role_and_the_role_reset():
    conn = Conn()
    seen = []

    def ask(c, request):
        seen.append(list(c.ran))
        return SimpleNamespace(
            sql="SELECT n, n FROM t",
            columns=["n", "n"],
            rows=[(1, 2), (3, 4), (5, 6)],
            confidence=0.75,
            log_id=11,
        )

    result = answer_one(conn, REQUEST, ask, rows=2)
    assert seen == [['SET ROLE "analyst ""a"""']]  # quoted as an identifier, before asking
    assert conn.ran[-1] == "RESET ROLE"
    assert result.error is None
    assert result.rows == [{"n": 1, "n_2": 2}, {"n": 3, "n_2": 4}]
    assert (result.row_count, result.confidence, result.log_id) == (3, 0.75, 11)


def test_a_pipeline_error_is_the_requests_answer_and_the_role_is_reset():
    conn = Conn()

    def ask(c, request):
        raise RuntimeError("the model said no")

    result = answer_one(conn, REQUEST, ask, rows=10)
    assert result.error == "nl2sql worker: the model said no"
    assert conn.ran[-1] == "RESET ROLE"


def test_a_role_the_worker_may_not_act_as_is_refused_without_asking():
    asked = []
    result = answer_one(Conn(refuse="SET ROLE"), REQUEST, lambda c, r: asked.append(r), rows=10)
    assert not asked
    assert "GRANT" in result.error and 'analyst "a"' in result.error
