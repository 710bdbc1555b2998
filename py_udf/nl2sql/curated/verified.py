"""Verified queries and templates: curated answers that a matching question gets without any
model call (the fast path), and the first few-shot examples otherwise.

A **verified query** (``nl2sql.add_verified_query``, or ``nl2sql.feedback(log_id, true)``) is a
question/SQL pair a person checked. Its SQL's literals that the question names become its
parameters: a string literal compared with a column (``=``, ``<>``, ``<``, ``>``, ``IN``,
``BETWEEN``, ``LIKE``) that is a cell value the question names (found in the value index), and a
number literal (compared with a numeric column, or a LIMIT/OFFSET) that the question writes. A
**template** (``nl2sql.add_template``) is SQL with named parameters ``:name`` compared with a
column (or a LIMIT/OFFSET), its question showing each parameter as ``:name``: a parameter of a
text column takes a cell value the new question names, one of a numeric column a number it
writes.

A new question is answered from one when (each rule refuses what the masked question's
embedding cannot tell apart):

1. its masked question is at least ``verified_min_similarity`` similar (cosine,
   all-MiniLM-L6-v2) to the verified question's;
2. it names the same schema words (tables and columns, singular or plural: masked in both), the
   same business terms, and the same words of ``MEANING_WORDS`` (negation, comparison, order,
   aggregation: "older" and "younger" masked questions are 0.875 similar);
3. its cell values bind: every value it names (exact, or a match scoring at least
   ``link_value_min``) fills a parameter of that value's column, in question order, or is a value
   the verified question names too; every number it writes fills a number parameter at the same
   position or equals the verified question's number there; nothing is left over and no
   parameter stays empty;
4. the question was not rewritten for relative time ("this month" means another month tomorrow);
5. the bound SQL passes the full candidate check and runs read-only under the time limit as the
   asking role, like any candidate.

Parameters are bound as sqlglot literal nodes of the column's type (a string literal of the
column's indexed cell value; an integer or decimal literal checked against the column's type),
never spliced as text. The trace's ``verified_query`` says which (id, similarity, bindings).

Source: verified queries, query templates and trusted assets of in-database text-to-SQL
products; ReBoost (Sui et al. 2023) Text-to-Function (a question mapped to a parameterised
function); masked-question similarity of DAIL-SQL (Gao et al. 2023) §3.3.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

from sqlglot import exp

from ..core import spi
from ..core.errors import CandidateRefused, QuestionError
from ..core.names import resolve
from ..core.sqlcheck import parse_one, to_sql
from ..core.types import Example, Schema
from ..generation.alignment import resolve_column
from ..retrieval.linking import linking_values, schema_words
from ..retrieval.masking import STOP_WORDS, inflections, masked_question, tokenize

INTEGER_TYPES = frozenset({"smallint", "integer", "bigint", "int", "int2", "int4", "int8"})
NUMERIC_TYPES = INTEGER_TYPES | frozenset(
    {"numeric", "decimal", "real", "double precision", "float4", "float8"}
)
TEXT_TYPES = frozenset(
    {"text", "character varying", "character", "varchar", "char", "name", "citext", "bpchar"}
)
# Words that change what a question asks but weigh little in the embedding of its masked form;
# a question and a verified question must use the same ones ("not" is also found in "n't").
MEANING_WORDS = frozenset(
    {
        "not",
        "no",
        "never",
        "without",
        "except",
        "excluding",
        "exclude",
        "none",
        "neither",
        "nor",
        "more",
        "less",
        "fewer",
        "greater",
        "smaller",
        "higher",
        "lower",
        "larger",
        "bigger",
        "older",
        "younger",
        "newer",
        "earlier",
        "later",
        "before",
        "after",
        "above",
        "below",
        "over",
        "under",
        "between",
        "most",
        "least",
        "highest",
        "lowest",
        "largest",
        "smallest",
        "biggest",
        "oldest",
        "youngest",
        "newest",
        "latest",
        "earliest",
        "first",
        "last",
        "top",
        "bottom",
        "max",
        "min",
        "maximum",
        "minimum",
        "average",
        "avg",
        "mean",
        "median",
        "total",
        "sum",
        "count",
        "distinct",
        "unique",
        "different",
        "each",
        "per",
        "every",
        "ascending",
        "descending",
        "percentage",
        "percent",
        "ratio",
        "proportion",
        "share",
    }
)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")
_MARKER = re.compile(r"(?<![\w:]):([A-Za-z_][A-Za-z0-9_]*)")
_CMP = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike)


@dataclass
class Slot:
    """One parameter of a verified query or template.

    Attributes:
        name: its placeholder name in ``template_sql`` (``v1``… for a query's, the template's own).
        kind: ``value`` (a cell value of a text column) or ``number``.
        column: ``[schema, table, column]`` it is compared with; None for a LIMIT/OFFSET.
        data_type: the column's type (``integer`` for a LIMIT/OFFSET).
        default: the literal the verified query had, as text; None for a template's.
    """

    name: str
    kind: str
    column: list[str] | None
    data_type: str
    default: str | None = None


@dataclass
class VerifiedRow:
    """A verified query or template as the fast path reads it.

    Attributes:
        id: its id in ``nl2sql.verified_query``.
        kind: ``query`` or ``template``.
        question: the verified question (a template's with ``:name`` markers).
        sql: the SQL as added.
        template_sql: the SQL with every parameter a named placeholder.
        slots: its parameters, value parameters in the order the question names them.
        info: ``value_phrases`` (the verified question's named cell values' phrases),
            ``constants`` (per value it names that is no parameter, the phrase's ``[schema,
            table, column, value]`` matches)
            and ``numbers`` (its numbers in order, a number parameter's position as ``:name``).
        masked_question: the verified question masked.
        similarity: cosine similarity of its masked question with the asked one's (4 places).
    """

    id: int
    kind: str
    question: str
    sql: str
    template_sql: str
    slots: list[Slot]
    info: dict[str, Any]
    masked_question: str
    similarity: float


@dataclass
class Bound:
    """The outcome of binding a question to a verified query.

    Attributes:
        sql: the SQL with every parameter bound, or None.
        bindings: ``{parameter, kind, column, value, phrase}`` per bound parameter.
        reason: why it did not bind, or None.
    """

    sql: str | None
    bindings: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None


# --------------------------------------------------------------------------------------------
# reading a question
# --------------------------------------------------------------------------------------------


def strong_values(values: list, schema: Schema, value_min: float) -> dict[str, list]:
    """The question's cell values that bind: those that would link their column.

    ``linking.linking_values`` (exact, or a score ≥ ``value_min``; not a phrase made only of
    schema words; not inside a longer exact phrase), of the question only (not the evidence).

    Args:
        values: ``retrieval.ValueMatch`` list of the question.
        schema: the schema the role may read.
        value_min: setting ``link_value_min``.

    Returns:
        phrase -> its matches (best first), phrases in the order of ``values``.
    """
    out: dict[str, list] = {}
    for v in linking_values(schema, values, value_min):
        if v.source in ("question", "quoted"):
            out.setdefault(v.phrase, []).append(v)
    return out


def _without(text: str, phrases: list[str]) -> str:
    for p in sorted(phrases, key=len, reverse=True):
        if p:
            text = re.sub(re.escape(p), " ", text, flags=re.IGNORECASE)
    return text


def question_numbers(question: str, skip: list[str]) -> list[str]:
    """The numbers a question writes, in order, outside the phrases ``skip`` (cell values and
    terms, which may hold digits).

    Args:
        question: the question (natural language; template markers already replaced).
        skip: phrases to leave out.

    Returns:
        Number texts (``40``, ``4.5``), in order.
    """
    return _NUMBER.findall(_without(question, skip))


def name_words(question: str, schema: Schema, skip: list[str]) -> set[str]:
    """The schema words a question names outside ``skip`` (each as its shortest form).

    Args:
        question: the question.
        schema: the schema the role may read.
        skip: phrases to leave out (cell values, terms, template markers).

    Returns:
        Lower-cased schema words (``masking.inflections`` of a question word that are words of a
        table or column name), stop words excluded.
    """
    words = schema_words(schema)
    out: set[str] = set()
    for t in tokenize(_without(question, skip)):
        low = t.lower()
        if not low[0].isalnum() or low in STOP_WORDS:
            continue
        forms = inflections(low) & words
        if forms:
            out.add(min(forms, key=lambda f: (len(f), f)))
    return out


def meaning_words(question: str) -> set[str]:
    """The words of ``MEANING_WORDS`` a question uses (``n't`` counts as ``not``).

    Args:
        question: the question.

    Returns:
        The words, lower-cased.
    """
    out = set()
    for t in tokenize(question):
        low = t.lower()
        if low.endswith("n't"):
            out.add("not")
        elif low in MEANING_WORDS:
            out.add(low)
    return out


def _markers_out(question: str) -> str:
    """The question with template markers (``:name``) replaced by a quoted span (masked)."""
    return _MARKER.sub(lambda m: f"'{m.group(1)}'", question)


def _position(question: str, phrase: str) -> int:
    i = question.lower().find(phrase.lower())
    return i if i >= 0 else len(question)


# --------------------------------------------------------------------------------------------
# parameters of a query
# --------------------------------------------------------------------------------------------


def _base_type(data_type: str) -> str:
    return data_type.split("(")[0].strip().lower()


def _column_type(schema: Schema, col: tuple[str, str, str]) -> str:
    for t in schema.tables:
        if (t.schema, t.table) == col[:2]:
            for c in t.columns:
                if c.name == col[2]:
                    return c.data_type
    return "text"


def parameter_sites(
    tree: exp.Expression, schema: Schema
) -> list[tuple[exp.Expression, tuple | None, str]]:
    """The literals and placeholders of a query that can be parameters, with their column.

    A site is a literal or placeholder compared with a column (``=``, ``<>``, ``<``, ``<=``,
    ``>``, ``>=``, ``LIKE``, ``ILIKE``, an ``IN`` list element, a ``BETWEEN`` bound; the column
    resolved with ``names.resolve`` and the schema), or the count of a ``LIMIT``/``OFFSET``.

    Args:
        tree: the parsed query; not changed.
        schema: the schema the role may read.

    Returns:
        ``(node, (schema, table, column) or None, data_type)`` per site, in tree order; the
        column is None (type ``integer``) for a LIMIT/OFFSET, and for a comparison whose
        column does not resolve to exactly one schema column (type ``""``).
    """
    names = resolve(tree)
    lookup: dict[str, Any] = {t.name.lower(): t for t in schema.tables}
    lookup.update({f"{t.schema}.{t.table}".lower(): t for t in schema.tables})
    out = []
    for node in tree.find_all(exp.Literal, exp.Placeholder):
        parent, col = node.parent, None
        if isinstance(parent, (exp.Limit, exp.Offset)) and parent.expression is node:
            out.append((node, None, "integer"))
            continue
        if isinstance(parent, _CMP):
            other = parent.expression if parent.this is node else parent.this
            col = other if isinstance(other, exp.Column) else None
        elif (
            isinstance(parent, exp.In)
            and any(e is node for e in parent.expressions)
            or isinstance(parent, exp.Between)
            and parent.this is not node
        ):
            col = parent.this if isinstance(parent.this, exp.Column) else None
        if col is None:
            continue
        where = resolve_column(col, names, lookup)
        out.append((node, where, _column_type(schema, where) if where else ""))
    return out


def _is_number(text: str) -> bool:
    try:
        Decimal(text)
        return True
    except (InvalidOperation, ValueError):
        return False


def query_slots(
    tree: exp.Expression, schema: Schema, question: str, strong: dict[str, list], numbers: list[str]
) -> tuple[list[Slot], list[list[str]], list[str]]:
    """Turn a verified query's literals that its question names into parameters, in place.

    A string literal compared with a text column is a parameter when the question names that
    cell value of that column (``strong``); a number literal compared with a numeric column (or
    a LIMIT/OFFSET) when the question writes that number. Each becomes a placeholder ``:v<i>``
    in ``tree`` (the same column and literal, or the same number, share one).

    Args:
        tree: the parsed verified SQL, changed in place.
        schema: the schema of the adding role.
        question: the verified question.
        strong: its strong values (``strong_values``).
        numbers: its numbers (``question_numbers``).

    Returns:
        ``(slots, constants, numbers)``: the parameters (value parameters in the order the
        question names them), the named values that are no parameter (per phrase, its
        ``[schema, table, column, value]`` matches), and ``numbers`` with each parameter's
        position as ``:name``.
    """
    named = {(v.schema, v.table, v.column, v.value): p for p, vs in strong.items() for v in vs}
    slots: dict[tuple, Slot] = {}
    by_number: dict[int, str] = {}
    for node, col, dtype in parameter_sites(tree, schema):
        if not isinstance(node, exp.Literal):
            continue
        base = _base_type(dtype)
        if node.is_string and col and base in TEXT_TYPES and (*col, node.this) in named:
            key = ("value", *col, node.this)
            kind = "value"
        elif (
            not node.is_string
            and base in NUMERIC_TYPES
            and _is_number(node.this)
            and any(Decimal(n) == Decimal(node.this) for n in numbers)
        ):
            i = next(i for i, n in enumerate(numbers) if Decimal(n) == Decimal(node.this))
            key = ("number", i)
            kind = "number"
        else:
            continue
        if key not in slots:
            slots[key] = Slot(
                f"v{len(slots) + 1}", kind, list(col) if col else None, dtype, node.this
            )
            if kind == "number":
                by_number[key[1]] = slots[key].name
        node.replace(exp.Placeholder(this=slots[key].name))
    values = sorted(
        (s for s in slots.values() if s.kind == "value"),
        key=lambda s: _position(question, named[(*s.column, s.default)]),
    )
    consumed = {named[(*s.column, s.default)] for s in values}
    constants = [
        [[v.schema, v.table, v.column, v.value] for v in vs]
        for p, vs in strong.items()
        if p not in consumed
    ]
    marked = [f":{by_number[i]}" if i in by_number else n for i, n in enumerate(numbers)]
    return values + [s for s in slots.values() if s.kind == "number"], constants, marked


def template_slots(tree: exp.Expression, schema: Schema, question: str) -> list[Slot]:
    """Read a template's named parameters (``:name``) and their columns' types.

    Args:
        tree: the parsed template SQL.
        schema: the schema of the adding role.
        question: the template's question, showing each parameter as ``:name``.

    Returns:
        The parameters, value parameters in the order the question shows them.

    Raises:
        CandidateRefused: a parameter is not compared with a column (or a LIMIT/OFFSET), its
            column is not of a text or numeric type, two uses disagree, or the question does
            not show each parameter exactly as the SQL names it.
    """
    sites = {id(n): (c, t) for n, c, t in parameter_sites(tree, schema)}
    slots: dict[str, Slot] = {}
    for ph in tree.find_all(exp.Placeholder):
        name = ph.name
        if not name:
            raise CandidateRefused("parameters are named, e.g. :country (not ? or $1)")
        if id(ph) not in sites or (sites[id(ph)][0] is None and sites[id(ph)][1] != "integer"):
            raise CandidateRefused(
                f"parameter :{name} must be compared with a column (=, <>, <, >, IN, BETWEEN, "
                f"LIKE) or be a LIMIT/OFFSET count"
            )
        col, dtype = sites[id(ph)]
        base = _base_type(dtype)
        kind = "value" if base in TEXT_TYPES else "number" if base in NUMERIC_TYPES else None
        if kind is None:
            raise CandidateRefused(
                f"parameter :{name} is compared with {'.'.join(col)} of type "
                f"{dtype}: only text and numeric columns take parameters"
            )
        slot = Slot(name, kind, list(col) if col else None, dtype)
        if name in slots and (slots[name].kind, slots[name].column) != (kind, slot.column):
            raise CandidateRefused(f"parameter :{name} is used with two different columns")
        slots.setdefault(name, slot)
    if not slots:
        raise CandidateRefused(
            "a template has named parameters, e.g. WHERE country = :country; "
            "use nl2sql.add_verified_query for SQL without parameters"
        )
    shown = _MARKER.findall(question)
    missing = [n for n in slots if n not in shown]
    extra = sorted(set(shown) - set(slots))
    if missing or extra:
        raise CandidateRefused(
            "the question must show each parameter as :name"
            + (f"; missing {', '.join(':' + n for n in missing)}" if missing else "")
            + (f"; not in the SQL {', '.join(':' + n for n in extra)}" if extra else "")
        )
    order = {n: i for i, n in enumerate(shown)}
    return sorted(slots.values(), key=lambda s: (s.kind != "value", order[s.name]))


def template_numbers(question: str, slots: list[Slot]) -> list[str]:
    """A template question's numbers and number parameters (``:name``), in order.

    Args:
        question: the template's question with ``:name`` markers.
        slots: its parameters.

    Returns:
        Number texts and ``:name`` items, in order of position.
    """
    numeric = {s.name for s in slots if s.kind == "number"}
    items = [
        (m.start(), f":{m.group(1)}") for m in _MARKER.finditer(question) if m.group(1) in numeric
    ]
    plain = _MARKER.sub(" ", question)
    items += [(m.start(), m.group(0)) for m in _NUMBER.finditer(plain)]
    return [t for _, t in sorted(items)]


def _dummy(slot: Slot) -> exp.Expression:
    return exp.Literal.string("") if slot.kind == "value" else exp.Literal.number(0)


def fill(template_sql: str, slots: list[Slot], values: dict[str, Any]) -> str:
    """Put typed literal nodes in place of a template's placeholders (never text splicing).

    Args:
        template_sql: SQL with named placeholders.
        slots: the parameters.
        values: parameter name -> the typed literal node (``exp.Literal``) to put there.

    Returns:
        The SQL text (PostgreSQL).

    Raises:
        CandidateRefused: a placeholder has no value or is not a parameter.
    """
    tree = parse_one(template_sql)
    known = {s.name for s in slots}
    for ph in list(tree.find_all(exp.Placeholder)):
        if ph.name not in known or ph.name not in values:
            raise CandidateRefused(f"parameter :{ph.name} has no value")
        ph.replace(values[ph.name].copy())
    return to_sql(tree)


def typed_literal(slot: Slot, text: str) -> exp.Literal:
    """A literal node of the slot's type for a bound text.

    Args:
        slot: the parameter.
        text: the cell value (value parameters) or the number as written (number parameters).

    Returns:
        ``exp.Literal.string`` for a value; ``exp.Literal.number`` of an integer (integer
        columns, LIMIT/OFFSET) or decimal otherwise.

    Raises:
        CandidateRefused: the number is not a number of the column's type.
    """
    if slot.kind == "value":
        return exp.Literal.string(text)
    try:
        d = Decimal(text)
    except (InvalidOperation, ValueError):
        raise CandidateRefused(f"{text!r} is not a number for :{slot.name}") from None
    if _base_type(slot.data_type) in INTEGER_TYPES:
        if d != d.to_integral_value():
            raise CandidateRefused(f"{text} is not an integer for :{slot.name} ({slot.data_type})")
        return exp.Literal.number(int(d))
    return exp.Literal.number(str(d))


# --------------------------------------------------------------------------------------------
# binding a new question
# --------------------------------------------------------------------------------------------


def bind(row: VerifiedRow, question: str, strong: dict[str, list], numbers: list[str]) -> Bound:
    """Bind a new question's cell values and numbers to a verified query's parameters.

    Rules (module docstring, 3): the verified question's other named values (``constants``)
    must be named again; each value parameter takes, per column in question order, a value the
    question names in that column; no named value is left over; the numbers match the verified
    question's position by position (a parameter's position takes the new number).

    Args:
        row: the verified query or template.
        question: the new question.
        strong: its strong values (``strong_values``), phrase -> matches best first.
        numbers: its numbers (``question_numbers``).

    Returns:
        ``Bound`` with the SQL and the bindings, or the reason it does not bind.
    """
    phrases = sorted(strong, key=lambda p: _position(question, p))
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
    """Check rule 2 of the module docstring: the same schema words, terms and meaning words.

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
    from .business import named_terms

    vq = _MARKER.sub(" ", row.question)
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


# --------------------------------------------------------------------------------------------
# the database side
# --------------------------------------------------------------------------------------------


def nearest(plpy, masked_vec: str, n: int) -> list[VerifiedRow]:
    """The verified queries and templates the role may use, nearest by masked question.

    Read through view ``nl2sql.visible_verified_query`` (only those whose every relation the
    calling role may SELECT).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        masked_vec: the asked question's masked-question embedding (pgvector text).
        n: how many at most.

    Returns:
        ``VerifiedRow`` list, most similar first.
    """
    if n <= 0:
        return []
    rows = spi.query(
        plpy,
        "SELECT id, kind, question, sql, template_sql, parameters::text AS p, "
        "question_info::text AS i, masked_question, "
        "1 - (embedding <=> $1::vector) AS sim "
        "FROM nl2sql.visible_verified_query ORDER BY embedding <=> $1::vector "
        "LIMIT $2",
        [masked_vec, n],
        ["text", "int4"],
    )
    return [
        VerifiedRow(
            r["id"],
            r["kind"],
            r["question"],
            r["sql"],
            r["template_sql"],
            [Slot(**s) for s in json.loads(r["p"])],
            json.loads(r["i"]),
            r["masked_question"],
            round(float(r["sim"]), 4),
        )
        for r in rows
    ]


def as_examples(rows: list[VerifiedRow], k: int) -> list[Example]:
    """The verified queries (not templates) among ``rows`` as few-shot examples.

    Args:
        rows: from ``nearest``, most similar first.
        k: how many at most.

    Returns:
        ``Example`` list (``db_id`` ``verified``), most similar first.
    """
    return [
        Example(
            id=r.id,
            db_id="verified",
            question=r.question,
            sql=r.sql,
            masked_question=r.masked_question,
            similarity=r.similarity,
        )
        for r in rows
        if r.kind == "query"
    ][:k]


def question_values(plpy, question: str, st) -> list:
    """The cell values a question names, as ``nl2sql()`` finds them before the PreSQL call.

    Exact and trigram matches of the question's phrases (``retrieval``), merged and cut to
    ``value_top_k``, as the calling role may see them.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        question: the question.
        st: the settings (``value_trgm_min``, ``value_top_k``).

    Returns:
        ``retrieval.ValueMatch`` list, best first.
    """
    from ..retrieval.values import candidate_phrases, merge_matches, string_matches

    phrases = candidate_phrases(question)
    return merge_matches(string_matches(plpy, phrases, st.value_trgm_min), st.value_top_k)


def add_verified(
    plpy,
    question: str,
    sql: str,
    kind: str = "query",
    dialect: str = "postgres",
    source: str = "user",
) -> int:
    """Add (or update) a verified query or a template: backs ``nl2sql.add_verified_query`` and
    ``nl2sql.add_template``.

    The SQL must pass the full candidate check as the adding role (a template's with typed
    dummies in place of its parameters). A query's bindable literals become parameters
    (``query_slots``); a template's ``:name`` parameters are typed by their columns
    (``template_slots``). The question is masked as ``nl2sql()`` masks a question (schema
    names, named cell values, named terms; a template's markers) and embedded; the relations
    read are recorded so that only roles that may read them all see it.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        question: the verified question (a template's showing each parameter as ``:name``).
        sql: the SQL (a template's with ``:name`` parameters).
        kind: ``query`` or ``template``.
        dialect: the sqlglot dialect of a query's SQL (transpiled to PostgreSQL).
        source: ``user`` or ``feedback``.

    Returns:
        The id in ``nl2sql.verified_query``.

    Raises:
        CandidateRefused: the SQL does not parse, is not one read-only query over relations the
            caller may read, or a template's parameters are wrong; the message says which.
        QuestionError: the question is empty.
        NotIndexedError: nothing is indexed.
        EmbeddingError: the embedding model is missing.
    """
    from ..core.catalog import caller_schema
    from ..core.settings import get_settings
    from ..generation.safety import check_candidate_in_db, relation_targets

    question = (question or "").strip()
    if not question:
        raise QuestionError("the question is empty")
    st = get_settings(plpy)
    schema = caller_schema(plpy)
    plain = _markers_out(question) if kind == "template" else question
    named = _named_in(plpy, question, schema, st)
    if kind == "template":
        stored = _template_to_store(sql, schema, question, named)
    else:
        stored = _query_to_store(plpy, sql, dialect, schema, question, named)
    checked = check_candidate_in_db(
        plpy,
        fill(stored.template_sql, stored.slots, {s.name: _dummy(s) for s in stored.slots}),
        schema,
    )
    masked = masked_question(plain, schema, named.values, st.link_value_min, named.term_phrases)
    vid = _upsert_verified(plpy, kind, question, stored, named, masked, source)
    _record_relations(plpy, vid, relation_targets(checked, schema))
    return vid


class _Named(NamedTuple):
    """What a verified question names: its cell values, the strong ones by phrase
    (``strong_values``) and its named terms as ``(term id, phrase)``."""

    values: list
    strong: dict[str, list]
    terms: list[tuple]

    @property
    def term_phrases(self) -> list[str]:
        """The phrases of the named terms."""
        return [p for _, p in self.terms]


@dataclass
class _ToStore:
    """A verified query's or template's SQL as stored, with its parameters and the question's
    constants and numbers (``question_info``)."""

    sql: str  # a template's as given; a query's as PostgreSQL
    template_sql: str  # with ``:name`` parameters
    slots: list[Slot]
    constants: list
    numbers: list[str]


def _named_in(plpy, question: str, schema: Schema, st) -> _Named:
    """The cell values and terms a verified question names (template markers left out)."""
    from .business import named_terms

    values = question_values(plpy, _MARKER.sub(" ", question), st)
    strong = strong_values(values, schema, st.link_value_min)
    terms = named_terms(
        _MARKER.sub(" ", question),
        [(r["id"], r["term"]) for r in spi.query(plpy, "SELECT id, term FROM nl2sql.visible_term")],
    )
    return _Named(values, strong, terms)


def _template_to_store(sql: str, schema: Schema, question: str, named: _Named) -> _ToStore:
    """A template as stored: its ``:name`` parameters typed by their columns."""
    tree = parse_one(sql)
    slots = template_slots(tree, schema, question)
    constants = [
        [[v.schema, v.table, v.column, v.value] for v in vs] for vs in named.strong.values()
    ]
    numbers = template_numbers(question, slots)
    return _ToStore(sql.strip(), to_sql(tree), slots, constants, numbers)


def _query_to_store(
    plpy, sql: str, dialect: str, schema: Schema, question: str, named: _Named
) -> _ToStore:
    """A verified query as stored: transpiled to PostgreSQL, checked as the adding role, its
    bindable literals made parameters (``query_slots``)."""
    from ..core.sqlcheck import transpile
    from ..generation.safety import check_candidate_in_db

    stored = sql if dialect == "postgres" else transpile(sql, dialect)
    tree = parse_one(stored)
    if tree.find(exp.Placeholder):
        raise CandidateRefused("the SQL has parameters: add it with nl2sql.add_template")
    check_candidate_in_db(plpy, stored, schema)
    numbers = question_numbers(question, list(named.strong) + named.term_phrases)
    slots, constants, numbers = query_slots(tree, schema, question, named.strong, numbers)
    return _ToStore(stored, to_sql(tree), slots, constants, numbers)


def _upsert_verified(
    plpy, kind: str, question: str, stored: _ToStore, named: _Named, masked: str, source: str
) -> int:
    """Embed the masked question and insert or update the ``nl2sql.verified_query`` row;
    returns its id."""
    from ..embedding.encode import embed, to_pgvector

    vec = to_pgvector(embed([masked])[0])
    info = {
        "value_phrases": list(named.strong),
        "constants": stored.constants,
        "numbers": stored.numbers,
    }
    return spi.query(
        plpy,
        "INSERT INTO nl2sql.verified_query AS v (kind, question, sql, template_sql, "
        "parameters, question_info, masked_question, embedding, source) VALUES ($1, $2, $3, $4, "
        "$5::jsonb, $6::jsonb, $7, $8::vector, $9) ON CONFLICT (kind, question, sql) DO UPDATE "
        "SET template_sql = EXCLUDED.template_sql, parameters = EXCLUDED.parameters, "
        "question_info = EXCLUDED.question_info, masked_question = EXCLUDED.masked_question, "
        "embedding = EXCLUDED.embedding, source = EXCLUDED.source, added_at = now() "
        "RETURNING v.id",
        [
            kind,
            question,
            stored.sql,
            stored.template_sql,
            json.dumps([asdict(s) for s in stored.slots]),
            json.dumps(info),
            masked,
            vec,
            source,
        ],
        ["text", "text", "text", "text", "text", "text", "text", "text", "text"],
    )[0]["id"]


def _record_relations(plpy, vid: int, targets) -> None:
    """Make the relations recorded for verified query ``vid`` equal ``targets``
    ((schema, table) pairs; only roles that may read them all see it)."""
    spi.query(
        plpy, "DELETE FROM nl2sql.verified_query_relation WHERE query_id = $1", [vid], ["int8"]
    )
    for s, t in sorted(set(targets)):
        spi.query(
            plpy,
            "INSERT INTO nl2sql.verified_query_relation (query_id, schema_name, "
            "table_name) VALUES ($1, $2, $3)",
            [vid, s, t],
            ["int8", "name", "name"],
        )


@dataclass
class FastPath:
    """The fast path's outcome for one question.

    Attributes:
        candidate: the executed candidate (status ``ok``) when a verified query answered, else
            None.
        row: the verified query or template that answered, else None.
        bound: its binding, else None.
        considered: per verified query looked at, ``{id, kind, similarity, reason}`` saying
            why it did not answer.
    """

    candidate: Any = None
    row: VerifiedRow | None = None
    bound: Bound | None = None
    considered: list[dict[str, Any]] = field(default_factory=list)

    def trace(self) -> dict[str, Any]:
        """The trace's ``verified_query`` part.

        Returns:
            ``{id, kind, question, similarity, bindings}`` of the one that answered, else
            ``{"considered": [...]}``.
        """
        if self.row is None:
            return {"considered": self.considered}
        return {
            "id": self.row.id,
            "kind": self.row.kind,
            "question": self.row.question,
            "similarity": self.row.similarity,
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
) -> FastPath:
    """Answer a question from a verified query or template without a model call, if one fits.

    The rows at least ``verified_min_similarity`` similar are tried, most similar first: the
    same meaning (``same_meaning``), then binding (``bind``), then the full candidate check
    and read-only, time-limited execution as the calling role (``safety``, ``execute``); the
    first that executes answers.

    Source: verified queries / query templates of in-database text-to-SQL products; ReBoost
    (Sui et al. 2023) Text-to-Function.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        question: the question as asked.
        rows: from ``nearest``, most similar first.
        values: the question's matched cell values (exact and trigram).
        schema: the schema the role may read.
        known_terms: ``(id, term)`` of every term the role may see.
        named: ``(id, phrase)`` of the terms the question names.
        st: the settings (``verified_min_similarity``, ``link_value_min``,
            ``candidate_timeout_ms``, ``max_rows``, ``max_result_bytes``).
        search_path: the caller's search_path text.

    Returns:
        The ``FastPath``.

    Raises:
        plpy.SPIError: the user cancelled.
    """
    from ..core.sqlcheck import referenced_tables
    from ..core.types import Candidate, Status
    from ..generation.execute import run_candidate
    from ..generation.safety import check_candidate_in_db

    out = FastPath()
    strong = strong_values(values, schema, st.link_value_min)
    skip = list(strong) + [p for _, p in named]
    numbers = question_numbers(question, skip)
    for row in rows:
        seen = {"id": row.id, "kind": row.kind, "similarity": row.similarity}
        out.considered.append(seen)
        if row.similarity < st.verified_min_similarity:
            seen["reason"] = (
                f"similarity below verified_min_similarity {st.verified_min_similarity}"
            )
            break
        seen["reason"] = same_meaning(row, question, schema, skip, known_terms, named)
        if seen["reason"]:
            continue
        b = bind(row, question, strong, numbers)
        if b.sql is None:
            seen["reason"] = b.reason
            continue
        c = Candidate(source=f"verified:{row.id}", model="verified", raw_text=None, sql=b.sql)
        try:
            c.tables = referenced_tables(check_candidate_in_db(plpy, b.sql, schema))
        except CandidateRefused as e:
            seen["reason"] = f"refused: {e}"
            continue
        run_candidate(
            plpy,
            c,
            search_path,
            st.candidate_timeout_ms,
            st.max_rows,
            max_bytes=st.max_result_bytes,
        )
        if c.status != Status.OK:
            seen["reason"] = f"{c.status}: {c.reason}"
            continue
        out.considered.pop()
        out.candidate, out.row, out.bound = c, row, b
        return out
    return out


def refresh_for_term(plpy, term: str) -> int:
    """Mask and embed again the verified questions that name a term (added or removed): a
    question masks the terms it names, so theirs must be masked the same way.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        term: the term.

    Returns:
        How many verified queries and templates were refreshed (those whose SQL no longer
        passes the check are left as they are).

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    from .business import named_terms

    n = 0
    for r in spi.query(
        plpy, "SELECT kind, question, sql, source FROM nl2sql.verified_query ORDER BY id"
    ):
        if named_terms(_MARKER.sub(" ", r["question"]), [(0, term)]):
            try:
                add_verified(plpy, r["question"], r["sql"], r["kind"], source=r["source"])
                n += 1
            except (CandidateRefused, ValueError):
                continue
    return n
