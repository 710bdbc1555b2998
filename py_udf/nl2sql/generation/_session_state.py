"""Session-level advisory locks a candidate could leave behind its rolled-back subtransaction:
snapshotted and released (docs/internals/generation.md "Session state")."""

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
    """Release every advisory lock held now that is not in ``before``, as often as it is held
    (at most ``MAX_RELEASES`` times).

    Args:
        before: ``advisory_locks`` taken before the candidate ran.

    Returns:
        The new locks, each as ``describe`` names it (empty when the candidate left none).

    Raises:
        plpy.SPIError: a query failed (e.g. cancelled).
    """
    return release_new_held(plpy, before)[0]


def release_new_held(plpy, before: frozenset[Lock]) -> tuple[list[str], frozenset[Lock]]:
    """``release_new``, and the advisory locks held once it is done: the ``before`` of the next
    step, read without another query.

    Args:
        before: ``advisory_locks`` taken before the candidate ran.

    Returns:
        ``(new locks as describe names them, the locks held now)``.

    Raises:
        plpy.SPIError: a query failed (e.g. cancelled).
    """
    now = advisory_locks(plpy)
    new = sorted(now - before)
    for classid, objid, objsubid, mode in new:
        spi.query(
            plpy,
            _RELEASE_SQL,
            [classid, objid, objsubid, mode == "ShareLock", MAX_RELEASES],
            _RELEASE_TYPES,
        )
    return [describe(lk) for lk in new], now - frozenset(new)


def refusal(taken: list[str], planning: bool = False) -> str:
    """The reason a candidate that left advisory locks is refused with.

    Args:
        taken: ``release_new``'s result (not empty).
        planning: the locks were taken while PostgreSQL planned it (a function the planner
            evaluated), before it ran.

    Returns:
        The reason for the trace.
    """
    when = " while PostgreSQL planned it" if planning else ""
    return (
        f"took a session-level advisory lock{when} that outlives the rolled-back candidate "
        f"(released: {', '.join(taken)}); see docs/safety.md"
    )
