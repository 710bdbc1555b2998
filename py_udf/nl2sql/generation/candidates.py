"""FinSQL generation (models × prompt variants × samples) and a candidate's way from text to
execution (docs/internals/generation.md "FinSQL calls"). Sources: PET-SQL (Li et al. 2024) §3.4;
MCS-SQL (Lee et al. 2024) §3.2."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from ..core.errors import CandidateRefused, ConfigError, Nl2sqlError
from ..core.sqlcheck import referenced_tables, to_sql, top_level_order
from ..core.types import Candidate, Example, LLMReply, ModelConfig, Schema, Status
from ..model import prompts
from ..model.gate import Gate
from .alignment import ValueIndex, align_bounds, align_values
from .cleaning import clean
from .db_checks import CheckMemo, check_candidate_in_db
from .execute import DEFAULT_MAX_BYTES, PlanLimits, run_candidate


@dataclass
class GenCall:
    """One FinSQL request: a model, its prompt (variant ``variant``), ``n`` samples."""

    model: ModelConfig
    prompt: str  # the user message text of this prompt variant
    variant: int  # 0 for the prompt as retrieved
    n: int = 1  # samples asked for in the one request
    temperature: float | None = None  # None: the model's own
    stage: str = "finsql"  # the gate's stage name (``one_round``: no PreSQL round before)

    def as_call(self, gate: Gate) -> tuple:
        """Return the request as one entry of ``llm.call_models``' ``calls``.

        Args:
            gate: the call's gate (the prompt was built from parts that passed it).

        Returns:
            ``(model, messages, n, temperature)``, the messages sealed by ``gate.seal``.
        """
        return (self.model, gate.seal(self.stage, self.prompt), self.n, self.temperature)


ROUNDS = ("two", "one", "auto")


def rounds_for(setting: str, pruning: dict[str, Any]) -> tuple[int, str]:
    """How many model rounds a question takes under setting ``model_rounds``.

    Args:
        setting: ``two``, ``one`` or ``auto`` (``ROUNDS``).
        pruning: the PreSQL prompt's pruning (``pruned``, ``tokens_full``, ``budget``).

    Returns:
        ``(1 or 2, why)``: ``auto`` takes one round when the PreSQL prompt holds the whole
        schema (linking from a PreSQL would only narrow what every model already sees) and two
        when the schema was pruned to ``prompt_token_budget``.

    Raises:
        ConfigError: an unknown setting.
    """
    if setting not in ROUNDS:
        raise ConfigError(f"model_rounds must be one of {', '.join(ROUNDS)}, got {setting!r}")
    pruned = bool(pruning.get("pruned"))
    size = (
        f"the whole schema, {pruning.get('tokens_full')} estimated tokens, "
        f"{'exceeds' if pruned else 'fits'} prompt_token_budget {pruning.get('budget')}"
    )
    if setting == "two":
        return 2, "model_rounds is two: the PreSQL, then FinSQL from the linked schema"
    if setting == "one":
        shown = "a pruned schema" if pruned else "the whole schema"
        return 1, f"model_rounds is one: every model writes once from the PreSQL prompt ({shown})"
    if pruned:
        return 2, f"model_rounds is auto and {size}: the PreSQL links the FinSQL prompt's tables"
    return 1, f"model_rounds is auto and {size}: every model writes once from that prompt"


def variant_inputs(
    schema: Schema, examples: list[Example], k: int, variant: int, seed: str
) -> tuple[Schema, list[Example]]:
    """Choose the schema and examples of one prompt variant: variant 0 as retrieved; v ≥ 1 a
    seeded sample of ``k`` examples in random order and the tables shuffled.

    Source: MCS-SQL (Lee et al. 2024) §3.2.

    Args:
        schema: the schema to show.
        examples: the example candidates, best first (the pipeline passes the top 2k).
        k: examples per prompt.
        variant: the variant number, 0 or more.
        seed: the seed text (the question).

    Returns:
        ``(schema, examples)`` of the variant; the schema is a new ``Schema`` for v ≥ 1.
    """
    if variant == 0:
        return schema, examples[:k]
    rnd = random.Random(f"{seed}\x00{variant}")
    chosen = rnd.sample(examples, min(k, len(examples)))
    tables = list(schema.tables)
    rnd.shuffle(tables)
    return Schema(
        tables=tables, foreign_keys=list(schema.foreign_keys), row_check=schema.row_check
    ), chosen


def finsql_calls(
    models: list[ModelConfig],
    question: str,
    schema: Schema,
    examples: list[Example],
    k: int,
    n_values: int,
    evidence: str | None,
    variants: int = 1,
    samples: int = 1,
    sample_temperature: float = 1.0,
    values: list[tuple[str, str, str]] | None = None,
    business: str | None = None,
    turns: tuple = (),
    *,
    gate: Gate,
    first_prompt: str | None = None,
) -> list[GenCall]:
    """Plan the FinSQL requests for one question: per prompt variant and model, one request of
    ``samples`` samples (temperature-0 models sampled at ``sample_temperature`` when > 1).

    Source: PET-SQL (Li et al. 2024) §3.4; MCS-SQL (Lee et al. 2024) §3.2.

    Args:
        models: the FinSQL models' configurations.
        question: the question (also the variants' seed).
        schema: the linked schema to show.
        examples: the DAIL selection first, then further candidates (variants sample from all).
        k: examples per prompt.
        n_values: most cell values shown per column.
        evidence: the caller's hint text, or None.
        variants: prompt variants per model (at least 1 is made).
        samples: samples per request (at least 1).
        sample_temperature: temperature for temperature-0 models when ``samples`` > 1.
        values: retrieved ``(table prompt name, column, value)`` triples, or None.
        business: the rendered business context, or None.
        turns: earlier turns of the conversation (``types.Turn``).
        gate: the call's gate (values, examples and turns pass it).
        first_prompt: variant 0's prompt as already built (one round: the PreSQL prompt,
            sealed as stage ``one_round``), or None to build it like the others.

    Returns:
        The ``GenCall`` list, variant-major (all models' variant 0 first).
    """
    if first_prompt is None or variants > 1:  # parts of a prompt built here pass the gate
        values = gate.values("finsql", values or [])
        examples = gate.examples("finsql", examples)
        turns = gate.turns("finsql", turns)
    calls: list[GenCall] = []
    for v in range(max(1, variants)):
        if v == 0 and first_prompt is not None:
            prompt = first_prompt
        else:
            sch, exs = variant_inputs(schema, examples, k, v, question)
            prompt = prompts.build_prompt(
                question, sch, exs, n_values, evidence, values, business, turns
            )
        for m in models:
            temp = None
            if samples > 1 and m.temperature == 0:
                temp = sample_temperature
            calls.append(
                GenCall(
                    model=m,
                    prompt=prompt,
                    variant=v,
                    n=max(1, samples),
                    temperature=temp,
                    stage="finsql" if first_prompt is None else "one_round",
                )
            )
    return calls


def candidates_from(calls: list[GenCall], replies: list[LLMReply]) -> list[Candidate]:
    """Turn model replies into candidates, one per sample (a failed call: one ``refused``).

    Args:
        calls: the requests made.
        replies: their replies, in the order of ``calls``.

    Returns:
        The candidates, status ``pending`` unless the call gave no answer.
    """
    out: list[Candidate] = []
    for call, rep in zip(calls, replies):
        texts = rep.choices or [rep.text]
        for s, text in enumerate(texts):
            suffix = "" if call.variant == 0 and s == 0 else f"#p{call.variant}s{s}"
            c = Candidate(
                source=f"finsql:{rep.model}{suffix}",
                model=rep.model,
                raw_text=text,
                prompt=call.prompt,
            )
            if rep.error or not text:
                c.status, c.reason = Status.REFUSED, f"no answer: {rep.error or 'empty'}"
            out.append(c)
    return out


@dataclass
class Evaluator:
    """Everything needed to turn candidate text into an executed candidate, for one question;
    an answer text or SQL already done for this question gets the earlier outcome."""

    plpy: Any
    schema: Schema  # what the calling role may see (catalog.load_schema)
    search_path: str
    timeout_ms: int  # execution wall-clock limit per candidate
    max_rows: int  # most rows fetched per candidate
    dialects: dict[str, str]  # model name -> the SQL dialect it writes (postgres when absent)
    max_bytes: int = DEFAULT_MAX_BYTES  # most bytes of row text fetched per candidate
    values: ValueIndex | None = None  # None: value alignment off
    limits: PlanLimits | None = None  # the plan-cost limit (None: no EXPLAIN before running)
    ms: dict[str, float] | None = None  # accumulated time: check_ms, align_ms, run_ms
    keep_rows: bool = False  # keep each execution's rows (``Candidate.rows``: nl2sql.ask)
    question: str | None = None  # the user's question (repair's rules read its words)
    rules_off: frozenset[str] = frozenset()  # repair's rules skipped (setting ``rules_off``)
    _runs: dict[str, dict[str, Any]] | None = None  # executed SQL → its outcome (run once)
    _prep: dict[tuple[str, str], dict[str, Any]] | None = None  # answer text → prepared SQL
    _memo: CheckMemo | None = None  # the catalog answers of this question's checks

    def reset_ms(self) -> dict[str, float]:
        """Start a fresh ``ms``, timing what runs from now on apart from before.

        Returns:
            The new ``ms``: ``check_ms``, ``align_ms``, ``run_ms``, each 0.0 milliseconds.
        """
        self.ms = {"check_ms": 0.0, "align_ms": 0.0, "run_ms": 0.0}
        return self.ms

    def prepare(self, c: Candidate, text: str | None) -> bool:
        """Clean, check (``db_checks.check_candidate_in_db``) and value-align one answer into
        ``c.sql``. Source: OpenSearch-SQL (Xie et al. 2024) §3.5.

        Args:
            c: the candidate, changed in place (``sql``, ``cleaning``, ``alignments``, ``tables``).
            text: the model's answer text, or None.

        Returns:
            True when it passed the check; False with status ``refused`` and the reason otherwise
            (an unexpected error with this answer costs this candidate only).

        Raises:
            ConfigError: the model's configured dialect is unknown.
            Nl2sqlError: an error of the call's, not of the answer's (e.g. EmbeddingError).
            plpy.SPIError: a lookup was cancelled by the user (or failed in the database).
        """
        if self.ms is None:
            self.reset_ms()
        if not text:
            c.status, c.reason = Status.REFUSED, "no answer: empty"
            return False
        t0 = time.perf_counter()
        dialect = self.dialects.get(c.model, "postgres")
        if self._prep is None:
            self._prep = {}
        hit = self._prep.get((dialect, text))
        if hit is not None:  # the same answer text was already prepared for this question
            for f, v in hit.items():
                setattr(c, f, list(v) if isinstance(v, list) else v)
            self.ms["check_ms"] += (time.perf_counter() - t0) * 1000
            return c.status != Status.REFUSED
        try:
            ok = self._prepare(c, text, dialect, t0)
        except Exception as e:
            if isinstance(e, (Nl2sqlError, self._spi_error())) and not isinstance(
                e, CandidateRefused
            ):
                raise  # a configuration to fix, or the user's cancel: the call's, not the answer's
            c.status = Status.REFUSED
            c.reason = f"could not be prepared: {type(e).__name__}: {str(e)[:300]}"
            c.sql, c.alignments, c.tables, c.ordered = None, [], [], None
            self.ms["check_ms"] += (time.perf_counter() - t0) * 1000
            ok = False
        self._prep[(dialect, text)] = {
            f: getattr(c, f)
            for f in ("status", "reason", "sql", "cleaning", "alignments", "tables", "ordered")
        }
        return ok

    def _spi_error(self) -> type[BaseException]:
        """The backend's ``plpy.SPIError`` (a query error or cancel), or a class never raised."""
        err = getattr(self.plpy, "SPIError", None)
        return err if isinstance(err, type) and issubclass(err, BaseException) else _NeverRaised

    def _prepare(self, c: Candidate, text: str, dialect: str, t0: float) -> bool:
        cl = clean(text, dialect, self.schema)
        c.cleaning = cl.steps
        if cl.reason is not None:  # past a cap, a NUL byte, only a comment: nothing to check
            c.status, c.reason, c.sql = Status.REFUSED, cl.reason, None
            self.ms["check_ms"] += (time.perf_counter() - t0) * 1000
            return False
        try:
            self._memo = self._memo or CheckMemo(self.plpy)
            tree = check_candidate_in_db(self.plpy, cl.sql, self.schema, self._memo)
        except CandidateRefused as e:
            c.status, c.reason, c.sql = Status.REFUSED, str(e), cl.sql or None
            self.ms["check_ms"] += (time.perf_counter() - t0) * 1000
            return False
        t1 = time.perf_counter()
        self.ms["check_ms"] += (t1 - t0) * 1000
        c.alignments = []
        if self.values is not None:
            tree, c.alignments = align_values(tree, self.schema, self.values)
        tree, bounds = align_bounds(tree, self.question)  # "2014 or after": year >= 2014
        c.alignments = c.alignments + bounds
        c.sql = to_sql(tree)
        c.tables = referenced_tables(tree)
        c.ordered = top_level_order(tree)  # has_top_level_order without parsing c.sql again
        self.ms["align_ms"] += (time.perf_counter() - t1) * 1000
        return True

    def run(self, c: Candidate, text: str | None) -> Candidate:
        """Prepare one answer text, then execute it read-only under the time limit.

        Args:
            c: the candidate, changed in place (its earlier outcome is reset).
            text: the model's answer text, or None.

        Returns:
            ``c``, with status ``refused``, ``ok``, ``error`` or ``timeout``.

        Raises:
            ConfigError: the model's configured dialect is unknown.
            plpy.SPIError: the user cancelled the statement.
        """
        c.status, c.reason, c.result_hash, c.row_count, c.exec_ms = (
            Status.PENDING,
            None,
            None,
            None,
            None,
        )
        c.sample_rows, c.sqlstate, c.order_hash, c.rows, c.answer = [], None, None, None, None
        if self.prepare(c, text):
            t0 = time.perf_counter()
            if self._runs is None:
                self._runs = {}
            done = self._runs.get(c.sql)
            if done is not None:  # the same SQL already ran for this question: same outcome
                for f, v in done.items():
                    setattr(c, f, v)
            else:
                run_candidate(
                    self.plpy,
                    c,
                    self.search_path,
                    self.timeout_ms,
                    self.max_rows,
                    max_bytes=self.max_bytes,
                    limits=self.limits,
                    keep_rows=self.keep_rows,
                )
                self._runs[c.sql] = {f: getattr(c, f) for f in _RUN_FIELDS}
            self.ms["run_ms"] += (time.perf_counter() - t0) * 1000
        return c


class _NeverRaised(Exception):
    """Stands for ``plpy.SPIError`` where the backend module has none (tests)."""


_RUN_FIELDS = (
    "status",
    "reason",
    "result_hash",
    "order_hash",
    "answer",
    "row_count",
    "truncated",
    "exec_ms",
    "sample_rows",
    "sqlstate",
    "plan_cost",
    "plan_rows",
    "rows",
)
