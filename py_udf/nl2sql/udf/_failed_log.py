"""The query log row of a call that raises because no SQL was chosen (``nl2sql()``, ``ask``,
``narrate``), written where the error cannot undo it: by the shared process, committed at once;
else in the call's own transaction, as every other call's row (docs/operations.md "The query
log")."""

from __future__ import annotations

import json
from typing import Any

from ..core import query_log, spi
from ..embedding import query_log_relay
from ..model import quota

# what the in-transaction writer (nl2sql._log_query) would write: the role it attributes the row
# to, read in the caller's context
_WHO = (
    "SELECT pg_catalog.pg_is_in_recovery() AS replica, pg_catalog.current_database() AS db, "
    "nl2sql._acting_role(current_user) AS role"
)


def keep(plpy, trace: dict[str, Any]) -> tuple[int | None, str | None]:
    """Write the ``nl2sql.query_log`` row of a call about to raise (no SQL chosen): one row,
    by one path.

    Beside the database (``nl2sql.client``: its ``plpy`` has ``rows_after_rollback``) the trace
    goes to that list: the client writes it once the call's transaction rolled back. Inside
    PostgreSQL the shared process writes and commits it (``query_log_relay.relay_log``); when
    it cannot, the row is written here, in the caller's transaction, which the error rolls back.

    Args:
        trace: the call's trace, already redacted.

    Returns:
        ``(id, None)``: the row kept; ``(None, why)``: written in the caller's transaction
        (undone by the error), ``why`` for the hint; ``(None, None)``: nothing written here (a
        read replica, or the client writes it).

    Raises:
        plpy.SPIError: the in-transaction insert failed; the statement was cancelled.
    """
    later = getattr(plpy, "rows_after_rollback", None)
    if later is not None:
        later.append(trace)
        return None, None
    who = spi.query(plpy, _WHO)[0]
    if who["replica"]:
        return None, None
    got, why = query_log_relay.relay_log(
        {
            "db": who["db"],
            "role_name": who["role"],
            "question": trace.get("question") or "",
            "sql": trace.get("sql"),
            "confidence": trace.get("confidence"),
            "error": trace.get("error"),
            "trace": json.dumps(trace, default=str),
            "conversation": trace.get("conversation"),
            "usage": quota.failed_call(trace.get("tokens")),
        }
    )
    if got is not None:
        return got, None
    query_log.log_query(plpy, trace)
    return None, why
