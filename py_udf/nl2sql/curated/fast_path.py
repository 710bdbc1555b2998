"""The fast path: a question answered from a verified query or template without a model call
(docs/internals/curated.md). Source: ReBoost (Sui et al. 2023) Text-to-Function; DAIL-SQL (Gao
et al. 2023) §3.3 (masked-question similarity)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlglot import exp

from ..core.errors import CandidateRefused
from ..core.sqlcheck import referenced_tables
from ..core.types import Candidate, Schema, Status
from ..generation.db_checks import check_candidate_in_db
from ..generation.execute import run_candidate
from ._parameters import MARKER, Slot, fill, typed_literal
from ._question_words import (
    meaning_words,
    name_words,
    other_words,
    phrase_position,
    question_numbers,
    strong_values,
)
from .business import named_terms
from .verified import VerifiedRow

# How far below ``verified_min_similarity`` a question written in other words may be: the
# masked questions "How many <mask> live in <mask> ?" and "How many <mask> are there in <mask> ?"
# are 0.845 similar (docs/internals/curated.md, "Other words").
OTHER_WORDS_MARGIN = 0.13


@dataclass
class Bound:
    """Binding a question to a verified query: the bound ``sql`` and ``bindings``, or the
    ``reason`` it did not bind."""

    sql: str | None
    bindings: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None


def bind(row: VerifiedRow, question: str, strong: dict[str, list], numbers: list[str]) -> Bound:
    """Bind a new question's cell values and numbers to a verified query's parameters.

    The rules: docs/internals/curated.md, "When a verified query answers".

    Args:
        row: the verified query or template.
        question: the new question.
        strong: its strong values (``strong_values``), phrase -> matches best first.
        numbers: its numbers (``question_numbers``).

    Returns:
        ``Bound`` with the SQL and the bindings, or the reason it does not bind.
    """
    phrases = sorted(strong, key=lambda p: phrase_position(question, p))
    used: set[str] = set()
    values: dict[str, exp.Literal] = {}
    bindings: list[dict[str, Any]] = []
    reason = _bind_constants(row, phrases, strong, used) or _bind_values(
        row, phrases, strong, used, values, bindings
    )
    left = [p for p in phrases if p not in used]
    if not reason and left:
        reason = (
            f"the question names {', '.join(repr(p) for p in left)}, "
            f"which the verified query takes no parameter for"
        )
    reason = reason or _bind_numbers(row, numbers, values, bindings)
    if reason:
        return Bound(None, reason=reason)
    try:
        return Bound(fill(row.template_sql, row.slots, values), bindings)
    except CandidateRefused as e:
        return Bound(None, reason=str(e))


def _in_column(strong: dict[str, list], p: str, col) -> list:
    """The matches of phrase ``p`` in column ``col`` (schema, table, column), best first."""
    return [v for v in strong[p] if [v.schema, v.table, v.column] == list(col)]


def _bind_constants(
    row: VerifiedRow, phrases: list[str], strong: dict[str, list], used: set[str]
) -> str | None:
    """Each value the verified question names (not a parameter) must be named again; the
    phrases naming them are added to ``used``. Returns why not, or None."""
    for alternatives in row.info.get("constants", []):
        hit = next(
            (
                p
                for p in phrases
                if p not in used
                and any(
                    v.value == value
                    for s, t, c, value in alternatives
                    for v in _in_column(strong, p, (s, t, c))
                )
            ),
            None,
        )
        if hit is None:
            s, t, c, value = alternatives[0]
            return (
                f"the question does not name {value!r} ({t}.{c}), which the verified question names"
            )
        used.add(hit)
    return None


def _bind_values(
    row: VerifiedRow,
    phrases: list[str],
    strong: dict[str, list],
    used: set[str],
    values: dict[str, exp.Literal],
    bindings: list[dict[str, Any]],
) -> str | None:
    """Each value parameter takes, per column in question order, a value the question names in
    that column (added to ``values``, ``bindings`` and ``used``). Returns why not, or None."""
    by_col: dict[tuple, list[Slot]] = {}
    for sl in row.slots:
        if sl.kind == "value":
            by_col.setdefault(tuple(sl.column), []).append(sl)
    for col, slots in by_col.items():
        found = [p for p in phrases if p not in used and _in_column(strong, p, col)]
        if len(found) != len(slots):
            return (
                f"the question names {len(found)} value(s) of {col[1]}.{col[2]}; the "
                f"verified query takes {len(slots)}"
            )
        for sl, p in zip(slots, found):
            v = _in_column(strong, p, col)[0]
            used.add(p)
            values[sl.name] = typed_literal(sl, v.value)
            bindings.append(
                {
                    "parameter": sl.name,
                    "kind": "value",
                    "column": ".".join(col),
                    "value": v.value,
                    "phrase": p,
                    "how": v.how,
                    "default": sl.default,
                }
            )
    return None


def _bind_numbers(
    row: VerifiedRow,
    numbers: list[str],
    values: dict[str, exp.Literal],
    bindings: list[dict[str, Any]],
) -> str | None:
    """The question's numbers match the verified question's position by position; a
    parameter's position takes the new number (added to ``values`` and ``bindings``).
    Returns why not, or None."""
    expected = row.info.get("numbers", [])
    if len(numbers) != len(expected):
        return (
            f"the question writes {len(numbers)} number(s); the verified question {len(expected)}"
        )
    slots = {s.name: s for s in row.slots}
    for got, want in zip(numbers, expected):
        if want.startswith(":"):
            sl = slots[want[1:]]
            try:
                lit = typed_literal(sl, got)
            except CandidateRefused as e:
                return str(e)
            if sl.name in values and values[sl.name] != lit:
                return f"two numbers for :{sl.name}"
            values[sl.name] = lit
            bindings.append(
                {
                    "parameter": sl.name,
                    "kind": "number",
                    "column": ".".join(sl.column) if sl.column else None,
                    "value": got,
                    "default": sl.default,
                }
            )
        elif Decimal(got) != Decimal(want):
            return f"the question writes {got} where the verified question writes {want}"
    return None


def same_meaning(
    row: VerifiedRow,
    question: str,
    schema: Schema,
    skip: list[str],
    known_terms: list[tuple[int, str]],
    named: list[tuple[int, str]],
) -> str | None:
    """Check that a question names the same schema words, terms and meaning words as a verified
    question.

    Args:
        row: the verified query or template.
        question: the new question.
        schema: the schema the role may read.
        skip: the new question's phrases that are cell values or terms.
        known_terms: ``(id, term)`` of every term the role may see.
        named: ``(id, phrase)`` of the terms the new question names.

    Returns:
        Why they differ, or None when they agree.
    """
    vq = MARKER.sub(" ", row.question)
    v_named = named_terms(vq, known_terms)
    if {i for i, _ in v_named} != {i for i, _ in named}:
        return "the questions name different business terms"
    v_skip = list(row.info.get("value_phrases", [])) + [p for _, p in v_named]
    a, b = name_words(question, schema, skip), name_words(vq, schema, v_skip)
    if a != b:
        return f"the questions name different schema words ({', '.join(sorted(a ^ b))})"
    a, b = meaning_words(question), meaning_words(vq)
    if a != b:
        return f"the questions differ in {', '.join(sorted(a ^ b))}"
    return None


def same_other_words(
    row: VerifiedRow,
    question: str,
    schema: Schema,
    skip: list[str],
    known_terms: list[tuple[int, str]],
    bar: float,
) -> str | None:
    """Check that a question below ``verified_min_similarity`` is the verified question in other
    words: beside what ``same_meaning`` and ``bind`` compare, the two use the same words but
    ``LIGHT_WORDS`` ("live in" and "are there in" alike).

    Args:
        row: the verified query or template.
        question: the new question.
        schema: the schema the role may read.
        skip: the new question's phrases that are cell values or terms.
        known_terms: ``(id, term)`` of every term the role may see.
        bar: setting ``verified_min_similarity``.

    Returns:
        Why it is not, or None when it is.
    """
    vq = MARKER.sub(" ", row.question)
    v_skip = list(row.info.get("value_phrases", [])) + [p for _, p in named_terms(vq, known_terms)]
    a, b = other_words(question, schema, skip), other_words(vq, schema, v_skip)
    if a == b:
        return None
    return (
        f"similarity below verified_min_similarity {bar}, and the questions differ in "
        f"{', '.join(sorted(a ^ b))}"
    )


@dataclass
class FastPath:
    """The fast path's outcome: ``candidate``, ``row``, ``bound`` (None when none answered),
    ``considered``: ``{id, kind, similarity, reason}`` per row that did not answer, and
    ``matched``: ``similarity`` or ``other words`` (``same_other_words``), how the row matched."""

    candidate: Any = None
    row: VerifiedRow | None = None
    bound: Bound | None = None
    considered: list[dict[str, Any]] = field(default_factory=list)
    matched: str | None = None

    def trace(self) -> dict[str, Any]:
        """The trace's ``verified_query`` part.

        Returns:
            ``{id, kind, question, similarity, matched, bindings, considered}`` of the one that
            answered, else ``{"considered": [...]}``.
        """
        if self.row is None:
            return {"considered": self.considered}
        return {
            "id": self.row.id,
            "kind": self.row.kind,
            "question": self.row.question,
            "similarity": self.row.similarity,
            "matched": self.matched,
            "bindings": self.bound.bindings,
            "considered": self.considered,
        }


def fast_path(
    plpy,
    question: str,
    rows: list[VerifiedRow],
    values: list,
    schema: Schema,
    known_terms: list[tuple[int, str]],
    named: list[tuple[int, str]],
    st,
    search_path: str,
    keep_rows: bool = False,
) -> FastPath:
    """Answer a question from a verified query or template without a model call, if one fits.

    Args:
        question: the question as asked.
        rows: from ``verified.nearest``, most similar first.
        values: the question's matched cell values (exact and trigram).
        schema: the schema the role may read.
        known_terms: ``(id, term)`` of every term the role may see.
        named: ``(id, phrase)`` of the terms the question names.
        st: the settings (similarity and value thresholds, candidate limits).
        search_path: the caller's search_path text.
        keep_rows: keep the answering query's rows (``Candidate.rows``: nl2sql.ask).

    Returns:
        The ``FastPath``.

    Raises:
        plpy.SPIError: the user cancelled.
    """
    out = FastPath()
    strong = strong_values(values, schema, st.link_value_min)
    skip = list(strong) + [p for _, p in named]
    numbers = question_numbers(question, skip)
    bar = st.verified_min_similarity
    floor = bar - OTHER_WORDS_MARGIN if bar < 1 else bar
    for row in rows:
        seen = {"id": row.id, "kind": row.kind, "similarity": row.similarity}
        out.considered.append(seen)
        if row.similarity < floor:
            seen["reason"] = f"similarity below verified_min_similarity {bar}" + (
                f" less {OTHER_WORDS_MARGIN} (other words)" if floor < bar else ""
            )
            break
        seen["reason"] = same_meaning(row, question, schema, skip, known_terms, named)
        if not seen["reason"] and row.similarity < bar:
            seen["reason"] = same_other_words(row, question, schema, skip, known_terms, bar)
        if seen["reason"]:
            continue
        b = bind(row, question, strong, numbers)
        if b.sql is None:
            seen["reason"] = b.reason
            continue
        c, seen["reason"] = _run_bound(plpy, row, b.sql, schema, st, search_path, keep_rows)
        if seen["reason"]:
            continue
        out.considered.pop()
        out.candidate, out.row, out.bound = c, row, b
        out.matched = "similarity" if row.similarity >= bar else "other words"
        return out
    return out


def _run_bound(
    plpy, row: VerifiedRow, sql: str, schema: Schema, st, search_path: str, keep_rows: bool
) -> tuple[Candidate, str | None]:
    """Check and run a verified query's bound SQL as a candidate (``fast_path``'s last step).

    Returns:
        ``(candidate, None)`` when it ran, else ``(candidate, why not)``.
    """
    c = Candidate(source=f"verified:{row.id}", model="verified", raw_text=None, sql=sql)
    try:
        c.tables = referenced_tables(check_candidate_in_db(plpy, sql, schema))
    except CandidateRefused as e:
        return c, f"refused: {e}"
    run_candidate(
        plpy,
        c,
        search_path,
        st.candidate_timeout_ms,
        st.max_rows,
        max_bytes=st.max_result_bytes,
        keep_rows=keep_rows,
    )
    return c, (None if c.status == Status.OK else f"{c.status}: {c.reason}")
