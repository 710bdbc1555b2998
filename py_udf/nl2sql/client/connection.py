"""The Python API: ``connect`` → ``Client`` whose ``ask``, ``explain`` and ``reindex`` run the
server's own pipeline in this process over a psycopg connection, as its role, beside the
database; where the extension is installed its questions are its SQL functions (``_server``)
(docs/client.md)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg

from .. import udf
from ..agent.view import AgentView
from ..core import query_log
from ..core.errors import CandidateRefused, ClientError, Nl2sqlError
from ..core.settings import get_settings
from ..curated.business import embed_pending
from ..generation.execute import fetch_rows
from ..model import quota
from ..ops.indexer import sum_table_counts
from . import _jobs, _plpy
from ._server import Served
from ._tools import Tools
from .deferred import Applied, apply_deferred

# the search_path nl2sql's own functions pin (SET search_path FROM CURRENT): the pipeline's
# statements run under it, the question's SQL under the caller's
_PINNED_SQL = (
    "SELECT substr(c, 13) AS path FROM pg_catalog.pg_proc p, pg_catalog.unnest(p.proconfig) c "
    "WHERE p.oid = pg_catalog.to_regprocedure('nl2sql._run_candidate(text,text,integer,bigint)')"
    " AND c LIKE 'search_path=%'"
)
_NOT_INSTALLED_HINT = (
    "install nl2sql in that database: CREATE EXTENSION nl2sql CASCADE, or nl2sql install "
    "--dsn … where PL/Python is not available (docs/install.md)"
)
# the extension's query-log writer takes rows only from the server's own pipeline (its one-time
# token): a question run in this process is refused there, before any model is called
_SERVER_LOG_HINT = (
    "connect without in_process: where the extension is installed the client calls its SQL "
    "functions (nl2sql-mcp: without --in-process) (docs/client.md)"
)
PROGRESS = "nl2sql-progress "  # the indexer's progress notices (ops/_cell_values.py)


@dataclass(frozen=True)
class Answer:
    """One answered question: the chosen SQL, its rows (read-only, at most setting
    ``max_rows``; values as JSON gives them), the vote's confidence, the whole trace and the
    query log row's id."""

    sql: str
    columns: list[str]
    rows: list[tuple]
    confidence: float | None
    trace: dict = field(repr=False)
    log_id: int | None = None


def _rows(texts: list[str]) -> tuple[list[str], list[tuple]]:
    """``row_to_json`` texts as (column names, row tuples) in the query's column order."""
    dicts = [json.loads(t) for t in texts]
    columns = list(dicts[0]) if dicts else []
    return columns, [tuple(d.get(c) for c in columns) for d in dicts]


def _prefixed(msg: str) -> str:
    return msg if msg.startswith("nl2sql") else f"nl2sql: {msg}"


@contextlib.contextmanager
def _as_client_errors() -> Iterator[None]:
    """Whatever the pipeline or the connection raises, as a ``ClientError`` (message first,
    then ``hint`` and ``sqlstate``)."""
    try:
        yield
    except ClientError:
        raise
    except _plpy.Error as e:
        raise ClientError(_prefixed(str(e)), hint=e.hint, sqlstate=e.sqlstate) from None
    except _plpy.SPIError as e:
        msg = f"nl2sql: the database refused a statement: {e}"
        raise ClientError(msg, hint=e.hint, sqlstate=e.sqlstate) from None
    except psycopg.Error as e:
        msg = f"nl2sql: the database connection failed: {str(e).strip()}"
        raise ClientError(msg, hint="check the DSN and that the server is up") from None
    except Nl2sqlError as e:
        raise ClientError(_prefixed(str(e)), hint=getattr(e, "hint", None)) from None


class Client(Tools, Served):
    """nl2sql over one psycopg connection (``connect`` makes one): the pipeline in this process
    beside the database, the extension's SQL functions where it is installed (``Served``); the
    other SQL functions' equivalents (``narrate``, ``doctor``, …) come from ``Tools``.

    Args:
        conn: an open psycopg 3 connection; its current role asks (its privileges, row-level
            security and value rules apply).
        owned: close ``conn`` with the client.
        on_notice: called with (level, message) for the pipeline's notices; None logs them.
        for_model: the reader of the results is a model (an agent built on this API): rows,
            SQL and errors pass the role's value rules as prompts do (``agent.view``; setting
            ``agent_values``).
        in_process: run the questions in this process also where the extension is installed
            (refused, before any model call, where its query log takes no client's rows).
    """

    def __init__(
        self,
        conn: psycopg.Connection,
        owned: bool = False,
        on_notice: Callable[[str, str], None] | None = None,
        for_model: bool = False,
        in_process: bool = False,
    ):
        self.conn, self._owned, self.for_model = conn, owned, for_model
        self.plpy = _plpy.Plpy(conn, on_notice)
        self.in_process, self._where = in_process, None
        self._pinned: str | None = None
        self._pending_done = False  # curated rows added in SQL embedded (embed_pending)
        self._applied: list[Applied] = []  # deferred calls the first use applied

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection when ``connect`` opened it (a passed one stays open)."""
        if self._owned and not self.conn.closed:
            self.conn.close()

    def _pinned_path(self) -> str:
        """The search_path nl2sql's functions run under, read once."""
        if self._pinned is None:
            rows = self.plpy.execute(_PINNED_SQL)
            if not rows:
                raise ClientError(
                    "nl2sql: nl2sql is not installed in this database (no nl2sql._run_candidate)",
                    hint=_NOT_INSTALLED_HINT,
                )
            self._pinned = rows[0]["path"]
        return self._pinned

    def _in_transaction(
        self, fn: Callable[[str], Any], search_path: str | None = None, logs: bool = False
    ) -> Any:
        """Run ``fn(caller's search_path)`` in one transaction (a savepoint inside the caller's)
        under the pinned search_path, as nl2sql's SQL functions run; errors as ``ClientError``.
        ``logs``: ``fn`` writes the query log (refused first where only the server may)."""
        if logs and not self.on_server() and self._where.server_log:
            raise ClientError(
                "nl2sql: a question cannot run in this process here: the nl2sql extension's "
                "query log takes rows only from the pipeline inside the server",
                hint=_SERVER_LOG_HINT,
                sqlstate="42501",
            )
        with _as_client_errors():
            p = self.plpy
            p.rows_after_rollback.clear()
            try:
                return self._run_in_transaction(fn, search_path)
            except _plpy.Error as e:
                self._log_after_rollback(e)
                raise

    def _run_in_transaction(self, fn: Callable[[str], Any], search_path: str | None) -> Any:
        """``_in_transaction``'s transaction."""
        p = self.plpy
        caller = search_path or p.execute("SHOW search_path")[0]["search_path"]
        pinned = self._pinned_path()
        with self.conn.transaction():
            set_path = p.prepare("SELECT pg_catalog.set_config('search_path', $1, true)", ["text"])
            p.execute(set_path, [pinned])
            p.execute("SET LOCAL plan_cache_mode = force_custom_plan")
            if not self._pending_done:
                self._applied = apply_deferred(p)
                embed_pending(p)
                self._pending_done = True
            with p.call_timeout():  # statement_timeout bounds the whole call
                out = fn(caller)
            p.execute(set_path, [caller])  # kept past a savepoint's release otherwise
        return out

    def _log_after_rollback(self, e: _plpy.Error) -> None:
        """Log the trace of a call that raised because no SQL was chosen, and add its question
        and tokens to the role's day, now that its transaction rolled back (a transaction of
        its own: with a connection in autocommit mode, committed at once); the error's hint
        names the row, or says why none was kept."""
        p = self.plpy
        traces = list(p.rows_after_rollback)
        p.rows_after_rollback.clear()
        for trace in traces:
            try:
                with self.conn.transaction():
                    log_id = query_log.log_query(p, trace)
                    # the question and tokens the rollback undid count, as an answered call's
                    spent = quota.failed_call(trace.get("tokens"))
                    quota.add_usage(p, spent["questions"], spent)
            except (_plpy.SPIError, psycopg.Error) as err:
                why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                e.hint = query_log.failed_hint(None, f"the log write failed ({why})")
                return
            e.hint = query_log.failed_hint(log_id, None)

    def explain(
        self,
        question: str,
        evidence: str | None = None,
        conversation: str | None = None,
        search_path: str | None = None,
    ) -> dict:
        """The whole trace of answering ``question``, as ``nl2sql.explain`` returns it (logged,
        its id ``log_id``), also when no SQL was chosen (``sql`` None, ``error`` why).

        Args:
            question: the question. evidence: a hint text (BIRD's evidence), or None.
            conversation: a conversation key (earlier turns go into the prompts), or None.
            search_path: the names' search_path; None: the connection's.

        Returns:
            The trace.

        Raises:
            ClientError: an invalid question, setting or model configuration, no index, or
                the database refused a statement.
        """
        if self.on_server():
            args = {"question": question, "evidence": evidence, "conversation": conversation}
            view = AgentView.trace  # view(trace, question) of the role's AgentView
            return self._served_value(
                "nl2sql.explain", search_path, lambda t, v: view(v, t, question), **args
            )

        def run(caller: str) -> dict:
            trace = json.loads(udf.explain(self.plpy, question, caller, evidence, conversation))
            if self.for_model:
                trace = AgentView(self.plpy, caller).trace(trace, question)
            return trace

        return self._in_transaction(run, search_path, logs=True)

    def sql(
        self,
        question: str,
        evidence: str | None = None,
        conversation: str | None = None,
        search_path: str | None = None,
    ) -> str:
        """The chosen SQL only, as ``nl2sql()`` returns it (logged; nothing of it is run but
        the candidates' read-only executions).

        Args:
            question, evidence, conversation, search_path: as for ``explain``.

        Returns:
            The SQL text.

        Raises:
            ClientError: as ``explain``; no SQL was chosen (the message says why; the call is
                logged once its transaction rolled back, the hint names the row's id).
        """
        if self.on_server():
            args = {"question": question, "evidence": evidence, "conversation": conversation}
            return self._served_value("public.nl2sql", search_path, **args)

        def run(caller: str) -> str:
            return udf.nl2sql(self.plpy, question, caller, evidence, conversation)

        return self._in_transaction(run, search_path, logs=True)

    def ask(
        self,
        question: str,
        evidence: str | None = None,
        conversation: str | None = None,
        search_path: str | None = None,
    ) -> Answer:
        """Answer ``question``: the chosen SQL and its rows (fetched read-only, time-limited and
        capped as ``nl2sql.ask`` fetches them), with the trace (logged).

        Args:
            question, evidence, conversation, search_path: as for ``explain``.

        Returns:
            The ``Answer``.

        Raises:
            ClientError: as ``explain``; no SQL was chosen (``trace`` says why; the call is
                logged, ``log_id``); the chosen SQL failed or was refused when fetched.
        """
        if self.on_server():
            return self._served_ask(question, evidence, conversation, search_path)
        trace = self._in_transaction(
            lambda caller: self._answer(question, evidence, conversation, caller), search_path, True
        )
        if isinstance(trace, Answer):
            return trace
        why = "the trace (.trace, or nl2sql explain) says why"
        if trace.get("log_id") is not None:  # committed with the transaction: kept
            why = f"logged as nl2sql.query_log id {trace['log_id']}; {why}"
        err = ClientError(trace.get("error") or "nl2sql: no SQL chosen", hint=why)
        err.trace = trace
        raise err

    def _answer(self, question, evidence, conversation, caller: str) -> Answer | dict:
        """``ask``'s work in its transaction: the trace, then the rows (the trace alone when no
        SQL was chosen: it stays logged)."""
        trace, texts = udf.trace(self.plpy, question, caller, evidence, conversation)
        if trace.get("sql") is None:
            return trace
        return self._answer_rows(question, trace, texts, caller)

    def _answer_rows(self, question, trace: dict, texts: list[str] | None, caller) -> Answer:
        """The ``Answer`` of a chosen SQL from its rows' ``row_to_json`` texts (None: not kept,
        fetched again as ``nl2sql.ask`` fetches them)."""
        if texts is None:
            st = get_settings(self.plpy)
            limits = (st.candidate_timeout_ms, st.max_rows, st.max_result_bytes)
            try:
                texts = fetch_rows(self.plpy, trace["sql"], caller, *limits)
            except CandidateRefused as e:
                raise ClientError(f"nl2sql: the chosen query {e}") from None
        return self._answer_of(question, trace, *_rows(texts), caller)

    def _answer_of(self, question, trace: dict, columns, rows, caller: str) -> Answer:
        """The ``Answer`` (``for_model``: as a model reader may see it)."""
        if self.for_model:
            return _for_model(AgentView(self.plpy, caller), question, trace, columns, rows)
        return Answer(
            trace["sql"], columns, rows, trace.get("confidence"), trace, trace.get("log_id")
        )

    def reindex(
        self,
        schemas: list[str] | None = None,
        force: bool = False,
        on_progress: Callable[[str, int], None] | None = None,
        jobs: int = 1,
        dsn: str | None = None,
    ) -> dict:
        """Index the database from this process (the embedding model runs here), table by
        table, each committed on its own, as ``nl2sql-index`` drives the server.

        Args:
            schemas: the schemas; None: setting ``schemas``.
            force: re-read every table, not only changed ones.
            on_progress: called with (``schema.table``, cell values written so far; with
                ``jobs`` above 1: ``"tables"`` and the tables done).
            jobs: worker processes, each with its own connection and embedding model, claiming
                the changed tables from a queue in the database (``client/_jobs.py``).
            dsn: the workers' connection string (None: ``NL2SQL_DSN`` or libpq's environment).

        Returns:
            The counts ``nl2sql.reindex()`` returns, with ``seconds``.

        Raises:
            ClientError: no privilege to index, no embedding model, or nl2sql not installed.
        """
        t0 = time.perf_counter()
        step = self._step
        with self._progress(on_progress):
            tables = step(udf.reindex_changed, schemas, force)
            todo = [(s, t) for s, t, changed in tables if changed]
            if todo:
                step(udf.reindex_begin)
            results = [{"table": f"{s}.{t}", "skipped": True} for s, t, c in tables if not c]
            results += self._index_tables(todo, force, jobs, dsn, on_progress)
            out = sum_table_counts(results)
            kept = [f"{s}.{t}" for s, t, _ in tables]
            fin = step(udf.reindex_finish, schemas, kept, out["tables_indexed"] > 0)
        out.update(json.loads(fin))
        self.apply()  # configuration called in SQL meanwhile, embedded as it is applied
        self._in_transaction(lambda _c: embed_pending(self.plpy))  # added while it ran
        out["seconds"] = round(time.perf_counter() - t0, 3)
        return out

    def apply(self) -> list[Applied]:
        """Apply the configuration functions called in SQL beside the database (deferred calls,
        ``client/deferred.py``), each as the role that called it.

        Returns:
            What became of each call: done, refused with the reason, or left pending.

        Raises:
            ClientError: nl2sql is not installed, or the database refused a statement.
        """
        now = self._in_transaction(lambda _c: apply_deferred(self.plpy))
        first, self._applied = self._applied, []
        return first + now

    def _index_tables(
        self,
        todo: list[tuple[str, str]],
        force: bool,
        jobs: int,
        dsn: str | None,
        on_progress: Callable[[str, int], None] | None,
    ) -> list[dict]:
        """``reindex``'s tables: here one after the other, or queued as one run for ``jobs``
        worker processes (then tables held by ``--join`` workers elsewhere are waited for)."""
        if jobs <= 1 or not todo:
            return [json.loads(self._step(udf.reindex_table, s, t, force)) for s, t in todo]
        run = self._step(udf.reindex_enqueue, [f"{s}.{t}" for s, t in todo], force, jobs)

        def pending() -> int:
            n = self._in_transaction(
                lambda _c: self.plpy.execute(
                    self.plpy.prepare("SELECT nl2sql._reindex_pending($1) AS n", ["int8"]), [run]
                )[0]["n"]
            )
            if on_progress is not None:
                on_progress("tables", len(todo) - n)
            return n

        out = _jobs.run_pool(reindex_worker, dsn, run, jobs, pending)
        return out + _jobs.wait_for_others(
            pending, lambda: reindex_worker(dsn, run, _jobs.worker_name(jobs))
        )

    def _step(self, fn: Callable[..., Any], *args: Any) -> Any:
        """One unit of ``reindex`` (``fn(plpy, *args)``, an entry point of ``nl2sql.udf``) in its
        own transaction, with progress notices on."""

        def run(_caller: str) -> Any:
            self.plpy.execute("SET LOCAL nl2sql.progress = on")
            return fn(self.plpy, *args)

        return self._in_transaction(run)

    @contextlib.contextmanager
    def _progress(self, on_progress: Callable[[str, int], None] | None) -> Iterator[None]:
        """Feed the indexer's progress notices to ``on_progress`` while indexing."""
        before = self.plpy.on_notice

        def on_notice(level: str, msg: str) -> None:
            if msg.startswith(PROGRESS) and on_progress is not None:
                p = json.loads(msg[len(PROGRESS) :])
                on_progress(p["table"], p["values"])
            elif before is not None:
                before(level, msg)

        self.plpy.on_notice = on_notice
        try:
            yield
        finally:
            self.plpy.on_notice = before


def _for_model(view: AgentView, question: str, trace: dict, columns, rows) -> Answer:
    """An ``Answer`` as a model reader may see it (``Client(for_model=True)``): rows without
    withheld columns, SQL through the gate; ``trace["agent_view"]`` says what was withheld."""
    shown = view.rows(trace["sql"], [dict(zip(columns, r)) for r in rows])
    kept = [c for c in columns if c not in shown["withheld_columns"]] if shown["rows"] else []
    trace = view.trace(trace, question)
    trace["agent_view"] = {k: v for k, v in shown.items() if k != "rows"}
    tuples = [tuple(r.get(c) for c in kept) for r in shown["rows"]]
    return Answer(trace["sql"], kept, tuples, trace.get("confidence"), trace, trace.get("log_id"))


def reindex_worker(dsn: str | None, run_id: int | None, name: str) -> list[dict]:
    """A worker of ``nl2sql reindex --jobs N`` (``client/_jobs.py``): claims queued tables
    until none is left; this process embeds, as ``Client.reindex`` does.

    Args:
        dsn: libpq connection string (None: ``NL2SQL_DSN`` or libpq's environment).
        run_id: the run to work on; None: any run with tables left.
        name: the worker's name (``_jobs.worker_name``).

    Returns:
        The counts of each table it indexed.

    Raises:
        ClientError: a claim was refused (other than a deadlock, retried).
    """
    with connect(dsn) as client:
        return _jobs.claim_loop(lambda: client._step(udf.reindex_claim, run_id, name))


def connect(dsn: str | psycopg.Connection | None = None, **options: Any) -> Client:
    """Open nl2sql over a connection: the pipeline in this process beside the database, the
    extension's SQL functions where it is installed (unless ``in_process``).

    Args:
        dsn: a libpq connection string or URI, or an open psycopg connection (kept open on
            ``close``); None: ``NL2SQL_DSN``, else libpq's environment (``PGHOST``, …).
        **options: ``on_notice``, ``for_model`` and ``in_process`` for ``Client``; the rest go
            to ``psycopg.connect``.

    Returns:
        The ``Client``.

    Raises:
        ClientError: the connection failed.
    """
    mine = {k: options.pop(k) for k in ("on_notice", "for_model", "in_process") if k in options}
    if isinstance(dsn, psycopg.Connection):
        return Client(dsn, owned=False, **mine)
    target = dsn if dsn is not None else os.environ.get("NL2SQL_DSN", "")
    with _as_client_errors():
        conn = psycopg.connect(target, autocommit=True, **options)
    return Client(conn, owned=True, **mine)
