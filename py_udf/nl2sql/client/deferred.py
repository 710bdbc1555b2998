"""Deferred calls beside the database: the configuration functions whose checks need Python
(``sql/beside/003-deferred.sql``) record each call in ``nl2sql.deferred_call``; this module
applies the pending ones in the client process, each as the role that made it, through the same
``nl2sql.udf`` entry point as the extension's PL/Python body (docs/install.md, "PostgreSQL
without PL/Python")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .. import udf

__all__ = ["DEFERRED", "Applied", "apply_deferred"]

DEFERRED: dict[str, tuple[str, bool]] = {
    "add_verified_query": ("text, text, text", False),
    "add_template": ("text, text", False),
    "add_term": ("text, text, text", False),
    "remove_term": ("text", False),
    "add_example": ("text, text, text, text", False),
    "load_examples": ("text, text, text", True),
    "feedback": ("bigint, boolean, text, boolean", False),
    "approve_mined": ("bigint, text", False),
    "import_semantic_model": ("text", True),
    "prune_query_log": ("", True),
}
"""{function name: (argument types, returns jsonb)}: the functions a deferred call may name;
each is ``nl2sql.udf.<name>(plpy, *args)``, as in the extension."""

_MAY = "SELECT pg_catalog.has_table_privilege('nl2sql.deferred_call', 'UPDATE') AS ok"
_NEXT = (
    "SELECT id, function_name::text AS fn, args::text AS args, role_name::text AS role "
    "FROM nl2sql.deferred_call WHERE status = 'pending' AND id > $1 ORDER BY id LIMIT 1 "
    "FOR UPDATE SKIP LOCKED"
)
_STORE = (
    "UPDATE nl2sql.deferred_call SET status = $2, result = $3::jsonb, error = $4, "
    "done_at = CASE WHEN $2 = 'pending' THEN NULL ELSE pg_catalog.clock_timestamp() END "
    "WHERE id = $1"
)


@dataclass
class Applied:
    """What became of one deferred call.

    Attributes:
        id: the call's id (``nl2sql.deferred_call``).
        function: the function's name.
        role: the role that made the call and as which it ran.
        status: ``done``, ``refused``, or ``pending`` (left for a login that may act as the role).
        result: what the function returned (JSON), when done.
        error: why it was refused or left pending.
    """

    id: int
    function: str
    role: str
    status: str
    result: Any = None
    error: str | None = None


def _error_text(e: BaseException) -> str:
    """An error as the call stores it: nl2sql's own message (never a traceback or a DSN)."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return msg if msg.startswith("nl2sql") else f"nl2sql apply: {msg}"


def _set_role(plpy, role: str | None) -> None:
    """``SET LOCAL ROLE role`` (None: back to the session's role)."""
    target = plpy.quote_ident(role) if role else "NONE"
    plpy.execute(f"SET LOCAL ROLE {target}")


def _run(plpy, fn: str, args: list) -> Any:
    """One call through ``nl2sql.udf``, in a savepoint; its result as JSON-ready data."""
    with plpy.subtransaction():
        out = getattr(udf, fn)(plpy, *args)
    returns_jsonb = DEFERRED[fn][1]
    return json.loads(out) if returns_jsonb and isinstance(out, str) else out


def _apply_one(plpy, row: dict, prior: str | None) -> Applied:
    """Apply one pending call as its role; the session's role is ``prior`` again after."""
    fn, role = row["fn"], row["role"]
    call = Applied(row["id"], fn, role, "refused")
    if fn not in DEFERRED:
        call.error = f"nl2sql apply: {fn}() is not a function that is applied later"
        return call
    try:
        with plpy.subtransaction():
            _set_role(plpy, role)
    except Exception:  # noqa: BLE001 - any refusal of SET ROLE leaves the call for another login
        call.status = "pending"
        call.error = (
            f"nl2sql apply: this login may not act as role {role} (SET ROLE was refused): "
            f"GRANT {role} TO this login, or run nl2sql apply as a login that is a member of it"
        )
        return call
    try:
        sig = f"nl2sql.{fn}({DEFERRED[fn][0]})"
        may = plpy.execute(
            plpy.prepare(
                "SELECT pg_catalog.has_function_privilege($1, $2, 'EXECUTE') AS ok",
                ["text", "text"],
            ),
            [role, sig],
        )
        if not may[0]["ok"]:
            call.error = f"nl2sql apply: role {role} may no longer call nl2sql.{fn}"
            return call
        call.result = _run(plpy, fn, json.loads(row["args"]))
        call.status = "done"
    except Exception as e:  # noqa: BLE001 - the call's error is its outcome, recorded
        call.error = _error_text(e)
    finally:
        _set_role(plpy, prior)
    return call


def apply_deferred(plpy) -> list[Applied]:
    """Apply every pending deferred call, oldest first, each in its own savepoint as the role
    that made it (``SET LOCAL ROLE``; the function's privilege re-checked first), and record
    its result or error.

    Args:
        plpy: the client's database seam, inside a transaction; its login must be able to
            update ``nl2sql.deferred_call`` (else nothing is applied) and act as each role.

    Returns:
        What became of each call seen: done, refused (with the reason), or left pending.
    """
    if not plpy.execute(_MAY)[0]["ok"]:
        return []
    prior_row = plpy.execute("SELECT pg_catalog.current_setting('role') AS r")[0]["r"]
    prior = None if prior_row in ("none", "") else prior_row
    store = plpy.prepare(_STORE, ["bigint", "text", "text", "text"])
    nxt = plpy.prepare(_NEXT, ["bigint"])
    done: list[Applied] = []
    last = 0
    while rows := plpy.execute(nxt, [last]):
        call = _apply_one(plpy, rows[0], prior)
        result = None if call.result is None else json.dumps(call.result)
        plpy.execute(store, [call.id, call.status, result, call.error])
        done.append(call)
        last = call.id
    return done
