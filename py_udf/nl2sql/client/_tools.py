"""The rest of the SQL surface: ``Client`` methods for the extension's read/run functions whose
PL/Python bodies are stubs beside the database (``narrate``, ``chart``, ``explain_sql``,
``execute_sql``, ``search_values``, ``describe_table``,
``retrieve``, ``doctor``, ``evaluate``, ``export_semantic_model``, ``mine_queries``,
``calibrate``, ``prune_query_log``), each calling the same ``nl2sql.udf`` entry point in this
process, with the same arguments and result; where the extension is installed, its SQL function
(docs/client.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .. import udf
from ..agent.view import AgentView
from ..core.errors import ClientError

# may the current role EXECUTE the SQL function (the stub beside the database keeps the
# extension's privileges: the administrative ones are not for PUBLIC)
_MAY_EXECUTE = "SELECT pg_catalog.has_function_privilege($1, 'EXECUTE') AS ok"


class Tools:
    """Mixed into ``Client``: needs its ``plpy``, ``_in_transaction``, ``on_server`` and
    ``_served_value``."""

    plpy: Any
    for_model: bool
    _in_transaction: Callable[..., Any]
    on_server: Callable[[], bool]
    _served_value: Callable[..., Any]

    def _gated(
        self,
        signature: str,
        fn: Callable[[str], Any],
        search_path: str | None = None,
        args: dict[str, Any] | None = None,
        view: Callable[[Any, AgentView], Any] | None = None,
        logs: bool = False,
    ) -> Any:
        """``fn(caller's search_path)`` in one transaction, after checking that the role may
        EXECUTE ``signature`` as the extension's SQL function requires; where the extension is
        installed, that SQL function itself with ``args`` (``view``: as ``_served_value``).
        ``logs``: ``fn`` writes the query log.

        Raises:
            ClientError: the role may not (SQLSTATE 42501), or what ``fn`` raises.
        """
        if self.on_server():
            function = signature.partition("(")[0]
            return self._served_value(function, search_path, view, **(args or {}))

        def run(caller: str) -> Any:
            ok = self.plpy.execute(self.plpy.prepare(_MAY_EXECUTE, ["text"]), [signature])
            if not ok or not ok[0]["ok"]:
                raise ClientError(
                    f"nl2sql: permission denied for function {signature}: this role may not "
                    "execute it",
                    hint=f"the owner of schema nl2sql grants it: GRANT EXECUTE ON FUNCTION "
                    f"{signature} TO this_role",
                    sqlstate="42501",
                )
            return fn(caller)

        return self._in_transaction(run, search_path, logs)

    def narrate(
        self,
        question: str,
        evidence: str | None = None,
        conversation: str | None = None,
        search_path: str | None = None,
    ) -> str:
        """A short answer in words, as ``nl2sql.narrate`` writes it: the question answered as
        ``ask`` does (logged), then the chosen SQL's first rows written up by a model.

        Args:
            question: the question. evidence: a hint text, or None.
            conversation: a conversation key, or None.
            search_path: the names' search_path; None: the connection's.

        Returns:
            The answer in words.

        Raises:
            ClientError: setting ``send_values`` is off, no SQL was chosen, a model failed, or
                what ``ask`` raises.
        """

        def run(caller: str) -> str:
            return udf.narrate(self.plpy, question, caller, evidence, conversation)

        args = {"question": question, "evidence": evidence, "conversation": conversation}
        sig = "nl2sql.narrate(text,text,text,text)"
        return self._gated(sig, run, search_path, args, logs=True)

    def chart(
        self,
        question: str,
        evidence: str | None = None,
        conversation: str | None = None,
        search_path: str | None = None,
    ) -> dict[str, Any]:
        """A chart of the answer, as ``nl2sql.chart`` makes it: the question answered as ``ask``
        does (logged), the chosen SQL's rows in a Vega-Lite v5 spec
        (``nl2sql.charts.render.write(spec, "out.png")`` draws it). With ``for_model``, a
        withheld column's values are not drawn (``AgentView.chart``).

        Args:
            question, evidence, conversation, search_path: as for ``narrate``.

        Returns:
            The spec (``usermeta``: ``sql``, ``chart``, ``reason``, ``cap``, ``truncated``,
            ``notes``, ``log_id``).

        Raises:
            ClientError: what ``ask`` raises for the question, key or models.
        """

        def run(caller: str) -> dict[str, Any]:
            spec = json.loads(udf.chart(self.plpy, question, caller, evidence, conversation))
            return AgentView(self.plpy, caller).chart(spec, question) if self.for_model else spec

        args = {"question": question, "evidence": evidence, "conversation": conversation}
        sig, view = "nl2sql.chart(text,text,text,text)", lambda spec, v: v.chart(spec, question)
        return self._gated(sig, run, search_path, args, view, logs=True)

    def explain_sql(self, sql: str, search_path: str | None = None) -> str:
        """What a read-only query does, in words, as ``nl2sql.explain_sql`` writes it.

        Args:
            sql: one read-only query over relations this role may SELECT.
            search_path: the names' search_path; None: the connection's.

        Returns:
            The model's explanation.

        Raises:
            ClientError: not one read-only query over indexed relations the role may SELECT;
                no model; the model failed.
        """

        def run(caller: str) -> str:
            return udf.explain_sql(self.plpy, sql, caller)

        return self._gated("nl2sql.explain_sql(text,text)", run, search_path, {"sql": sql})

    def retrieve(
        self,
        question: str,
        evidence: str | None = None,
        presql: str | None = None,
        search_path: str | None = None,
    ) -> dict:
        """Retrieval only, no model call, as ``nl2sql.retrieve`` returns it.

        Args:
            question, evidence: as for ``narrate``.
            presql: a PreSQL from elsewhere (then schema linking and the FinSQL prompt too).
            search_path: the names' search_path; None: the connection's.

        Returns:
            The retrieval's dict (masked question, values, examples, prompts).

        Raises:
            ClientError: an invalid question, no index or no embedding model.
        """

        def run(caller: str) -> dict:
            return json.loads(udf.retrieve(self.plpy, question, caller, evidence, presql))

        args = {"question": question, "evidence": evidence, "presql": presql}
        return self._gated("nl2sql.retrieve(text,text,text,text)", run, search_path, args)

    def execute_sql(
        self,
        sql: str,
        max_rows: int = 50,
        dry_run: bool = False,
        for_model: bool | None = None,
        search_path: str | None = None,
    ) -> dict:
        """Run one read-only query as a candidate is run, as ``nl2sql.execute_sql`` (logged).

        Args:
            sql: the query.
            max_rows: most rows returned (1..1000).
            dry_run: plan it only (``plan_cost``, ``plan_rows``).
            for_model: gate the result for a model reader; None: the client's ``for_model``.
            search_path: the names' search_path; None: the connection's.

        Returns:
            ``{"status", "sql", "rows", "row_count", "truncated", "exec_ms", "log_id", ...}``;
            a refusal is a result (``status`` refused, ``reason``, ``hint``).

        Raises:
            ClientError: ``max_rows`` out of range, nothing indexed.
        """
        gated = self.for_model if for_model is None else for_model

        def run(caller: str) -> dict:
            args = (sql, max_rows, dry_run, gated, caller)
            return json.loads(udf.execute_sql(self.plpy, *args))

        sig = "nl2sql.execute_sql(text,integer,boolean,boolean,text)"
        args = {"sql": sql, "max_rows": max_rows, "dry_run": dry_run, "for_model": gated}
        return self._gated(sig, run, search_path, args, logs=True)

    def search_values(self, text: str, k: int = 10, search_path: str | None = None) -> dict:
        """The indexed cell values most like ``text``, as ``nl2sql.search_values``.

        Args:
            text: the literal.
            k: most matches (1..100).
            search_path: the names' search_path; None: the connection's.

        Returns:
            ``{"matches": [{"schema", "table", "column", "value", "score", "how"}]}``.

        Raises:
            ClientError: an empty or long text, nothing indexed.
        """

        def run(caller: str) -> dict:
            return json.loads(udf.search_values(self.plpy, text, k, caller))

        sig, args = "nl2sql.search_values(text,integer,text)", {"text": text, "k": k}
        return self._gated(sig, run, search_path, args)

    def describe_table(
        self, name: str, for_model: bool | None = None, search_path: str | None = None
    ) -> dict:
        """One indexed table as this role may see it, as ``nl2sql.describe_table``.

        Args:
            name: the table.
            for_model: gate its sample values for a model reader; None: the client's.
            search_path: the names' search_path; None: the connection's.

        Returns:
            ``{"schema", "table", "columns", "foreign_keys", "rows", ...}``.

        Raises:
            ClientError: no such table this role may read.
        """
        gated = self.for_model if for_model is None else for_model

        def run(caller: str) -> dict:
            return json.loads(udf.describe_table(self.plpy, name, gated, caller))

        sig, args = "nl2sql.describe_table(text,boolean,text)", {"name": name, "for_model": gated}
        return self._gated(sig, run, search_path, args)

    def semantic_context(
        self,
        question: str | None = None,
        k: int = 5,
        for_model: bool | None = None,
        search_path: str | None = None,
    ) -> dict:
        """The semantic model and the verified queries nearest to a question, as
        ``nl2sql.semantic_context``.

        Args:
            question: the question, or None for the semantic model alone.
            k: most verified queries (1..20).
            for_model: gate expressions and SQL for a model reader; None: the client's.
            search_path: the names' search_path; None: the connection's.

        Returns:
            ``{"semantic_model": {"objects", "relationships"}, "verified_queries": [...]}``.

        Raises:
            ClientError: ``k`` out of range, nothing indexed.
        """
        gated = self.for_model if for_model is None else for_model

        def run(caller: str) -> dict:
            args = (question, k, gated, caller)
            return json.loads(udf.semantic_context(self.plpy, *args))

        sig = "nl2sql.semantic_context(text,integer,boolean,text)"
        args = {"question": question, "k": k, "for_model": gated}
        return self._gated(sig, run, search_path, args)

    def doctor(self) -> list[dict]:
        """The checks of ``nl2sql.doctor()``: one dict per check.

        Returns:
            ``{"check", "status", "detail", "fix"}`` dicts; status is ok, warn or fail.

        Raises:
            ClientError: this role may not execute ``nl2sql.doctor()`` (SQLSTATE 42501).
        """
        keys = ("check", "status", "detail", "fix")
        if self.on_server():
            rows = self._served_value("nl2sql.doctor", set_returning=True)
        else:
            rows = self._in_transaction(lambda _caller: udf.doctor(self.plpy))
        return [dict(zip(keys, r)) for r in rows]

    def evaluate(
        self,
        max_questions: int | None = None,
        note: str | None = None,
        search_path: str | None = None,
    ) -> dict:
        """Execution accuracy on the verified questions, as ``nl2sql.evaluate`` runs it (kept in
        ``nl2sql.evaluation_run``; each question logged).

        Args:
            max_questions: at most this many questions; None: all.
            note: a note kept with the run.
            search_path: the names' search_path; None: the connection's.

        Returns:
            The run's summary (``run_id``, EX, per model, ``misses``, ``not_judged``, …).

        Raises:
            ClientError: no privilege, no verified questions, no model.
        """

        def run(caller: str) -> dict:
            return json.loads(udf.evaluate(self.plpy, max_questions, note, caller))

        sig, args = (
            "nl2sql.evaluate(integer,text,text)",
            {"max_questions": max_questions, "note": note},
        )
        return self._gated(sig, run, search_path, args, logs=True)

    def export_semantic_model(self) -> str:
        """The semantic model as Cortex Analyst YAML, as ``nl2sql.export_semantic_model``.

        Returns:
            The YAML text (what this role may see).

        Raises:
            ClientError: no privilege.
        """
        return self._gated(
            "nl2sql.export_semantic_model()",
            lambda _caller: udf.export_semantic_model(self.plpy),
            args={},
        )

    def mine_queries(self, limit: int = 20) -> dict:
        """Questions written by a model for the most frequent read-only statements of
        pg_stat_statements, pending approval, as ``nl2sql.mine_queries``.

        Args:
            limit: at most this many statements.

        Returns:
            ``{considered, mined, skipped, failed, model}``.

        Raises:
            ClientError: no privilege, no pg_stat_statements, no model.
        """
        return self._gated(
            "nl2sql.mine_queries(integer)",
            lambda _caller: json.loads(udf.mine_queries(self.plpy, limit)),
            args={"limit": limit},
        )

    def calibrate(self, judged: list | dict | str | None = None) -> dict:
        """Per-model reliability from judged answers, as ``nl2sql.calibrate``.

        Args:
            judged: judged questions (a list, or its JSON text), or None.

        Returns:
            The summary.

        Raises:
            ClientError: no privilege, ``judged`` is not valid.
        """
        text = judged if judged is None or isinstance(judged, str) else json.dumps(judged)
        return self._gated(
            "nl2sql.calibrate(jsonb)",
            lambda _caller: json.loads(udf.calibrate(self.plpy, text)),
            args={"judged": text},
        )

    def prune_query_log(self) -> dict:
        """Delete query-log rows older than setting ``query_log_retention_days``, as
        ``nl2sql.prune_query_log``.

        Returns:
            ``{"deleted", "retention_days", "statements"}``.

        Raises:
            ClientError: no privilege.
        """
        return self._gated(
            "nl2sql.prune_query_log()",
            lambda _caller: json.loads(udf.prune_query_log(self.plpy)),
            args={},
        )
