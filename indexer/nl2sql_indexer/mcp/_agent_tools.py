"""The tools of an agent that writes its SQL itself: ``execute_sql`` (the agent's query run as
a candidate is), ``search_values``, ``describe_table`` and ``semantic_context`` (what it looks
up first); each calls
the extension's SQL function, or the same entry point in this process beside the database
(docs/mcp.md "Two ways to work")."""

from __future__ import annotations

from typing import Any

import psycopg

from nl2sql.agent.view import AgentView

from ._database import Database, ToolFailure, one

MAX_SQL_CHARS = 100_000
"""Longest SQL text ``execute_sql`` sends (the extension refuses longer ones itself)."""
_SQL_HINT = "docs/mcp.md, 'The agent's own SQL'"


def view_of(db: Database, conn: psycopg.Connection) -> AgentView:
    """The calling role's gate over what the agent receives (``nl2sql.agent.view``), read in
    the call's transaction.

    Args:
        db: the server's database.
        conn: its connection, in the call's transaction.

    Returns:
        The ``AgentView`` of the DSN's role (setting ``agent_values`` says whether it gates).
    """
    path = conn.execute("SHOW search_path").fetchone()[0]
    return AgentView(db.client().plpy, path)


def _sql_arg(sql: str | None) -> str:
    if sql is None or not sql.strip():
        raise ToolFailure("nl2sql-mcp: the sql is empty: give one read-only query")
    if len(sql) > MAX_SQL_CHARS:
        raise ToolFailure(
            f"nl2sql-mcp: the sql has {len(sql):,} characters; at most {MAX_SQL_CHARS:,} are sent"
        )
    return sql


class AgentTools:
    """Mixed into ``Tools``: needs its ``db``."""

    db: Database

    def execute_sql(self, sql: str, max_rows: int = 50, dry_run: bool = False) -> dict[str, Any]:
        """Run the agent's query as nl2sql runs a candidate (``nl2sql.execute_sql``), gated for
        a model reader; logged (``source: agent``), a refusal too.

        Args:
            sql: one read-only query.
            max_rows: most rows returned (1..1000).
            dry_run: plan it only: the planner's cost and row estimate.

        Returns:
            ``nl2sql.execute_sql``'s result.

        Raises:
            ToolFailure: refused, failed or timed out (the rule, the reason, what to do; the
                refusal is logged first), or the database refused the call.
        """
        sql = _sql_arg(sql)

        def work(conn: psycopg.Connection) -> dict[str, Any]:
            if self.db.in_process:
                return self.db.client().execute_sql(sql, max_rows, dry_run, for_model=True)
            return one(
                conn,
                "SELECT nl2sql.execute_sql(%s, %s, dry_run => %s, for_model => true)",
                (sql, max_rows, dry_run),
            )

        out = self.db.run(work, writes=True)  # committed: the refusal's log row stays
        if out.get("status") != "ok":
            raise ToolFailure(
                f"nl2sql-mcp: execute_sql {out.get('status')}: {out.get('reason')} "
                f"(hint: {out.get('hint') or _SQL_HINT}; log_id {out.get('log_id')})"
            )
        return out

    def search_values(self, text: str, k: int = 10) -> dict[str, Any]:
        """Which columns hold values like a literal (``nl2sql.search_values``).

        Args:
            text: the literal (a name, a code, a place).
            k: most matches (1..100).

        Returns:
            ``{"matches": [{"schema", "table", "column", "value", "score", "how"}]}``.

        Raises:
            ToolFailure: an empty or long text, or the database refused the call.
        """
        if text is None or not text.strip():
            raise ToolFailure("nl2sql-mcp: the text is empty: give the literal to look up")

        def work(conn: psycopg.Connection) -> dict[str, Any]:
            if self.db.in_process:
                return self.db.client().search_values(text, k)
            return one(conn, "SELECT nl2sql.search_values(%s, %s)", (text, k))

        return self.db.run(work)

    def describe_table(self, table: str) -> dict[str, Any]:
        """One table as the role may see it (``nl2sql.describe_table``, gated samples).

        Args:
            table: the table's name (``schema.table`` where the bare name is ambiguous).

        Returns:
            ``nl2sql.describe_table``'s result.

        Raises:
            ToolFailure: no such table this role may read.
        """
        if table is None or not table.strip():
            raise ToolFailure("nl2sql-mcp: the table is empty: give a name list_tables shows")

        def work(conn: psycopg.Connection) -> dict[str, Any]:
            if self.db.in_process:
                return self.db.client().describe_table(table, for_model=True)
            return one(conn, "SELECT nl2sql.describe_table(%s, for_model => true)", (table,))

        return self.db.run(work)

    def semantic_context(self, question: str | None = None, k: int = 5) -> dict[str, Any]:
        """The semantic model and the verified queries nearest to a question
        (``nl2sql.semantic_context``, gated).

        Args:
            question: the question, or None for the semantic model alone.
            k: most verified queries (1..20).

        Returns:
            ``{"semantic_model": {"objects", "relationships"}, "verified_queries": [...]}``.

        Raises:
            ToolFailure: ``k`` out of range, or the database refused the call.
        """

        def work(conn: psycopg.Connection) -> dict[str, Any]:
            if self.db.in_process:
                return self.db.client().semantic_context(question, k, for_model=True)
            sql = "SELECT nl2sql.semantic_context(%s, %s, for_model => true)"
            return one(conn, sql, (question, k))

        return self.db.run(work)

    def gated_failure(self, e: ToolFailure, known: str) -> ToolFailure:
        """A database's error message as the agent may read it (quoted data withheld,
        ``AgentView.error``); other failures as they are.

        Args:
            e: the failure.
            known: the agent's own words (its arguments): quoted text from them may stay.

        Returns:
            The failure to report.
        """
        if not e.from_database:
            return e
        try:
            view = self.db.run(lambda conn: view_of(self.db, conn))
        except ToolFailure:
            return ToolFailure(
                "nl2sql-mcp: the database refused the call; its message is withheld (the "
                "role's value rules could not be read to check it)"
            )
        return ToolFailure(view.error(str(e), known) or str(e))
