"""Typed values that flow between pipeline stages (see DESIGN.md, "The pipeline").

Each stage is a function with dataclass inputs/outputs so that everything except the
database calls can be tested without a server.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """What happened to a candidate (``Candidate.status``). String-valued, so the trace's JSON
    and comparisons with the plain strings are unchanged.

    ``pending``: not evaluated yet; ``refused``: no answer, or it failed the check (safety.py);
    ``error``: execution failed; ``timeout``: cancelled at the time limit; ``ok``: executed
    (possibly with an empty result). Sources: MCS-SQL (Lee et al. 2024) §3.3 and
    OpenSearch-SQL (Xie et al. 2024) §3.6 filter candidates by these outcomes before voting.
    """

    PENDING = "pending"
    REFUSED = "refused"
    ERROR = "error"
    TIMEOUT = "timeout"
    OK = "ok"


@dataclass
class Column:
    """One catalog column, with PET-SQL's cell-value references (``sample_values``)."""

    name: str
    data_type: str
    is_primary_key: bool = False
    comment: str | None = None
    sample_values: list[str] = field(default_factory=list)
    values_allowed: bool = True   # cell values may reach a model (value policy, send_values)


@dataclass
class ForeignKey:
    """A foreign key ``table(columns) -> ref_table(ref_columns)`` (names as shown to the model)."""

    table: str
    columns: list[str]
    ref_table: str
    ref_columns: list[str]


@dataclass
class Table:
    """One catalog table. ``name`` is how the prompt and candidates refer to it: bare when its
    schema is on the caller's search_path, ``schema.table`` otherwise."""

    name: str
    schema: str
    table: str
    columns: list[Column]
    comment: str | None = None


@dataclass
class Schema:
    """The schema shown to the model: tables and foreign keys between them."""

    tables: list[Table]
    foreign_keys: list[ForeignKey] = field(default_factory=list)

    def table_names(self) -> list[str]:
        """Names of the tables, as the prompt shows them."""
        return [t.name for t in self.tables]

    def subset(self, names: set[str]) -> "Schema":
        """The schema restricted to tables whose prompt name (case-insensitive) is in ``names``,
        with only the foreign keys between kept tables."""
        keep = {n.lower() for n in names}
        tables = [t for t in self.tables if t.name.lower() in keep]
        kept = {t.name for t in tables}
        fks = [fk for fk in self.foreign_keys if fk.table in kept and fk.ref_table in kept]
        return Schema(tables=tables, foreign_keys=fks)


@dataclass
class Example:
    """A question/SQL pair of the example pool, with its similarity to the asked question."""

    id: int
    db_id: str
    question: str
    sql: str
    masked_question: str | None = None
    similarity: float | None = None
    skeleton_jaccard: float | None = None  # with PreSQL's skeleton (DAIL selection)


@dataclass
class ModelConfig:
    """One configured OpenAI-compatible endpoint (row of ``nl2sql.model``)."""

    name: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    timeout_s: float = 60.0
    max_tokens: int = 512
    max_retries: int = 2          # retries with backoff on 408/409/429/5xx/connection errors
    dialect: str = "postgres"   # SQL dialect the model writes (cleaning transpiles to postgres)


@dataclass
class LLMReply:
    """One model call's outcome: ``text`` or ``error``; ``latency_ms`` wall time of the call."""

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

    ``status`` is a ``Status``. ``result_hash`` identifies the result as a multiset of rows.
    """

    source: str            # "presql:<model>" or "finsql:<model>" (+ "#p<prompt>s<sample>")
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
    cleaning: list[str] = field(default_factory=list)      # cleaning steps applied (cleaning.py)
    alignments: list[dict[str, Any]] = field(default_factory=list)  # literals snapped to cell values
    repairs: list[dict[str, Any]] = field(default_factory=list)     # repair rounds (repair.py)
    sample_rows: list[str] = field(default_factory=list)   # first rows (row_to_json text)
    prompt: str | None = None          # the FinSQL prompt variant it answered (not in the trace)

    def to_json(self) -> dict[str, Any]:
        """JSON-able dict for the trace (the prompt is in the trace's ``finsql`` part)."""
        d = asdict(self)
        d.pop("prompt", None)
        return d


@dataclass
class Vote:
    """The vote's outcome: the winning group and every group's size/confidence."""

    sql: str | None
    winner_hash: str | None
    confidence: float
    groups: list[dict[str, Any]]
    reason: str
    dropped: list[dict[str, Any]] = field(default_factory=list)  # below the confidence threshold
    method: str = "majority"
