"""Typed values that flow between pipeline stages (``pipeline.answer()`` runs the stages).

Each stage is a function with dataclass inputs/outputs so that everything except the
database calls can be tested without a server.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """What happened to a candidate (``Candidate.status``).

    String-valued, so the trace's JSON and comparisons with the plain strings are unchanged.

    Attributes:
        PENDING: ``pending``, not evaluated yet.
        REFUSED: ``refused``, no answer, or it failed the check (safety.py).
        ERROR: ``error``, execution failed.
        TIMEOUT: ``timeout``, cancelled at the time limit.
        OK: ``ok``, executed (possibly with an empty result).

    Source: MCS-SQL (Lee et al. 2024) §3.3 and OpenSearch-SQL (Xie et al. 2024) §3.6 filter
    candidates by these outcomes before voting.
    """

    PENDING = "pending"
    REFUSED = "refused"
    ERROR = "error"
    TIMEOUT = "timeout"
    OK = "ok"


@dataclass
class Column:
    """One catalog column, with its cell-value references.

    Source: PET-SQL (Li et al. 2024) §3.1, cell-value references in the prompt.

    Attributes:
        name: the column's name.
        data_type: its PostgreSQL type, as text (e.g. ``integer``, ``text``).
        is_primary_key: True when it is (part of) the table's primary key.
        comment: the column's comment, or None.
        sample_values: up to ``sample_values`` (setting) distinct cell values, as text; empty
            where the value policy withholds them.
        values_allowed: True when cell values of this column may reach a model (value policy,
            ``send_values``).
        values_complete: True when every distinct string value of the column is in the value
            index, False when it is partially indexed (more than ``values_per_column``, or
            sampled), None when the column has no indexed values.
    """

    name: str
    data_type: str
    is_primary_key: bool = False
    comment: str | None = None
    sample_values: list[str] = field(default_factory=list)
    values_allowed: bool = True  # cell values may reach a model (value policy, send_values)
    values_complete: bool | None = None  # False: the value index holds only part of its values


@dataclass
class ForeignKey:
    """A foreign key ``table(columns) -> ref_table(ref_columns)``.

    Attributes:
        table: the referencing table's prompt name (as ``Table.name``).
        columns: the referencing columns, in key order.
        ref_table: the referenced table's prompt name.
        ref_columns: the referenced columns, in the same order as ``columns``.
    """

    table: str
    columns: list[str]
    ref_table: str
    ref_columns: list[str]


@dataclass
class Table:
    """One catalog table.

    Attributes:
        name: how the prompt and candidates refer to it: bare when its schema is the first on
            the caller's search_path holding a table of that name, ``schema.table`` otherwise.
        schema: the PostgreSQL schema it lives in.
        table: its name within ``schema``.
        columns: its columns, in table order.
        comment: the table's comment, or None.
    """

    name: str
    schema: str
    table: str
    columns: list[Column]
    comment: str | None = None


@dataclass
class Schema:
    """The schema shown to the model.

    Attributes:
        tables: the tables, as ``Table``.
        foreign_keys: the foreign keys between those tables.
    """

    tables: list[Table]
    foreign_keys: list[ForeignKey] = field(default_factory=list)

    def table_names(self) -> list[str]:
        """List the tables' names, as the prompt shows them.

        Returns:
            The ``Table.name`` of each table, in schema order.
        """
        return [t.name for t in self.tables]

    def subset(self, names: set[str]) -> Schema:
        """Restrict the schema to some tables.

        Args:
            names: prompt names of the tables to keep (compared case-insensitively).

        Returns:
            A new ``Schema`` with the kept tables (in their order here) and only the foreign
            keys between kept tables.
        """
        keep = {n.lower() for n in names}
        tables = [t for t in self.tables if t.name.lower() in keep]
        kept = {t.name for t in tables}
        fks = [fk for fk in self.foreign_keys if fk.table in kept and fk.ref_table in kept]
        return Schema(tables=tables, foreign_keys=fks)


@dataclass
class Example:
    """A question/SQL pair of the example pool, with its similarity to the asked question.

    Attributes:
        id: the example's id in ``nl2sql.example``.
        db_id: the database (schema) the example was written for.
        question: the example's question.
        sql: its SQL.
        masked_question: the question with schema names and values masked, or None.
        similarity: cosine similarity of its masked question's embedding with the asked
            question's (all-MiniLM-L6-v2), rounded to 4 places; None when not retrieved.
        skeleton_jaccard: Jaccard similarity of its SQL skeleton with PreSQL's, in [0, 1]
            (DAIL selection), rounded to 4 places; None until computed.
    """

    id: int
    db_id: str
    question: str
    sql: str
    masked_question: str | None = None
    similarity: float | None = None
    skeleton_jaccard: float | None = None  # with PreSQL's skeleton (DAIL selection)


@dataclass
class ModelConfig:
    """One configured OpenAI-compatible endpoint (row of ``nl2sql.model``).

    Attributes:
        name: the configuration's name (how settings and the trace refer to it).
        model: the model id sent to the endpoint.
        base_url: the endpoint's base URL; None for the OpenAI client's default.
        api_key_env: name of the server environment variable holding the API key; None when
            the endpoint needs no key.
        temperature: sampling temperature.
        timeout_s: seconds that bound each request.
        max_tokens: most tokens of one answer.
        max_retries: retries with backoff on 408/409/429/5xx and connection errors.
        dialect: the SQL dialect the model writes (``postgres``, ``sqlite`` or ``mysql``);
            cleaning transpiles it to PostgreSQL.
    """

    name: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    timeout_s: float = 60.0
    max_tokens: int = 512
    max_retries: int = 2  # retries with backoff on 408/409/429/5xx/connection errors
    dialect: str = "postgres"  # SQL dialect the model writes (cleaning transpiles to postgres)

    @property
    def endpoint(self) -> str:
        """The base URL, as messages name it (``'default endpoint'`` when there is none)."""
        return self.base_url or "default endpoint"


@dataclass
class LLMReply:
    """One model call's outcome.

    Attributes:
        model: the configuration's name (``ModelConfig.name``).
        text: the answer (the first sample), or None on failure.
        error: why the call failed, or None.
        latency_ms: wall time of the call, retries included, in milliseconds.
        prompt_tokens: prompt tokens the endpoint reported (0 when unknown).
        completion_tokens: completion tokens the endpoint reported, all samples (0 when unknown).
        choices: every sample's text (self-consistency, ``n`` > 1); may be empty.
    """

    model: str
    text: str | None
    error: str | None
    latency_ms: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    choices: list[str] = field(default_factory=list)  # all n samples (self-consistency)


@dataclass
class Candidate:
    """A candidate SQL and what happened to it: check, execution, result signature.

    Attributes:
        source: its name: ``presql:<model>`` or ``finsql:<model>`` (plus ``#p<variant>s<sample>``
            for further prompt variants and samples).
        model: the configuration's name that wrote it.
        raw_text: the model's answer text, or None.
        sql: the cleaned, checked (and value-aligned) SQL, or None.
        status: a ``Status``.
        reason: why it was refused or failed (the check's or the server's message), or None.
        result_hash: SHA-256 of the result as a multiset of rows (64 hex characters), or None.
        row_count: rows fetched (at most ``max_rows``), or None.
        truncated: True when the result had more than ``max_rows`` rows.
        exec_ms: execution wall time in milliseconds, or None.
        tables: the relations it reads (lower-cased, CTEs excluded).
        cleaning: names of the cleaning steps applied (cleaning.py).
        alignments: literals snapped to cell values (alignment.py), one dict each.
        repairs: repair rounds (repair.py), one dict each.
        sample_rows: the first (at most 3) result rows as ``row_to_json`` texts, each cut at
            2,000 characters (300 in the trace); what reaches a model passes ``gate.Gate.rows``.
        sqlstate: the SQLSTATE of the execution error, or None.
        order_hash: the result's signature in row order when the SQL has a top-level ORDER
            BY (``vote.result_signature`` ordered), else None.
        prompt: the FinSQL prompt variant it answered (not in the trace), or None.
    """

    source: str  # "presql:<model>" or "finsql:<model>" (+ "#p<prompt>s<sample>")
    model: str
    raw_text: str | None
    sql: str | None = None
    status: Status = Status.PENDING
    reason: str | None = None
    result_hash: str | None = None
    row_count: int | None = None
    truncated: bool = False
    exec_ms: float | None = None
    tables: list[str] = field(default_factory=list)
    cleaning: list[str] = field(default_factory=list)  # cleaning steps applied (cleaning.py)
    alignments: list[dict[str, Any]] = field(
        default_factory=list
    )  # literals snapped to cell values
    repairs: list[dict[str, Any]] = field(default_factory=list)  # repair rounds (repair.py)
    sample_rows: list[str] = field(default_factory=list)  # first rows (row_to_json text)
    sqlstate: str | None = None  # the execution error's SQLSTATE
    order_hash: str | None = None  # result signature in row order, for an ORDER BY query
    prompt: str | None = None  # the FinSQL prompt variant it answered (not in the trace)

    def to_json(self) -> dict[str, Any]:
        """Return the candidate as a JSON-able dict for the trace.

        Returns:
            Every field but ``prompt`` (the prompt is in the trace's ``finsql`` part); sample
            rows cut at 300 characters.
        """
        d = asdict(self)
        d.pop("prompt", None)
        d["sample_rows"] = [r[:300] for r in d["sample_rows"]]
        return d


@dataclass
class Vote:
    """The vote's outcome: the winning group and every group's size and confidence.

    Source: MCS-SQL (Lee et al. 2024) §3.3 (confidence threshold, multiple-choice selection);
    PET-SQL (Li et al. 2024) §3.4 (vote by execution result).

    Attributes:
        sql: the winning SQL, or None when nothing executed.
        winner_hash: the winning group's result hash, or None.
        confidence: the winning group's share of the executed candidates, in [0, 1].
        groups: the kept groups, best first; each a dict (result_hash, size, confidence,
            sources, fastest_ms, fastest_source, sql, row_count, best_priority).
        reason: why this group won, in words.
        dropped: groups below the confidence threshold, in the same form.
        method: ``majority``, ``multiple_choice`` or ``majority (multiple choice unusable)``.
    """

    sql: str | None
    winner_hash: str | None
    confidence: float
    groups: list[dict[str, Any]]
    reason: str
    dropped: list[dict[str, Any]] = field(default_factory=list)  # below the confidence threshold
    method: str = "majority"


@dataclass(frozen=True)
class Turn:
    """An earlier turn of a conversation: what was asked and the SQL chosen for it.

    Attributes:
        log_id: the turn's ``nl2sql.query_log`` id.
        question: the question as asked.
        sql: the chosen SQL.
    """

    log_id: int
    question: str
    sql: str
