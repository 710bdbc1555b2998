"""The run object: one call's inputs and every stage's output, as typed fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core import spi
from ..core.settings import Settings
from ..core.timing import StageTimer
from ..core.types import (
    Candidate,
    Example,
    LLMReply,
    ModelConfig,
    Schema,
    Status,
    Turn,
    Vote,
)
from ..curated.fast_path import FastPath
from ..generation import db_checks
from ..generation.candidates import Evaluator, GenCall
from ..linking.schema_linking import Linked
from ..model.gate import Gate
from ..retrieval.example_selection import Selection
from ..retrieval.rewriting import Rewritten
from ..selection.judge import Judgement
from ..selection.reliability import Reliability
from .gather import Context


@dataclass
class LeaveOut:
    """Evaluation only (``nl2sql.evaluate``): the verified query whose question is asked; the
    fast path is bypassed and no example shares its question or SQL (leave-one-out)."""

    verified_id: int  # in ``nl2sql.verified_query``
    question: str
    sql: str
    run_id: int  # the ``nl2sql.evaluation_run`` id (the trace's ``evaluation_run``)

    def keeps(self, question: str, sql: str, verified_id: int | None = None) -> bool:
        """Whether an example or verified query may still be shown.

        Args:
            question: its question.
            sql: its SQL.
            verified_id: its verified query id, when it is one.

        Returns:
            False for the evaluated verified query and any pair with the same question (case
            and spacing ignored) or SQL (spacing and a final ``;`` ignored).
        """

        def q(t: str) -> str:
            return " ".join((t or "").lower().split())

        def s(t: str) -> str:
            return " ".join((t or "").strip().rstrip(";").split())

        return not (
            verified_id == self.verified_id
            or q(question) == q(self.question)
            or s(sql) == s(self.sql)
        )


@dataclass
class PreSQL:
    """The PreSQL: prompt (stage ``presql_prompt``), reply (``presql``), cleaned SQL
    (``linking``)."""

    prompt: str
    pruning: dict[str, Any]  # how the prompt's schema was pruned (the trace's ``pruning``)
    reply: LLMReply | None = None  # the first model's reply
    sql: str | None = None  # the cleaned PreSQL; None when there was no answer
    cleaning: list = field(default_factory=list)  # the cleaning steps applied
    refused: str | None = None  # why it was set aside (cleaning or linking)
    # the examples after a strong vector match re-masked the question (gated), else None
    examples_after_vector_values: list[Example] | None = None


@dataclass
class Rounds:
    """How many model rounds the question takes (setting ``model_rounds``) and why."""

    n: int  # 2: the PreSQL, then FinSQL; 1: every model writes once from the PreSQL prompt
    setting: str  # two, one or auto
    reason: str


@dataclass
class Linking:
    """After PreSQL: the linked schema, DAIL selection and the routed FinSQL writers. In one
    round: no linking (``linked``, ``selection`` None); the first model's answer routes the
    voters and ``schema`` is the PreSQL prompt's."""

    linked: Linked | None
    selection: Selection | None  # the DAIL selection of examples
    examples_shown: list[Example]  # its examples as the trace shows them (gated)
    models: list[ModelConfig] = field(default_factory=list)  # writers routed by hardness
    schema: Schema | None = None  # the linked tables (the whole schema when nothing linked)
    level: str | None = None  # the PreSQL's Spider hardness
    voters: list[str] = field(default_factory=list)
    why: str = ""  # the routing's reason
    reliability: Reliability | None = None  # calibrated per-model reliability, when used

    def weights(self) -> dict[str, float] | None:
        """The routed models' vote weights, for the vote and for repair's majority.

        Returns:
            Model name -> its calibrated reliability at the PreSQL's level, or None when no
            reliability is used (every vote weighs 1).
        """
        if self.reliability is None:
            return None
        return {m.name: round(self.reliability.weight(m.name, self.level), 6) for m in self.models}


@dataclass
class FinsqlPlan:
    """The FinSQL round to run: its calls (variant-major), the PreSQL as a candidate (status
    ``refused`` when it had no answer; None in one round), the evaluator, and the answers
    evaluated early."""

    calls: list[GenCall]
    presql: Candidate | None
    evaluator: Evaluator
    early: dict[int, list[Candidate]] = field(default_factory=dict)  # call index -> candidates


@dataclass
class MultipleChoice:
    """A model's pick among the vote's groups (MCS-SQL §3.3): who, its prompt and reply, and
    the option chosen (``multiple_choice.parse_choice``; None when unreadable)."""

    model: str
    prompt: str
    reply: LLMReply
    choice: int | None


@dataclass
class Selected:
    """The vote, the calibrated weights it used (None: a plain majority), and the multiple
    choice or the judge when a model was asked."""

    vote: Vote
    weights: dict[str, float] | None = None
    choice: MultipleChoice | None = None
    judge: Judgement | None = None  # the judge's comparison (``selection = judge``)


@dataclass
class Outcome:
    """The call's answer, as ``nl2sql()`` returns it and the trace shows it."""

    vote: Vote  # the fast path's has method ``verified_query``
    candidates_shown: list[dict[str, Any]]  # every candidate as the trace shows it (gated)
    sql: str | None  # None when nothing was chosen or the vote abstained
    confidence: float
    tokens: dict[str, Any]  # tokens and cost of every model call (``model.quota.usage_of``)
    error: str | None = None  # why no SQL was chosen
    abstained: dict[str, Any] | None = None  # threshold, confidence and readings


@dataclass
class Run:
    """One call: its inputs, then each stage's output (None or empty until the stage ran)."""

    plpy: Any  # the PL/Python module of the calling backend (SPI access)
    st: Settings
    models: list[ModelConfig]  # enabled, in position order (the first writes the PreSQL)
    question: str  # validated
    search_path: str  # the caller's search_path text
    evidence: str | None  # the caller's hint text
    timer: StageTimer
    conversation: str | None = None  # the conversation key
    turns: list[Turn] = field(default_factory=list)  # its earlier turns, oldest first
    leave_out: LeaveOut | None = None  # evaluation only
    quota: dict[str, Any] | None = None  # the role's quota check (``model.quota.take``)
    given_presql: str | None = None  # ``retrieve()`` only: the caller's PreSQL
    keep_rows: bool = False  # ``ask()``: executions keep their rows (``Candidate.rows``)
    # start.rewrite, start.load_schema
    prompt_question: str = ""  # the question as the prompts show it
    rewriting: Rewritten | None = None
    schema: Schema | None = None  # what the role may read
    gate: Gate | None = None  # every text bound for a model passes it (the role's value rules)
    values_partial: dict[str, Any] | None = None  # the partially indexed columns
    values_withheld: dict[str, Any] | None = None  # ``Gate.report()`` when last taken
    # before_models: retrieval, the fast path, the PreSQL prompt
    context: Context | None = None  # what retrieval found
    examples_shown: list[Example] = field(default_factory=list)  # top-k, gated
    turns_shown: list[Turn] | None = None  # a conversation's turns as prompts show them, gated
    fast_path: FastPath | None = None
    fast_path_skipped: str | None = None  # why the fast path was not tried
    finished: bool = False  # the fast path answered: no later stage runs
    presql: PreSQL | None = None
    rounds: Rounds | None = None  # one or two model rounds, and why
    # presql, finsql, choose, trace
    linking: Linking | None = None
    finsql_prompt: str | None = None  # ``retrieve()`` only, from ``given_presql``
    plan: FinsqlPlan | None = None
    finsql_replies: list[LLMReply] = field(default_factory=list)  # in call order
    candidates: list[Candidate] = field(default_factory=list)
    repair: dict[str, Any] | None = None  # ``repair_loop``'s summary
    last_resort: tuple[str, LLMReply] | None = None  # its prompt and reply, when it was asked
    selected: Selected | None = None
    outcome: Outcome | None = None
    embedder: dict[str, Any] | None = None  # what served the embeddings

    def chosen_rows(self) -> list[str] | None:
        """The rows of the chosen SQL's own checked execution (``keep_rows``).

        Returns:
            Its rows (at most ``max_rows``), or None when nothing was chosen or its rows were
            not kept.
        """
        sql = self.outcome.sql if self.outcome is not None else None
        if sql is None:
            return None
        found = [*self.candidates]
        if self.fast_path is not None and self.fast_path.candidate is not None:
            found.append(self.fast_path.candidate)
        for c in found:
            if c.sql == sql and c.status == Status.OK and c.rows is not None:
                return c.rows
        return None

    def one_round(self) -> bool:
        """Whether the models write once (``rounds``), the PreSQL round and linking skipped.

        Returns:
            True when ``rounds`` chose one round.
        """
        return self.rounds is not None and self.rounds.n == 1

    def two_rounds(self) -> bool:
        """Whether the PreSQL round and linking run.

        Returns:
            True unless ``rounds`` chose one round.
        """
        return not self.one_round()

    def on_wait(self) -> None:
        """Let a pending cancel land; called between slices of a model wait.

        Raises:
            plpy.SPIError: QueryCanceled when the caller cancelled.
        """
        spi.cancel_point(self.plpy)

    def budget_s(self) -> float | None:
        """Return the seconds left before the caller's ``statement_timeout``.

        Returns:
            Seconds (negative when over), or None when no statement_timeout is set.
        """
        return db_checks.statement_remaining_s(self.plpy)
