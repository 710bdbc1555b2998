"""The tools: each one statement (or two) calling the extension's SQL functions and views
(docs/sql-reference.md) on the server's connection, as the DSN's role."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from nl2sql.agent.view import DATA_NOTICE, AgentView

from ._agent_tools import AgentTools, view_of
from ._database import Database, ToolFailure, one

MAX_QUESTION_CHARS = 20_000
"""Longest question (or evidence, or SQL text) sent to the database; the extension's own limit
is its setting ``question_max_chars`` (4,000 by default)."""
MAX_ROWS = 1000
"""Most rows ``ask`` may return in one call (its ``max_rows`` argument)."""
MAX_TABLES = 500
"""Most tables one ``list_tables`` call lists (a name filter narrows a larger schema)."""
ASK_ROWS = 50
"""Rows ``ask`` returns when its ``max_rows`` argument is not given (docs/mcp.md)."""
_ONE_OFF = "nl2sql-mcp "  # the conversation key prefix of a call that is no follow-up


def _answer_rows(answer: Any, max_rows: int) -> list[dict[str, Any]]:
    """An ``nl2sql.Answer``'s first ``max_rows + 1`` rows as ``nl2sql.ask``'s JSON objects."""
    return [dict(zip(answer.columns, r)) for r in answer.rows[: max_rows + 1]]


def text_arg(name: str, value: str | None, required: bool = True) -> str | None:
    """Check one text argument: not empty when required, at most ``MAX_QUESTION_CHARS``.

    Args:
        name: the argument's name, for the message.
        value: its value.
        required: whether it may be missing.

    Returns:
        The value (None when missing and not required).

    Raises:
        ToolFailure: empty or too long.
    """
    if value is None or not value.strip():
        if required:
            raise ToolFailure(f"nl2sql-mcp: the {name} is empty: give a {name}")
        return None
    if len(value) > MAX_QUESTION_CHARS:
        raise ToolFailure(
            f"nl2sql-mcp: the {name} has {len(value):,} characters; nl2sql-mcp sends at most "
            f"{MAX_QUESTION_CHARS:,} to the database (whose own limit is the setting "
            "question_max_chars)"
        )
    return value


class Tools(AgentTools):
    """The tool functions over one ``Database``."""

    def __init__(self, db: Database):
        """Args:
        db: the database the tools call.
        """
        self.db = db

    # ---- questions: the pipeline writes its query log, so these transactions may write ----

    def _asked(
        self,
        sql: str,
        question: str,
        evidence: str | None,
        conversation: str | None,
        fetch,
        here=None,
    ) -> tuple[Any, dict[str, Any]]:
        """Run one question function with a conversation key, then read this call's turn
        (``nl2sql.conversation``: its log id, SQL, confidence); a one-off key is forgotten.
        In process (``Database.in_process``), ``here(client, question, evidence, key)`` runs
        the pipeline here instead of ``sql``."""
        question = text_arg("question", question)
        evidence = text_arg("evidence", evidence, required=False)
        key = conversation or f"{_ONE_OFF}{uuid.uuid4()}"
        if conversation is not None:
            text_arg("conversation", conversation)

        def work(conn: psycopg.Connection):
            if self.db.in_process and here is not None:
                out = here(self.db.client(), question, evidence, key)
            else:
                out = fetch(conn.execute(sql, {"q": question, "e": evidence, "c": key}))
            row = conn.execute(
                "SELECT log_id, sql, confidence FROM nl2sql.conversation(%s) "
                "ORDER BY turn DESC LIMIT 1",
                (key,),
            ).fetchone()
            if conversation is None:
                conn.execute("SELECT nl2sql.forget_conversation(%s)", (key,))
            turn = {"log_id": None, "sql": None, "confidence": None}
            if row is not None:
                turn = {"log_id": row[0], "sql": row[1], "confidence": row[2]}
            turn["view"] = view_of(self.db, conn)
            return out, turn

        return self.db.run(work, writes=True)

    def ask(
        self,
        question: str,
        evidence: str | None = None,
        conversation: str | None = None,
        max_rows: int = ASK_ROWS,
    ) -> dict[str, Any]:
        """Answer a question with the rows of the chosen SQL (``nl2sql.ask``).

        Args:
            question: the question in natural language.
            evidence: an optional hint (external knowledge) added to the prompts.
            conversation: a key of your choice: the question is a follow-up of the earlier
                questions asked with it.
            max_rows: most rows returned (1..1000).

        Returns:
            ``{"sql", "rows", "row_count", "truncated", "confidence", "log_id"}``.
        """
        if not 1 <= max_rows <= MAX_ROWS:
            raise ToolFailure(f"nl2sql-mcp: max_rows must be between 1 and {MAX_ROWS}")
        rows, turn = self._asked(
            "SELECT a FROM nl2sql.ask(%(q)s, %(e)s, conversation => %(c)s) AS a",
            question,
            evidence,
            conversation,
            lambda cur: cur.fetchmany(max_rows + 1),
            lambda client, q, e, c: [(r,) for r in _answer_rows(client.ask(q, e, c), max_rows)],
        )
        shown = [r[0] for r in rows[:max_rows]]
        view: AgentView = turn["view"]
        return {
            "sql": view.sql(turn["sql"], question),
            **view.rows(turn["sql"], shown),
            "row_count": len(shown),
            "truncated": len(rows) > max_rows,
            "confidence": turn["confidence"],
            "log_id": turn["log_id"],
            "data_notice": DATA_NOTICE,
        }

    def sql(
        self, question: str, evidence: str | None = None, conversation: str | None = None
    ) -> dict[str, Any]:
        """Answer a question with SQL only (``nl2sql()``); nothing of its result is returned.

        Args:
            question, evidence, conversation: as for ``ask``.

        Returns:
            ``{"sql", "confidence", "log_id"}``.
        """
        sql, turn = self._asked(
            "SELECT nl2sql(%(q)s, %(e)s, conversation => %(c)s)",
            question,
            evidence,
            conversation,
            lambda cur: cur.fetchone()[0],
            lambda client, q, e, c: client.sql(q, e, c),
        )
        shown = turn["view"].sql(sql, question)
        return {"sql": shown, "confidence": turn["confidence"], "log_id": turn["log_id"]}

    def narrate(
        self, question: str, evidence: str | None = None, conversation: str | None = None
    ) -> dict[str, Any]:
        """Answer a question in words (``nl2sql.narrate``).

        Args:
            question, evidence, conversation: as for ``ask``.

        Returns:
            ``{"answer", "sql", "log_id"}``.
        """
        answer, turn = self._asked(
            "SELECT nl2sql.narrate(%(q)s, %(e)s, conversation => %(c)s)",
            question,
            evidence,
            conversation,
            lambda cur: cur.fetchone()[0],
            lambda client, q, e, c: client.narrate(q, e, c),
        )
        shown = turn["view"].sql(turn["sql"], question)
        return {
            "answer": answer,
            "sql": shown,
            "log_id": turn["log_id"],
            "data_notice": DATA_NOTICE,
        }

    def chart(
        self, question: str, evidence: str | None = None, conversation: str | None = None
    ) -> dict[str, Any]:
        """A chart of the answer (``nl2sql.chart``), as a model reader may see it: a withheld
        column's values are not drawn (``AgentView.chart``).

        Args:
            question, evidence, conversation: as for ``ask``.

        Returns:
            The Vega-Lite v5 spec (``usermeta.log_id`` this call's).
        """
        spec, turn = self._asked(
            "SELECT nl2sql.chart(%(q)s, %(e)s, conversation => %(c)s)",
            question,
            evidence,
            conversation,
            lambda cur: cur.fetchone()[0],
            lambda client, q, e, c: client.chart(q, e, c),
        )
        view: AgentView = turn["view"]
        spec = view.chart(spec, question)
        spec["usermeta"] = {**spec["usermeta"], "log_id": turn["log_id"]}
        spec["usermeta"]["data_notice"] = DATA_NOTICE
        return spec

    def explain(
        self, question: str, evidence: str | None = None, conversation: str | None = None
    ) -> dict[str, Any]:
        """The compact trace of answering a question (``nl2sql.explain``).

        Args:
            question, evidence, conversation: as for ``ask``.

        Returns:
            ``compact_trace`` of the trace.
        """
        question = text_arg("question", question)
        evidence = text_arg("evidence", evidence, required=False)
        if conversation is not None:
            text_arg("conversation", conversation)

        def work(conn: psycopg.Connection) -> Any:
            if self.db.in_process:
                trace = self.db.client().explain(question, evidence, conversation)
            else:
                sql = "SELECT nl2sql.explain(%s, %s, conversation => %s)"
                trace = one(conn, sql, (question, evidence, conversation))
            return view_of(self.db, conn).trace(compact_trace(trace), question)

        return self.db.run(work, writes=True)

    # ---- read-only ------------------------------------------------------------------------

    def retrieve(
        self, question: str, evidence: str | None = None, presql: str | None = None
    ) -> dict[str, Any]:
        """What retrieval finds and would send for a question, without a model call
        (``nl2sql.retrieve``).

        Args:
            question, evidence: as for ``ask``.
            presql: a PreSQL to link the schema with (optional).

        Returns:
            ``nl2sql.retrieve``'s JSON.
        """
        question = text_arg("question", question)
        evidence = text_arg("evidence", evidence, required=False)
        presql = text_arg("presql", presql, required=False)

        def work(conn: psycopg.Connection) -> dict[str, Any]:
            if self.db.in_process:
                got = self.db.client().retrieve(question, evidence, presql)
            else:
                sql = "SELECT nl2sql.retrieve(%s, %s, %s)"
                got = one(conn, sql, (question, evidence, presql))
            return gated_retrieval(view_of(self.db, conn), got)

        return self.db.run(work)

    def explain_sql(self, sql: str) -> dict[str, Any]:
        """What a read-only query does, in words (``nl2sql.explain_sql``); never run.

        Args:
            sql: one read-only query.

        Returns:
            ``{"explanation"}``.
        """
        sql = text_arg("sql", sql)

        def work(conn: psycopg.Connection) -> str:
            if self.db.in_process:  # beside the database: its body runs here
                return self.db.client().explain_sql(sql)
            return one(conn, "SELECT nl2sql.explain_sql(%s)", (sql,))

        return {"explanation": self.db.run(work)}

    def list_tables(
        self, schema: str | None = None, name: str | None = None, compact: bool = False
    ) -> dict[str, Any]:
        """The indexed tables the connected role may read, with their comments and columns
        (``nl2sql.visible_table``, ``nl2sql.visible_column``).

        Args:
            schema: only this schema's tables (optional).
            name: only tables whose name holds this text, case-insensitive (optional).
            compact: names only: ``{"schema", "table", "rows", "columns": [name, ...]}``.

        Returns:
            ``{"tables": [{"schema", "table", "comment", "rows", "columns": [{"name", "type",
            "comment", "primary_key"}]}], "count"}``, at most ``MAX_TABLES`` tables
            (``truncated`` when there are more).
        """
        schema = text_arg("schema", schema, required=False)
        name = text_arg("name", name, required=False)
        where = (
            "WHERE (%(s)s::text IS NULL OR schema_name = %(s)s) AND (%(n)s::text IS NULL "
            "OR strpos(lower(table_name), lower(%(n)s)) > 0)"
        )
        args = {"s": schema, "n": name}

        def work(conn: psycopg.Connection):
            tables = conn.execute(
                "SELECT schema_name, table_name, comment, n_rows FROM nl2sql.visible_table "
                f"{where} ORDER BY schema_name, table_name LIMIT {MAX_TABLES + 1}",
                args,
            ).fetchall()
            cols = conn.execute(
                "SELECT schema_name, table_name, column_name, data_type, comment, is_primary_key "
                f"FROM nl2sql.visible_column {where} ORDER BY schema_name, table_name, ordinal",
                args,
            ).fetchall()
            return tables, cols

        tables, cols = self.db.run(work)
        listed = _listing(tables[:MAX_TABLES], cols, compact)
        return {"tables": listed, "count": len(listed), "truncated": len(tables) > MAX_TABLES}

    # ---- feedback: administrative, writes ---------------------------------------------------

    def feedback(
        self, log_id: int, correct: bool, sql: str | None = None, verify: bool = True
    ) -> dict[str, Any]:
        """Judge an answer (``nl2sql.feedback``): it becomes an example, and with ``verify`` a
        verified query. Administrative: the role needs EXECUTE on the function.

        Args:
            log_id: the answer's ``log_id`` (as ``ask``, ``sql`` or ``explain`` returned it).
            correct: whether the answer was right.
            sql: the right SQL, when it was not.
            verify: also add it as a verified query.

        Returns:
            ``{"example_id"}``.
        """
        sql = text_arg("sql", sql, required=False)
        example = self.db.run(
            lambda conn: one(
                conn, "SELECT nl2sql.feedback(%s, %s, %s, %s)", (log_id, correct, sql, verify)
            ),
            writes=True,
        )
        return {"example_id": example}


def _listing(tables: list, cols: list, compact: bool) -> list[dict[str, Any]]:
    """``list_tables``' entries from the rows of ``visible_table`` and ``visible_column``."""
    by_table: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s, t, c, typ, comment, pk in cols:
        entry = {"name": c, "type": typ, "comment": comment, "primary_key": pk}
        by_table.setdefault((s, t), []).append(entry)
    out = []
    for s, t, comment, n in tables:
        columns = by_table.get((s, t), [])
        if compact:
            out.append(
                {"schema": s, "table": t, "rows": n, "columns": [c["name"] for c in columns]}
            )
        else:
            out.append({"schema": s, "table": t, "comment": comment, "rows": n, "columns": columns})
    return out


def _unmasked(examples: list | None) -> list:
    """Examples without their ``masked_question`` (the gate showed their question instead)."""
    return [{k: v for k, v in e.items() if k != "masked_question"} for e in examples or []]


def gated_retrieval(view: AgentView, got: dict[str, Any]) -> dict[str, Any]:
    """``nl2sql.retrieve``'s result as the agent may see it: the prompts, values and examples
    passed the gate when they were made; the verified questions, the examples' masked
    questions and the curated texts beside them did not, so they are left out where values
    are withheld (the prompts show them gated).

    Args:
        view: the role's view.
        got: ``nl2sql.retrieve``'s dict.

    Returns:
        The dict to return.
    """
    if view.gate is None or not view.gate.withholding:
        return {**got, "data_notice": DATA_NOTICE}
    out = {k: v for k, v in got.items() if k not in ("business_context", "semantic_model")}
    out["verified"] = [
        {k: v for k, v in r.items() if k != "question"} for r in got.get("verified") or []
    ]
    # an example's question as shown passed the gate; its masked form beside it did not
    out["examples"] = _unmasked(got.get("examples"))
    if isinstance(got.get("selection"), dict):
        out["selection"] = {
            **got["selection"],
            "examples": _unmasked(got["selection"].get("examples")),
        }
    out["data_notice"] = DATA_NOTICE
    return out


def _candidate(c: dict[str, Any]) -> dict[str, Any]:
    out = {k: c.get(k) for k in ("source", "status", "sql", "reason", "row_count", "exec_ms")}
    return {k: v for k, v in out.items() if v is not None}


def compact_trace(trace: dict[str, Any] | None) -> dict[str, Any]:
    """The parts of ``nl2sql.explain``'s trace an agent reads: the answer, the model rounds,
    what was linked, the candidates and the vote.

    Args:
        trace: the whole trace.

    Returns:
        ``question``, ``sql``, ``confidence``, ``error``, ``log_id``, ``rounds``,
        ``rounds_reason``, ``linked_tables`` and ``linked_why`` (two rounds),
        ``candidates`` (source, status, sql, reason, row_count, exec_ms),
        ``vote`` (method, reason, groups: size, confidence, sources, sql), ``verified_query``,
        ``values_withheld``, ``sql_explanation`` and ``total_ms``, where the trace has them.
    """
    trace = trace or {}
    vote = trace.get("vote") or {}
    out = {
        "question": trace.get("question"),
        "sql": trace.get("sql"),
        "confidence": trace.get("confidence"),
        "error": trace.get("error"),
        "log_id": trace.get("log_id"),
        "rounds": trace.get("rounds"),
        "rounds_reason": trace.get("rounds_reason"),
        "linked_tables": trace.get("linked_tables"),
        "linked_why": (trace.get("linking") or {}).get("why"),
        "candidates": [_candidate(c) for c in trace.get("candidates") or []],
        "vote": {
            "method": vote.get("method"),
            "reason": vote.get("reason"),
            "groups": [
                {k: g.get(k) for k in ("size", "confidence", "sources", "sql")}
                for g in vote.get("groups") or []
            ],
        },
        "verified_query": trace.get("verified_query"),
        "values_withheld": trace.get("values_withheld"),
        "sql_explanation": trace.get("sql_explanation"),
        "total_ms": (trace.get("timings") or {}).get("total_ms"),
    }
    return {k: v for k, v in out.items() if v is not None}
