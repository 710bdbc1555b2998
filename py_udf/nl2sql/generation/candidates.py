"""FinSQL generation: which calls are made (models × prompt variants × samples), and how a
model's text becomes an executed candidate (clean → check → align values → execute).

* Cross-consistency (PET-SQL §3.4): every routed model answers, concurrently, each at its own
  configured temperature.
* Multiple prompts (MCS-SQL §3.2): with ``prompt_variants`` = p > 1, each model also answers
  p − 1 further prompts that differ in which examples they show (a seeded sample of the top
  2k retrieved examples), in the examples' order, and in the order of the schema's tables.
* Self-consistency: with ``samples_per_model`` = n > 1 each prompt is sampled n times in one
  request (``n`` of chat completions); a model configured at temperature 0 is then sampled at
  ``sample_temperature`` (identical samples would add nothing).

Candidate names (``source``): ``finsql:<model>`` for the first prompt's first sample, then
``finsql:<model>#p<variant>s<sample>``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

from ..core.errors import CandidateRefused, Nl2sqlError
from ..core.sqlcheck import referenced_tables, to_sql
from ..core.types import Candidate, Example, LLMReply, ModelConfig, Schema, Status
from ..model import prompts
from ..model.gate import Gate
from .alignment import ValueIndex, align_values
from .cleaning import clean
from .execute import DEFAULT_MAX_BYTES, run_candidate
from .safety import check_candidate_in_db


@dataclass
class GenCall:
    """One FinSQL request: a model, its prompt (variant ``variant``), ``n`` samples.

    Attributes:
        model: the model's configuration.
        prompt: the user message text of this prompt variant.
        variant: the prompt variant, 0 for the prompt as retrieved.
        n: samples asked for in the one request (``n`` of chat completions).
        temperature: sampling temperature for this request; None uses the model's own.
    """

    model: ModelConfig
    prompt: str
    variant: int
    n: int = 1
    temperature: float | None = None

    def as_call(self, gate: Gate) -> tuple:
        """Return the request as one entry of ``llm.call_models``' ``calls``.

        Args:
            gate: the call's gate (the prompt was built from parts that passed it).

        Returns:
            ``(model, messages, n, temperature)``, the messages sealed by ``gate.seal``.
        """
        return (self.model, gate.seal("finsql", self.prompt), self.n, self.temperature)


def variant_inputs(
    schema: Schema, examples: list[Example], k: int, variant: int, seed: str
) -> tuple[Schema, list[Example]]:
    """Choose the schema and examples of one prompt variant.

    Variant 0 is as retrieved: the schema unchanged and the first ``k`` examples in the given
    order. Variant v ≥ 1: ``k`` examples sampled from all of ``examples`` in random order, and
    the tables shuffled; seeded by ``seed`` and v, so a question always gets the same prompts.

    Source: MCS-SQL (Lee et al. 2024) §3.2, multiple prompts differing in examples and table
    order.

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
    return Schema(tables=tables, foreign_keys=list(schema.foreign_keys)), chosen


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
) -> list[GenCall]:
    """Plan the FinSQL requests for one question.

    For each prompt variant (0..variants−1) and each model, one request of ``samples``
    samples; a model configured at temperature 0 is sampled at ``sample_temperature`` when
    ``samples`` > 1.

    Source: PET-SQL (Li et al. 2024) §3.4, cross-consistency (every model answers); MCS-SQL
    (Lee et al. 2024) §3.2, multiple prompts and sampling.

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
        values: retrieved ``(table prompt name, column, value)`` triples shown in every
            prompt, or None.
        business: the rendered business context (terms, instructions) shown in every prompt,
            or None.
        turns: earlier turns of the conversation (``types.Turn``), shown in every prompt.
        gate: the call's gate: values, examples and turns pass it (``Gate.values``,
            ``Gate.examples``, ``Gate.turns``).

    Returns:
        The ``GenCall`` list, variant-major (all models' variant 0 first).
    """
    values = gate.values("finsql", values or [])
    examples = gate.examples("finsql", examples)
    turns = gate.turns("finsql", turns)
    calls: list[GenCall] = []
    for v in range(max(1, variants)):
        sch, exs = variant_inputs(schema, examples, k, v, question)
        prompt = prompts.build_prompt(
            question, sch, exs, n_values, evidence, values, business, turns
        )
        for m in models:
            temp = None
            if samples > 1 and m.temperature == 0:
                temp = sample_temperature
            calls.append(
                GenCall(model=m, prompt=prompt, variant=v, n=max(1, samples), temperature=temp)
            )
    return calls


def candidates_from(calls: list[GenCall], replies: list[LLMReply]) -> list[Candidate]:
    """Turn model replies into candidates: one per returned sample.

    A failed or empty call gives one candidate with status ``refused`` carrying the error.
    Names (``source``): ``finsql:<model>`` for variant 0's first sample, else
    ``finsql:<model>#p<variant>s<sample>``.

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
    """Everything needed to turn candidate text into an executed candidate, for one question.

    Answer texts already prepared and SQL already executed for this question are not done
    again: the candidate gets the earlier outcome.

    Attributes:
        plpy: the PL/Python module of the calling backend (SPI access).
        schema: what the calling role may see (``catalog.load_schema``).
        search_path: the caller's search_path text.
        timeout_ms: execution wall-clock limit per candidate, in milliseconds.
        max_rows: most rows fetched per candidate.
        max_bytes: most bytes of row text fetched per candidate (``max_result_bytes``).
        dialects: model name -> the SQL dialect it writes (``postgres`` when absent).
        values: the value index for value alignment; None turns alignment off.
        ms: accumulated milliseconds: ``check_ms``, ``align_ms``, ``run_ms``; None until the
            first use.
    """

    plpy: Any
    schema: Schema  # what the calling role may see (catalog.load_schema)
    search_path: str
    timeout_ms: int
    max_rows: int
    dialects: dict[str, str]
    max_bytes: int = DEFAULT_MAX_BYTES
    values: ValueIndex | None = None  # None: value alignment off
    ms: dict[str, float] | None = None  # accumulated time: check_ms, align_ms, run_ms
    _runs: dict[str, dict[str, Any]] | None = None  # executed SQL → its outcome (run once)
    _prep: dict[tuple[str, str], dict[str, Any]] | None = None  # answer text → prepared SQL

    def reset_ms(self) -> dict[str, float]:
        """Start a fresh ``ms``, so that what runs from now on is timed apart from before.

        Returns:
            The new ``ms``: ``check_ms``, ``align_ms``, ``run_ms``, each 0.0 milliseconds.
        """
        self.ms = {"check_ms": 0.0, "align_ms": 0.0, "run_ms": 0.0}
        return self.ms

    def prepare(self, c: Candidate, text: str | None) -> bool:
        """Clean, check and value-align one answer text into ``c.sql``.

        Runs ``cleaning.clean`` in the model's dialect, the full check of
        ``safety.check_candidate_in_db``, and (when ``values`` is set) value alignment; sets
        ``c.sql``, ``c.cleaning``, ``c.alignments``, ``c.tables``.

        Source: OpenSearch-SQL (Xie et al. 2024) §3.5, alignment of generated SQL.

        Args:
            c: the candidate, changed in place.
            text: the model's answer text, or None.

        Returns:
            True when it passed the check; False with status ``refused`` and the reason
            otherwise (also for no text, and for any unexpected error while cleaning,
            checking or aligning this one answer: it costs this candidate only).

        Raises:
            ConfigError: the model's configured dialect is unknown.
            Nl2sqlError: another error of the call's, not of the answer's (e.g. EmbeddingError).
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
            c.sql, c.alignments, c.tables = None, [], []
            self.ms["check_ms"] += (time.perf_counter() - t0) * 1000
            ok = False
        self._prep[(dialect, text)] = {
            f: getattr(c, f)
            for f in ("status", "reason", "sql", "cleaning", "alignments", "tables")
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
            tree = check_candidate_in_db(self.plpy, cl.sql, self.schema)
        except CandidateRefused as e:
            c.status, c.reason, c.sql = Status.REFUSED, str(e), cl.sql or None
            self.ms["check_ms"] += (time.perf_counter() - t0) * 1000
            return False
        t1 = time.perf_counter()
        self.ms["check_ms"] += (t1 - t0) * 1000
        if self.values is not None:
            tree, c.alignments = align_values(tree, self.schema, self.values)
        c.sql = to_sql(tree)
        c.tables = referenced_tables(tree)
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
        c.sample_rows, c.sqlstate, c.order_hash = [], None, None
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
    "row_count",
    "truncated",
    "exec_ms",
    "sample_rows",
    "sqlstate",
)
