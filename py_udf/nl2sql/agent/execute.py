"""The agent's own SQL, run as nl2sql runs a candidate (``nl2sql.execute_sql``, MCP tool
``execute_sql``): one read-only statement over the indexed relations the role may SELECT, every
check a candidate gets, planned and run read-only in a subtransaction rolled back, under the
time limit, the plan-cost limit, the row and byte caps and the advisory-lock safeguard, as the
calling role; each call logged (``source: agent``). Sources: the read-only modes of database MCP
servers (postgres-mcp ``execute_sql``, Supabase MCP ``read_only``) and the bypasses published
against them (docs/mcp.md "What holds at this door")."""

from __future__ import annotations

import json
import time
from typing import Any

from ..core import catalog, query_log
from ..core.errors import CandidateRefused
from ..core.redaction import redact
from ..core.settings import Settings, get_settings
from ..core.sqlcheck import to_sql
from ..core.types import Candidate, Status
from ..generation.db_checks import check_candidate_in_db
from ..generation.execute import PlanLimits, plan_checked, plan_refusal, run_candidate
from ..generation.explain_sql import one_query_text, without_comments
from .view import DATA_NOTICE, AgentView

SOURCE = "agent"
"""The query log's ``trace->>'source'`` of a statement an agent ran."""
MAX_ROWS = 1000
"""Most rows one call returns (its ``max_rows``; setting ``max_rows`` caps it too)."""
_HINTS = {
    "check": "send one read-only SELECT (WITH ... SELECT) over the indexed tables this role may "
    "SELECT, with no function that writes, sleeps, reads files or calls out, no locking clause "
    "and no second statement; list_tables / describe_table show what may be read",
    "plan": "narrow the query (filters, LIMIT, fewer joins) or ask the DBA to raise settings "
    "max_plan_cost / max_plan_rows; execute_sql(..., dry_run => true) shows the estimate",
    "timeout": "narrow the query or ask the DBA to raise setting candidate_timeout_ms",
    "size": "select fewer or smaller columns, or fewer rows (setting max_result_bytes)",
    "lock": "leave out advisory-lock functions: a query run for an agent may not hold a lock",
    "error": "fix the query as the database's message says (describe_table shows the columns)",
}


def _hint(status: str, reason: str) -> str:
    """What to do about a refusal or failure (``_HINTS``' key from status and reason)."""
    if status == Status.TIMEOUT:
        return _HINTS["timeout"]
    if status == Status.ERROR:
        return _HINTS["error"]
    if "advisory lock" in reason:
        return _HINTS["lock"]
    if "max_plan_" in reason:
        return _HINTS["plan"]
    if "max_result_bytes" in reason:
        return _HINTS["size"]
    return _HINTS["check"]


def checked_sql(plpy, sql: str | None, search_path: str) -> str:
    """The agent's statement as checked: one read-only query over indexed relations the role
    may SELECT (``write_kinds``, then ``check_candidate_in_db``), rendered from its parse.

    Args:
        sql: the statement text.
        search_path: the caller's search_path text.

    Returns:
        The query to run, rewritten from its parse without comments.

    Raises:
        CandidateRefused: empty, too long, more than one statement or one that writes or
            controls the transaction or session, or a refused function, operator, relation.
        NotIndexedError: no table the role may SELECT is indexed.
    """
    text = one_query_text(sql)
    schema = catalog.load_schema(plpy, catalog.parse_search_path(plpy, search_path), 0)
    tree = check_candidate_in_db(plpy, text.rstrip().rstrip(";"), schema)
    return to_sql(without_comments(tree))


def _refusal(status: str, reason: str) -> dict[str, Any]:
    return {"status": status, "reason": reason, "hint": _hint(status, reason)}


def _dry_run(plpy, sql: str, search_path: str, st: Settings) -> dict[str, Any]:
    """The planner's estimate of a checked query (never run), against the plan limits."""
    planned = plan_checked(plpy, sql, search_path, st.candidate_timeout_ms)
    if planned.locks:
        return _refusal(Status.REFUSED, "planning it took an advisory lock (released)")
    if planned.timed_out:
        return _refusal(Status.TIMEOUT, "planning ran past candidate_timeout_ms")
    if planned.error is not None:
        return _refusal(Status.ERROR, planned.error)
    out = {"status": Status.OK, "plan_cost": planned.cost, "plan_rows": planned.rows}
    why = plan_refusal(planned.cost, planned.rows, PlanLimits(st.max_plan_cost, st.max_plan_rows))
    if why is not None:
        out.update(_refusal(Status.REFUSED, why), plan_cost=planned.cost, plan_rows=planned.rows)
    return out


def _run(plpy, sql: str, search_path: str, max_rows: int, st: Settings) -> dict[str, Any]:
    """Run a checked query as a candidate runs (``run_candidate``, rows kept)."""
    cand = Candidate(source=SOURCE, model=SOURCE, raw_text=None, sql=sql)
    run_candidate(
        plpy, cand, search_path, st.candidate_timeout_ms, max_rows,
        max_bytes=st.max_result_bytes, limits=PlanLimits(st.max_plan_cost, st.max_plan_rows),
        keep_rows=True,
    )  # fmt: skip
    out: dict[str, Any] = {"status": cand.status, "exec_ms": cand.exec_ms}
    if cand.plan_cost is not None:
        out.update(plan_cost=cand.plan_cost, plan_rows=cand.plan_rows)
    if cand.status != Status.OK:
        out.update(_refusal(cand.status, cand.reason or ""))
        return out
    rows = [json.loads(r, object_pairs_hook=dict) for r in cand.rows or []]
    out.update(rows=rows, row_count=len(rows), truncated=cand.truncated)
    return out


def execute_sql(
    plpy,
    sql: str | None,
    search_path: str,
    max_rows: int = 50,
    dry_run: bool = False,
    for_model: bool = False,
) -> dict[str, Any]:
    """Run an agent's statement as a candidate is run, and log it.

    Args:
        sql: one read-only query.
        search_path: the caller's search_path text (names resolve as the caller's).
        max_rows: most rows returned, 1..``MAX_ROWS`` (setting ``max_rows`` caps it too).
        dry_run: plan it only (``plan_cost``, ``plan_rows``), never run.
        for_model: hand the result to a model reader (``AgentView``: the value rules of
            prompts, unless setting ``agent_values`` is ``role``).

    Returns:
        ``{"status": ok|refused|error|timeout, "sql", "rows", "row_count", "truncated",
        "exec_ms", "plan_cost", "plan_rows", "withheld_columns", "log_id"}`` with ``reason`` and
        ``hint`` when not ok (``rows_withheld`` and ``values_withheld`` when gated).

    Raises:
        CandidateRefused: ``max_rows`` out of range.
        NotIndexedError: no table the role may SELECT is indexed.
        plpy.SPIError: the user's own cancel (never swallowed).
    """
    max_rows = 50 if max_rows is None else int(max_rows)  # SQL NULL: the default
    if not 1 <= max_rows <= MAX_ROWS:
        raise CandidateRefused(f"max_rows must be between 1 and {MAX_ROWS}")
    st, t0 = get_settings(plpy), time.perf_counter()
    try:
        text = checked_sql(plpy, sql, search_path)
    except CandidateRefused as e:
        out = {"sql": sql, **_refusal(Status.REFUSED, str(e))}
    else:
        step = _dry_run if dry_run else _run
        args = (search_path, st) if dry_run else (search_path, min(max_rows, st.max_rows), st)
        out = {"sql": text, **step(plpy, text, *args)}
    out["dry_run"] = bool(dry_run)
    out["total_ms"] = round((time.perf_counter() - t0) * 1000, 3)
    out["log_id"] = _log(plpy, out)
    return _for_model(plpy, out, search_path, sql or "") if for_model else out


def _log(plpy, out: dict[str, Any]) -> int | None:
    """The call's query-log row: the SQL, status, row count and times, or the refusal."""
    trace = {k: v for k, v in out.items() if k not in ("rows", "log_id")}
    trace["source"] = SOURCE
    reason = out.get("reason")
    trace.update(question="", error=redact(reason) if reason else None)
    return query_log.log_query(plpy, trace)


def _for_model(plpy, out: dict[str, Any], search_path: str, asked: str) -> dict[str, Any]:
    """``out`` as a model reader may see it: rows gated, the error's quoted data withheld."""
    view = AgentView(plpy, search_path)
    if "rows" in out:
        out.update(view.rows(out.get("sql"), out["rows"]))
        out["data_notice"] = DATA_NOTICE
    if out.get("reason"):
        out["reason"] = view.error(out["reason"], asked)
    if view.gate is not None:
        out["values_withheld"] = view.report()
    return out
