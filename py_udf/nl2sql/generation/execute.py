"""Executing candidates: read-only, rolled back, time-limited, capped (internals/generation.md)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .. import answers
from ..core import spi
from ..core.errors import CandidateRefused, ResultTooLarge
from ..core.sqlcheck import has_top_level_order
from ..core.types import Candidate, Status
from . import _session_state as session_state


class _Rollback(Exception):
    """Raised inside the subtransaction to roll it back after a successful execution."""


# The watchdog helper: one bash process per backend, kept between candidates (starting a
# process per candidate cost ~1-2 ms each, more from a backend holding the embedding model).
# Protocol on its stdin/stdout: "arm <seconds>" starts the clock; the next line ("disarm")
# stops it and is answered "ok", or "fired" when SIGINT was already sent. It exits when the
# backend closes the pipe (backend exit), also while armed.
_HELPER_SCRIPT = r"""
pid=$1
while IFS= read -r line; do
  case "$line" in
    arm\ *)
      secs=${line#arm }
      if IFS= read -r -t "$secs" line2; then
        echo ok
      else
        rc=$?
        if [ "$rc" -gt 128 ]; then
          kill -INT "$pid"
          echo fired
          IFS= read -r line2 || exit 0
        else
          exit 0
        fi
      fi ;;
    *) echo ok ;;
  esac
done
"""
_HELPER: dict[int, subprocess.Popen] = {}


def _helper(pid: int) -> subprocess.Popen:
    proc = _HELPER.get(pid)
    if proc is None or proc.poll() is not None:
        proc = subprocess.Popen(
            ["/bin/bash", "-c", _HELPER_SCRIPT, "nl2sql-watchdog", str(int(pid))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
            close_fds=True,
            start_new_session=True,
        )
        _HELPER[pid] = proc
    return proc


class Watchdog:
    """Send SIGINT to ``pid`` after ``timeout_ms`` unless stopped first (constructing arms it).

    Args:
        pid: the process id of the backend to signal (``os.getpid()``).
        timeout_ms: milliseconds until the signal (at least 1).

    Raises:
        BrokenPipeError: (or OSError) the helper cannot be armed, even after a restart.
    """

    def __init__(self, pid: int, timeout_ms: int):
        secs = max(timeout_ms, 1) / 1000.0
        for attempt in (0, 1):
            self.proc = _helper(pid)
            try:
                self.proc.stdin.write(f"arm {secs:.3f}\n".encode())
                return
            except (BrokenPipeError, OSError):
                _HELPER.pop(pid, None)
                if attempt:
                    raise

    def stop(self) -> bool:
        """Stop the clock.

        Returns:
            True when the helper had already sent the signal (False also when it is gone).
        """
        try:
            self.proc.stdin.write(b"disarm\n")
            return self.proc.stdout.readline().strip() == b"fired"
        except (BrokenPipeError, OSError):
            return False


def _watchdog(plpy, timeout_ms: int):
    """The time limit of one statement: the seam's own beside the database (``plpy.watchdog``,
    a cancel request), else a ``Watchdog`` signalling this backend."""
    own = getattr(plpy, "watchdog", None)
    return own(timeout_ms) if own is not None else Watchdog(os.getpid(), timeout_ms)


def is_cancel(e: Exception) -> bool:
    """Tell whether a database error is a cancel (SQLSTATE 57014: the user, or a time limit).

    Args:
        e: the error (``plpy.SPIError`` or any exception).

    Returns:
        True for a cancelled statement.
    """
    return getattr(e, "sqlstate", None) == "57014" or "canceling statement" in str(e)


# Result signatures the vote groups candidates by. Source: PET-SQL (Li et al. 2024) §3.4.
def normalize_value(v: Any) -> Any:
    """Make a cell value comparable across candidates.

    Args:
        v: a cell value as decoded from JSON (str, int, float, Decimal, bool, None, list, dict).

    Returns:
        Numbers as floats rounded to 6 significant digits, NaN and infinities as text, lists and
        dicts as JSON text with sorted keys; the rest as it is.
    """
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float, Decimal)):
        f = float(v)
        if math.isnan(f) or math.isinf(f):
            return str(f)
        return float(f"{f:.6g}")
    if isinstance(v, (list, dict)):
        return json.dumps(v, sort_keys=True, default=str)
    return v


def row_from_json(text: str) -> tuple:
    """Decode one row of ``row_to_json(...)::text`` (numbers read as Decimal, then normalised).

    Args:
        text: a JSON object text as PostgreSQL's ``row_to_json`` writes it.

    Returns:
        The row's values in column order (duplicate names kept), through ``normalize_value``.
    """
    pairs = json.loads(text, object_pairs_hook=lambda kv: kv, parse_float=Decimal)
    return tuple(normalize_value(v) for _, v in pairs)


def result_signature(rows: list[tuple], ordered: bool = False, keyed: list[str] = ()) -> str:
    """Compute the signature of a query result, equal for equal results.

    Args:
        rows: the result's rows, values normalised (``row_from_json``).
        ordered: when True the row order counts; else the rows are a multiset (sorted first).
        keyed: the rows' JSON texts (``json.dumps(row, default=str)``); empty: written here.

    Returns:
        SHA-256 of the rows' JSON texts, 64 lower-case hex characters.
    """
    keyed = keyed or [json.dumps(r, default=str) for r in rows]
    h = hashlib.sha256()
    for k in keyed if ordered else sorted(keyed):
        h.update(k.encode() + b"\n")
    return h.hexdigest()


_RUN_SQL = "SELECT r FROM nl2sql._run_candidate($1, $2, $3, $4) AS r"
_EXPLAIN_SQL = "SELECT nl2sql._explain_candidate($1, $2) AS plan"


@dataclass(frozen=True)
class PlanLimits:
    """The plan-cost limit (settings ``max_plan_cost``, ``max_plan_rows``; 0: no limit)."""

    max_cost: float = 0.0  # the planner's total cost units
    max_rows: float = 0.0  # the planner's estimate of the rows returned

    @property
    def on(self) -> bool:
        """Whether either limit is set."""
        return self.max_cost > 0 or self.max_rows > 0


@dataclass
class Planned:
    """What planning a checked query came to (``plan_checked``)."""

    ms: float  # wall-clock milliseconds
    cost: float | None = None  # the plan root's Total Cost; None when it did not plan
    rows: float | None = None  # the plan root's Plan Rows
    timed_out: bool = False  # the watchdog cancelled it at the time limit
    error: str | None = None  # PostgreSQL's first line when it does not plan
    locks: list[str] = field(default_factory=list)  # advisory locks it left (released)
    held: frozenset = frozenset()  # advisory locks held after it (the run's "before")


def plan_checked(plpy, sql: str, search_path: str, timeout_ms: int) -> Planned:
    """The planner's estimate of a checked query, guarded as its execution is: ``EXPLAIN
    (FORMAT JSON)`` as the caller over the caller's search_path, read-only, in a subtransaction
    rolled back (``nl2sql._explain_candidate``), under the watchdog, with the advisory locks
    taken meanwhile released. The planner evaluates stable and immutable functions of constants
    while it estimates, so planning runs user functions (docs/safety.md "Planning").
    Source: pgai's text-to-SQL (cost check with EXPLAIN before running).

    Args:
        sql: the query; it must have passed the check.
        search_path: the caller's search_path text.
        timeout_ms: wall-clock limit for the planning, in milliseconds.

    Returns:
        ``Planned``: the estimate, or ``timed_out``, or PostgreSQL's ``error``; ``locks`` names
        every advisory lock the planning left (each released as often as it was held).

    Raises:
        plpy.SPIError: the user's own cancel (or the caller's statement_timeout), re-raised.
    """
    before = session_state.advisory_locks(plpy)
    t0 = time.perf_counter()
    try:
        plan, err, fired = _explained(plpy, sql, search_path, timeout_ms)
    finally:
        taken, held = session_state.release_new_held(plpy, before)
    out = Planned(round((time.perf_counter() - t0) * 1000, 3), locks=taken, held=held)
    if err is not None and is_cancel(err) and not fired:
        raise err
    if err is not None:
        out.timed_out = fired and is_cancel(err)
        out.error = None if out.timed_out else str(err).splitlines()[0][:500]
        return out
    root = json.loads(plan)[0]["Plan"]
    out.cost, out.rows = float(root["Total Cost"]), float(root["Plan Rows"])
    return out


def _explained(plpy, sql: str, search_path: str, timeout_ms: int):
    """``nl2sql._explain_candidate`` under the watchdog: (plan JSON or None, the error or None,
    whether the watchdog fired)."""
    dog = _watchdog(plpy, timeout_ms)
    plan, err = None, None
    try:
        with plpy.subtransaction():
            plan = spi.query(plpy, _EXPLAIN_SQL, [sql, search_path], ("text", "text"))[0]["plan"]
            raise _Rollback()
    except _Rollback:
        pass
    except plpy.SPIError as e:
        err = e
    finally:
        fired = dog.stop()
        if fired:  # the signal may still be pending: let it land on a throwaway statement
            try:
                with plpy.subtransaction():
                    spi.cancel_point(plpy)
            except plpy.SPIError:
                pass
    return plan, err, fired


def plan_refusal(cost: float, rows: float, limits: PlanLimits) -> str | None:
    """Why a plan is over the limits, naming the estimate and the setting; None within them.

    Args:
        cost: the planner's total cost.
        rows: the planner's row estimate.
        limits: the limits.

    Returns:
        The reason (``"refused before running: ..."``), or None.
    """
    over = []
    if limits.max_cost > 0 and cost > limits.max_cost:
        over.append(f"estimated cost {cost:.0f} > max_plan_cost {limits.max_cost:g}")
    if limits.max_rows > 0 and rows > limits.max_rows:
        over.append(f"estimated rows {rows:.0f} > max_plan_rows {limits.max_rows:g}")
    if not over:
        return None
    return "refused before running: " + "; ".join(over) + " (EXPLAIN estimate)"


_RUN_TYPES = ("text", "text", "int4", "int8")
DEFAULT_MAX_BYTES = 50_000_000  # the default of the setting max_result_bytes


def _too_large(max_bytes: int) -> str:
    return (
        f"result too large: more than {max_bytes} bytes of rows (max_result_bytes); "
        f"the query was stopped before its whole result was fetched"
    )


def _readonly_rows(
    plpy,
    sql: str,
    search_path: str,
    timeout_ms: int,
    max_rows: int,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> tuple[list[str | None], float, bool]:
    """Run ``sql`` through ``nl2sql._run_candidate`` (rolled back, under the watchdog): (row
    texts, at most ``max_rows + 1``, a last None when past ``max_bytes``; ms; whether it fired)."""
    rows: list[str] = []
    dog = _watchdog(plpy, timeout_ms)
    t0 = time.perf_counter()
    failed = False
    try:
        with plpy.subtransaction():
            rows = [
                r["r"]
                for r in spi.query(
                    plpy, _RUN_SQL, [sql, search_path, max_rows, max_bytes], _RUN_TYPES
                )
            ]
            raise _Rollback()
    except _Rollback:
        pass
    except plpy.SPIError:
        failed = True
        raise
    finally:
        elapsed = (time.perf_counter() - t0) * 1000
        fired = dog.stop()
        if fired and not failed:
            # the signal may still be pending: let it land on a throwaway statement
            try:
                with plpy.subtransaction():
                    spi.cancel_point(plpy)
            except plpy.SPIError:
                pass
    return rows, elapsed, fired


def run_candidate(
    plpy,
    cand: Candidate,
    search_path: str,
    timeout_ms: int,
    max_rows: int,
    ordered: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    limits: PlanLimits | None = None,
    keep_rows: bool = False,
) -> Candidate:
    """Execute ``cand.sql`` (already checked) read-only and time-limited; fill its outcome.
    With ``limits``, the planner's estimate comes first and a plan over them is not run.

    Source: MCS-SQL (Lee et al. 2024) §3.3; OpenSearch-SQL (Xie et al. 2024) §3.6.

    Args:
        cand: the candidate; ``cand.sql`` must have passed the check.
        search_path: the caller's search_path text, so names resolve as the user's would.
        timeout_ms: wall-clock limit in milliseconds; on expiry status is ``timeout``.
        max_rows: most rows fetched for the result hash; more set ``truncated``.
        ordered: when True the row order counts in the result hash (else a multiset).
        max_bytes: most bytes of row_to_json text fetched; a larger result is refused.
        limits: the plan-cost limit; None (or neither set): no EXPLAIN.
        keep_rows: keep every row fetched (at most ``max_rows``) in ``cand.rows``, so that
            the rows returned are those of this execution (``nl2sql.ask``), not of a re-run.

    Returns:
        ``cand``: ``status`` ``ok`` (``result_hash``, ``row_count``, ``truncated``,
        ``sample_rows``, ``rows`` with ``keep_rows``), ``error`` (the server's first line, ≤ 500 characters), ``timeout`` or
        ``refused`` (``result too large: ...``, or ``refused before running: ...`` over the
        plan limits); ``exec_ms`` (ms) always; ``plan_cost``, ``plan_rows`` with ``limits``.

    Raises:
        plpy.SPIError: the user's own cancel before the time limit (re-raised, never swallowed).
    """
    left, before = timeout_ms, None
    if limits is not None and limits.on:
        planned = plan_checked(plpy, cand.sql, search_path, timeout_ms)
        if _plan_decides(cand, planned, limits, timeout_ms):
            return cand
        left = max(1, timeout_ms - int(planned.ms))  # planning and running share the limit
        before = planned.held  # as read after planning: no query between the two
    if before is None:
        before = session_state.advisory_locks(plpy)
    try:
        rows = _run_and_record(plpy, cand, search_path, left, max_rows, ordered, max_bytes)
    finally:
        taken = session_state.release_new(plpy, before)
    cand.rows = rows if keep_rows and cand.status == Status.OK else None
    if cand.status == Status.TIMEOUT and left != timeout_ms:
        cand.reason = f"cancelled after {timeout_ms} ms time limit (planning and running)"
    if taken:
        cand.status, cand.reason = Status.REFUSED, session_state.refusal(taken)
        cand.result_hash, cand.row_count, cand.sample_rows, cand.rows = None, None, [], None
        cand.answer = None
    return cand


def _plan_decides(cand: Candidate, planned: Planned, limits: PlanLimits, timeout_ms: int) -> bool:
    """Record ``planned`` on ``cand`` (``plan_cost``/``plan_rows``); True (``cand`` refused or
    timed out, not run) when planning left a lock, ran out of time or is over ``limits``. A
    query that does not plan is left to execution (the same error there)."""
    cand.plan_cost, cand.plan_rows = planned.cost, planned.rows
    if planned.locks:
        cand.status, cand.reason = Status.REFUSED, session_state.refusal(planned.locks, True)
    elif planned.timed_out:
        cand.status = Status.TIMEOUT
        cand.reason = (
            f"cancelled after {timeout_ms} ms time limit while planning (the planner evaluates "
            "stable and immutable functions of constants)"
        )
    elif planned.cost is None or planned.rows is None:
        return False
    elif (why := plan_refusal(planned.cost, planned.rows, limits)) is not None:
        cand.status, cand.reason = Status.REFUSED, why
    else:
        return False
    cand.result_hash, cand.row_count, cand.sample_rows = None, None, []
    cand.exec_ms = planned.ms
    return True


def _run_and_record(
    plpy,
    cand: Candidate,
    search_path: str,
    timeout_ms: int,
    max_rows: int,
    ordered: bool,
    max_bytes: int,
) -> list[str] | None:
    """Execute ``cand.sql`` and record its outcome on ``cand``; return its rows (at most
    ``max_rows`` ``row_to_json`` texts) when it ran to the end, else None."""
    t0 = time.perf_counter()
    try:
        rows, elapsed, _ = _readonly_rows(
            plpy, cand.sql, search_path, timeout_ms, max_rows, max_bytes
        )
    except plpy.SPIError as err:
        elapsed = (time.perf_counter() - t0) * 1000
        cand.exec_ms = round(elapsed, 3)
        if is_cancel(err):
            if elapsed >= timeout_ms * 0.9:
                cand.status, cand.reason = (
                    Status.TIMEOUT,
                    f"cancelled after {timeout_ms} ms time limit",
                )
                return None
            raise  # the user's own cancel
        cand.status = Status.ERROR
        cand.reason = str(err).splitlines()[0][:500]
        cand.sqlstate = getattr(err, "sqlstate", None)
        return None
    cand.exec_ms = round(elapsed, 3)
    if rows and rows[-1] is None:
        cand.status, cand.reason = Status.REFUSED, _too_large(max_bytes)
        return None
    cand.truncated = len(rows) > max_rows
    parsed = [row_from_json(r) for r in rows[:max_rows]]
    cand.row_count, cand.answer = len(parsed), answers.describe(parsed, rows[0] if rows else None)
    # shown to a multiple-choice selector through gate.Gate.rows (whole rows parse as JSON)
    cand.sample_rows = [r[:2000] for r in rows[:3]]
    keyed = [json.dumps(r, default=str) for r in parsed]  # written once for both signatures
    cand.result_hash = result_signature(parsed, ordered, keyed)
    cand.order_hash = result_signature(parsed, True, keyed) if _orders_rows(cand) else None
    cand.status = Status.OK
    return rows[:max_rows]


def _orders_rows(cand: Candidate) -> bool:
    """Whether ``cand.sql``'s outermost statement has an ORDER BY: as the check read it
    (``cand.ordered``), else parsed again (False when it does not parse)."""
    try:
        return cand.ordered if cand.ordered is not None else has_top_level_order(cand.sql)
    except CandidateRefused:
        return False


def fetch_rows(
    plpy,
    sql: str,
    search_path: str,
    timeout_ms: int,
    max_rows: int,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[str]:
    """Fetch the rows of a checked query, read-only and time-limited (``nl2sql.ask``).

    Args:
        sql: the query; it must have passed the check.
        search_path: the caller's search_path text.
        timeout_ms: wall-clock limit in milliseconds.
        max_rows: most rows returned.
        max_bytes: most bytes of row_to_json text returned (setting ``max_result_bytes``).

    Returns:
        At most ``max_rows`` rows, each a ``row_to_json`` text.

    Raises:
        plpy.SPIError: the query failed or was cancelled (time limit or the user's cancel).
        CandidateRefused: the query took a session-level advisory lock (released again).
        ResultTooLarge: the rows passed ``max_bytes`` (the query was stopped there).
    """
    before = session_state.advisory_locks(plpy)
    try:
        rows, _, _ = _readonly_rows(plpy, sql, search_path, timeout_ms, max_rows, max_bytes)
    finally:
        taken = session_state.release_new(plpy, before)
    if taken:
        raise CandidateRefused(session_state.refusal(taken))
    if rows and rows[-1] is None:
        raise ResultTooLarge(_too_large(max_bytes))
    return rows[:max_rows]
