"""Typed values that flow between pipeline stages: the schema shown to models, examples, model
configuration and replies, candidates and the vote."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """What happened to a candidate (``Candidate.status``): string-valued, as the trace writes it.
    Source: MCS-SQL (Lee et al. 2024) §3.3, OpenSearch-SQL (Xie et al. 2024) §3.6.
    """

    PENDING = "pending"  # not evaluated yet
    REFUSED = "refused"  # no answer, or it failed the check
    ERROR = "error"  # execution failed
    TIMEOUT = "timeout"  # cancelled at the time limit
    OK = "ok"  # executed (possibly with an empty result)


@dataclass
class Column:
    """One catalog column, with its cell-value references (PET-SQL, Li et al. 2024, §3.1)."""

    name: str
    data_type: str  # PostgreSQL type as text (``integer``, ``text``)
    is_primary_key: bool = False  # (part of) the primary key
    comment: str | None = None
    # up to ``sample_values`` (setting) distinct cell values; empty where the policy withholds
    sample_values: list[str] = field(default_factory=list)
    values_allowed: bool = True  # cell values may reach a model (value policy, send_values)
    # True: every distinct string value is indexed; False: partially (over the cap, sampled);
    # None: no indexed values
    values_complete: bool | None = None


@dataclass
class ForeignKey:
    """A foreign key ``table(columns) -> ref_table(ref_columns)``, tables by prompt name."""

    table: str
    columns: list[str]  # in key order
    ref_table: str
    ref_columns: list[str]  # in the order of ``columns``
    # None: declared in the catalog; else what the semantic model says of this relationship
    # (shown after the line in the prompts, e.g. ``relationship orders_customers, many_to_one``)
    note: str | None = None


@dataclass
class Table:
    """One catalog table."""

    # how prompts and candidates name it: bare when its schema is the first on the caller's
    # search_path holding a table of that name, ``schema.table`` otherwise
    name: str
    schema: str
    table: str  # its name within ``schema``
    columns: list[Column]  # in table order
    comment: str | None = None


@dataclass
class Schema:
    """The schema shown to the model: tables and the foreign keys between them."""

    tables: list[Table]
    foreign_keys: list[ForeignKey] = field(default_factory=list)
    # ``catalog.RowCheck`` when some opted-in table's row security applies to the caller, else None
    row_check: Any = field(default=None, repr=False, compare=False)

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
            A new ``Schema`` with the kept tables (in their order) and the foreign keys between them.
        """
        keep = {n.lower() for n in names}
        tables = [t for t in self.tables if t.name.lower() in keep]
        kept = {t.name for t in tables}
        fks = [fk for fk in self.foreign_keys if fk.table in kept and fk.ref_table in kept]
        return Schema(tables=tables, foreign_keys=fks, row_check=self.row_check)


@dataclass
class Example:
    """A question/SQL pair of the example pool, with its similarity to the asked question."""

    id: int  # in ``nl2sql.example``
    db_id: str  # the database (schema) it was written for
    question: str
    sql: str
    masked_question: str | None = None  # schema names and values masked
    # cosine similarity of the masked questions' embeddings, 4 places; None: not retrieved
    similarity: float | None = None
    skeleton_jaccard: float | None = None  # with PreSQL's skeleton (DAIL selection)


@dataclass
class ModelConfig:
    """One configured OpenAI-compatible endpoint (row of ``nl2sql.model``)."""

    name: str  # how settings and the trace refer to it
    model: str  # the model id sent to the endpoint
    base_url: str | None = None  # None: the OpenAI client's default
    api_key_env: str | None = None  # the server environment variable holding the key
    temperature: float = 0.0
    timeout_s: float = 60.0  # seconds that bound each call
    max_tokens: int | None = None  # the output cap (None: decide, ``model.capability``)
    max_retries: int = 2  # retries with backoff on 408/409/429/5xx/connection errors
    dialect: str = "postgres"  # SQL dialect the model writes (cleaning transpiles to postgres)
    price_in_per_mtok: float | None = None  # US dollars per million prompt tokens (None: unknown)
    price_out_per_mtok: float | None = None  # US dollars per million completion tokens
    # the request's shape, in the providers' words; None: decide (``model.capability``)
    cap_parameter: str | None = None  # 'max_tokens' or 'max_completion_tokens'
    send_temperature: bool | None = None
    send_n: bool | None = None  # False: samples as separate requests
    reasoning_effort: str | None = None  # '' : never sent
    context_window: int | None = None  # tokens, prompt and answer together
    reasoning_max_tokens: int = 8192  # the output cap of a model that thinks (setting)
    max_output_tokens: int = 32768  # the most a cut reply's retry may raise the cap to (setting)
    revision: str = ""  # the model row's version (xmin): add_model again forgets what was learned

    @property
    def endpoint(self) -> str:
        """The base URL, as messages name it (``'default endpoint'`` when there is none)."""
        return self.base_url or "default endpoint"


@dataclass
class LLMReply:
    """One model call's outcome."""

    model: str  # ``ModelConfig.name``
    text: str | None  # the first sample; None on failure
    error: str | None  # why the call failed
    latency_ms: float  # wall time, retries included
    prompt_tokens: int = 0  # as the endpoint reported, else counted (``tokens_source``)
    completion_tokens: int = 0  # all samples
    choices: list[str] = field(default_factory=list)  # all n samples (self-consistency)
    # where the token counts come from: "endpoint" (its ``usage``), "tokenizer:<encoding>",
    # "estimate" (characters / 3.5); "" before ``model.tokens.account``
    tokens_source: str = ""
    cost_usd: float | None = None  # at the model's prices (None: a price is not set)
    reasoning_tokens: int = 0  # of ``completion_tokens``, spent thinking (the endpoint's usage)
    request: dict = field(default_factory=dict)  # what was sent (``capability.request_args``)
    learned: list[str] = field(default_factory=list)  # what this call taught (``capability``)
    context_window: int | None = None  # the endpoint's window, when known (tokens)


@dataclass
class Candidate:
    """A candidate SQL and what happened to it: check, execution, result signature."""

    source: str  # "presql:<model>" or "finsql:<model>" (+ "#p<prompt>s<sample>")
    model: str  # the configuration's name that wrote it
    raw_text: str | None  # the model's answer text
    sql: str | None = None  # cleaned, checked (and value-aligned)
    status: Status = Status.PENDING
    reason: str | None = None  # why refused or failed (the check's or the server's message)
    result_hash: str | None = None  # SHA-256 of the rows as a multiset (64 hex characters)
    row_count: int | None = None  # rows fetched (at most ``max_rows``)
    truncated: bool = False  # more than ``max_rows`` rows
    exec_ms: float | None = None
    tables: list[str] = field(default_factory=list)  # relations read (lower-cased, no CTEs)
    cleaning: list[str] = field(default_factory=list)  # cleaning steps applied (cleaning.py)
    alignments: list[dict[str, Any]] = field(
        default_factory=list
    )  # literals snapped to cell values
    repairs: list[dict[str, Any]] = field(default_factory=list)  # repair rounds (repair.py)
    # first (at most 3) rows as row_to_json texts, cut at 2,000 characters (300 in the trace);
    # what reaches a model passes ``gate.Gate.rows``
    sample_rows: list[str] = field(default_factory=list)
    sqlstate: str | None = None  # the execution error's SQLSTATE
    order_hash: str | None = None  # result signature in row order, for an ORDER BY query
    plan_cost: float | None = None  # the planner's total cost estimate (EXPLAIN), before running
    plan_rows: float | None = None  # the planner's estimate of the rows it returns
    prompt: str | None = None  # the FinSQL prompt variant it answered (not in the trace)
    # every row of its checked execution (at most ``max_rows``), kept only when the call
    # returns rows (``nl2sql.ask``): the answer's rows come from the execution that was checked
    rows: list[str] | None = None
    # whether the outermost statement has an ORDER BY, read from the check's tree (None: not
    # known; the run parses ``sql`` again); not in the trace
    ordered: bool | None = None
    # what its result says for the vote (``selection.answers.describe``): the column-order-free
    # key, the rounded key, each column's bag hash, the column count, degenerate or not
    answer: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the candidate as a JSON-able dict for the trace.

        Returns:
            Every field but ``prompt``, ``rows`` and ``ordered``; sample rows cut at 300
            characters.
        """
        d = {
            f.name: copy.deepcopy(getattr(self, f.name))
            for f in fields(self)
            if f.name not in ("prompt", "rows", "ordered")  # rows: up to max_rows, not copied
        }
        d["sample_rows"] = [r[:300] for r in d["sample_rows"]]
        return d


@dataclass
class Vote:
    """The vote's outcome: the winning group and every group's size and confidence. Source: MCS-SQL
    (Lee et al. 2024) §3.3; PET-SQL (Li et al. 2024) §3.4.
    """

    sql: str | None  # the winning SQL; None when nothing executed
    winner_hash: str | None
    # the winner's share of every candidate that executed (an empty result set aside counts), 0..1
    confidence: float
    # kept groups, best first: result_hash, size, confidence, sources, fastest_ms,
    # fastest_source, sql, row_count, best_priority
    groups: list[dict[str, Any]]
    reason: str  # why this group won
    dropped: list[dict[str, Any]] = field(default_factory=list)  # below the confidence threshold
    method: str = "majority"  # or multiple_choice, judge, "majority (multiple choice unusable)"
    # groups of empty results set aside while other candidates returned rows (they do not vote)
    set_aside: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Turn:
    """An earlier turn of a conversation: what was asked (``nl2sql.query_log`` id) and its SQL."""

    log_id: int
    question: str
    sql: str
