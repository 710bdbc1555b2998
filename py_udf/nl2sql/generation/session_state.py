"""Session state a candidate could leave behind its rolled-back subtransaction.

A candidate runs read-only in a subtransaction that is always rolled back (``execute.py``), but
a session-level advisory lock (``pg_advisory_lock`` and ``_shared``) survives a rollback: it is
held until released or until the session ends. The volatility check refuses a direct call of
``pg_advisory_lock``, but not a call it cannot see: a user-defined operator whose function takes
one, a function called in column notation (``t.fn``), or a function declared STABLE that calls
one. This module is the backstop: ``advisory_locks`` snapshots the backend's advisory locks
before a candidate, ``release_new`` releases exactly those the candidate added (never the
caller's own, taken before the call) and names them for the refusal reason.

Other session state a candidate could leave (a prepared statement, LISTEN, a cursor, SET) takes
a statement the shape check refuses (``sqlcheck.check_candidate``), or is undone by the
rollback (``set_config(..., true)``, transaction-level advisory locks, temporary objects).

Limit: a session-level advisory lock is re-entrant and ``pg_locks`` lists it once whatever its
count, so a candidate taking again a lock the caller already held is not seen here (the
caller's lock stays held in any case; its count is one higher until the session ends).
"""

from __future__ import annotations

from ..core import spi

# One row per advisory lock this backend holds (or waits for): its key fields and mode.
_SNAPSHOT_SQL = (
    "SELECT classid, objid, objsubid, mode FROM pg_catalog.pg_locks "
    "WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid()"
)
_RELEASE_SQL = "SELECT nl2sql._advisory_release($1, $2, $3, $4, $5) AS n"
_RELEASE_TYPES = ("oid", "oid", "int4", "bool", "int4")
# most holds released per lock (a candidate may take the same lock once per row)
MAX_RELEASES = 1_000_000

Lock = tuple[int, int, int, str]


def advisory_locks(plpy) -> frozenset[Lock]:
    """The advisory locks this backend holds now (session- and transaction-level).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        A set of ``(classid, objid, objsubid, mode)`` as ``pg_locks`` lists them.

    Raises:
        plpy.SPIError: the query failed (e.g. cancelled).
    """
    return frozenset(
        (int(r["classid"]), int(r["objid"]), int(r["objsubid"]), str(r["mode"]))
        for r in spi.query(plpy, _SNAPSHOT_SQL)
    )


def describe(lock: Lock) -> str:
    """How a lock is named in a refusal reason: the key as the lock function took it.

    Args:
        lock: ``(classid, objid, objsubid, mode)`` from ``advisory_locks``.

    Returns:
        E.g. ``pg_advisory_lock(42)`` or ``pg_advisory_lock_shared(1, 2)``.

    Raises:
        Nothing.
    """
    classid, objid, objsubid, mode = lock
    fn = "pg_advisory_lock_shared" if mode == "ShareLock" else "pg_advisory_lock"
    if objsubid == 1:  # one bigint key: high half in classid, low half in objid
        key = (classid << 32) | objid
        if key >= 1 << 63:
            key -= 1 << 64
        return f"{fn}({key})"
    signed = [v - (1 << 32) if v >= 1 << 31 else v for v in (classid, objid)]
    return f"{fn}({signed[0]}, {signed[1]})"


def release_new(plpy, before: frozenset[Lock]) -> list[str]:
    """Release every advisory lock this backend holds now that is not in ``before``.

    Each new lock is unlocked (``pg_advisory_unlock`` or ``pg_advisory_unlock_shared`` with its
    bigint or (int, int) key) as often as it is held, at most ``MAX_RELEASES`` times; locks in
    ``before`` (the caller's own) are left alone. Transaction-level advisory locks taken by a
    candidate are gone already (its subtransaction was rolled back).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        before: ``advisory_locks`` taken before the candidate ran.

    Returns:
        The new locks, each as ``describe`` names it (empty when the candidate left none).

    Raises:
        plpy.SPIError: a query failed (e.g. cancelled).
    """
    new = sorted(advisory_locks(plpy) - before)
    for classid, objid, objsubid, mode in new:
        spi.query(
            plpy,
            _RELEASE_SQL,
            [classid, objid, objsubid, mode == "ShareLock", MAX_RELEASES],
            _RELEASE_TYPES,
        )
    return [describe(lk) for lk in new]


def refusal(taken: list[str]) -> str:
    """The reason a candidate that left advisory locks is refused with.

    Args:
        taken: ``release_new``'s result (not empty).

    Returns:
        The reason for the trace.

    Raises:
        Nothing.
    """
    return (
        "took a session-level advisory lock that outlives the rolled-back candidate "
        f'(released: {", ".join(taken)}); see README "Safety"'
    )
