"""A reindex by several worker processes (``nl2sql reindex --jobs N``, ``nl2sql-index --jobs
N``, ``--join``): each claims the queued tables of a run one at a time (``nl2sql._reindex_claim``:
FOR UPDATE SKIP LOCKED in the transaction that indexes the table, as pgai's vectorizer workers
claim batches), until none is left; docs/indexing.md "Several workers"."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from typing import Any

__all__ = [
    "RETRY_SQLSTATES",
    "claim_loop",
    "run_pool",
    "server_worker",
    "wait_for_others",
    "worker_name",
]

# A claim that met a deadlock or a serialization failure (two workers writing the same new
# strings of the trigram mirror) rolled back with its work; the table is queued again and
# claimed anew, at most this many times in a row by one worker.
RETRY_SQLSTATES = ("40P01", "40001")
MAX_RETRIES = 5


def worker_name(i: int) -> str:
    """``host:pid:i``, stored with each table a worker indexed (``reindex_queue.done_by``).

    Args:
        i: the worker's number in its pool.

    Returns:
        The name (text).
    """
    return f"{socket.gethostname()}:{os.getpid()}:{i}"


def claim_loop(claim: Callable[[], Any]) -> list[dict]:
    """Call ``claim`` until it returns None, retrying the claims that rolled back for a
    deadlock (``RETRY_SQLSTATES``, at most ``MAX_RETRIES`` in a row).

    Args:
        claim: one claim (``nl2sql._reindex_claim``): its counts (dict or JSON text) or None.

    Returns:
        The counts of each table claimed and indexed.

    Raises:
        Whatever ``claim`` raised other than a retried deadlock.
    """
    results, retries = [], 0
    while True:
        try:
            r = claim()
        except Exception as e:  # psycopg.Error or ClientError; both carry the sqlstate
            if getattr(e, "sqlstate", None) in RETRY_SQLSTATES and retries < MAX_RETRIES:
                retries += 1
                continue
            raise
        if r is None:
            return results
        retries = 0
        results.append(r if isinstance(r, dict) else json.loads(r))


def server_worker(dsn: str | None, run_id: int | None, name: str) -> list[dict]:
    """A worker of ``nl2sql-index``: the database's backends embed (``_reindex_claim`` in SQL).

    Args:
        dsn: libpq connection string of the database.
        run_id: the run to work on; None: any run with tables left (``--join``).
        name: the worker's name (``worker_name``).

    Returns:
        The counts of each table it indexed (``_reindex_table``'s, with ``run_id``).

    Raises:
        psycopg.Error: the server refused a claim (other than a deadlock, retried).
    """
    import psycopg  # in the spawned worker only

    with psycopg.connect(dsn, autocommit=True) as conn:
        return claim_loop(
            lambda: conn.execute("SELECT nl2sql._reindex_claim(%s, %s)", (run_id, name)).fetchone()[
                0
            ]
        )


def _split_threads(jobs: int) -> None:
    """In a spawned worker: the bulk encoder's intra-op threads (``NL2SQL_EMBED_THREADS``,
    unless set) are this machine's CPUs shared among the ``jobs`` workers, so that workers
    embedding in this process (``nl2sql reindex --jobs``) do not oversubscribe the cores."""
    if "NL2SQL_EMBED_THREADS" not in os.environ:
        os.environ["NL2SQL_EMBED_THREADS"] = str(max(1, len(os.sched_getaffinity(0)) // jobs))


def run_pool(
    worker: Callable[[str | None, int | None, str], list[dict]],
    dsn: str | None,
    run_id: int | None,
    jobs: int,
    on_tick: Callable[[], object] | None = None,
) -> list[dict]:
    """Run ``jobs`` worker processes (spawned: nothing of this process is shared) to the end.

    Args:
        worker: ``server_worker`` or ``connection.reindex_worker`` (module-level: spawned).
        dsn: libpq connection string of the database.
        run_id: the run.
        jobs: how many processes (>= 1).
        on_tick: called about once a second while they work (a progress display).

    Returns:
        The indexed tables' counts of all workers.

    Raises:
        Whatever a worker raised (the others are waited for first).
    """
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=jobs, mp_context=ctx, initializer=_split_threads, initargs=(jobs,)
    ) as pool:
        futs = [pool.submit(worker, dsn, run_id, worker_name(i)) for i in range(jobs)]
        while True:
            done, running = wait(futs, timeout=1.0, return_when=FIRST_EXCEPTION)
            if on_tick is not None:
                on_tick()
            if not running or any(f.exception() for f in done):
                break
        wait(futs)
        return [r for f in futs for r in f.result()]


def wait_for_others(
    pending: Callable[[], int], claim_all: Callable[[], list[dict]], poll_s: float = 0.5
) -> list[dict]:
    """After the pool: wait while tables of the run are held by workers elsewhere (``--join``
    on other machines), claiming any that a dead worker released.

    Args:
        pending: the run's tables not yet done (``_reindex_pending``).
        claim_all: claims until none is left (a ``claim_loop`` in this process).
        poll_s: seconds between looks.

    Returns:
        The counts of the tables this process indexed meanwhile.
    """
    out: list[dict] = []
    while pending() > 0:
        got = claim_all()
        out += got
        if not got:
            time.sleep(poll_s)
    return out
