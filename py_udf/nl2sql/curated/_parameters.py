"""Parameters of verified queries and templates: typed literals, never text spliced into SQL
(docs/internals/curated.md "Parameters")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from ..core.errors import CandidateRefused
from ..core.names import resolve
from ..core.sqlcheck import parse_one, to_sql
from ..core.types import Schema
from ..generation.alignment import resolve_column
from ._question_words import NUMBER, phrase_position

INTEGER_TYPES = frozenset({"smallint", "integer", "bigint", "int", "int2", "int4", "int8"})
NUMERIC_TYPES = INTEGER_TYPES | frozenset(
    {"numeric", "decimal", "real", "double precision", "float4", "float8"}
)
TEXT_TYPES = frozenset(
    {"text", "character varying", "character", "varchar", "char", "name", "citext", "bpchar"}
)
MARKER = re.compile(r"(?<![\w:]):([A-Za-z_][A-Za-z0-9_]*)")  # a template parameter, ``:name``
_CMP = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike)


@dataclass
class Slot:
    """One parameter: ``name`` (``v1``… or the template's), ``kind`` (``value`` or ``number``),
    ``column`` (None for LIMIT/OFFSET), ``data_type``, ``default`` (None for a template's)."""

    name: str
    kind: str
    column: list[str] | None
    data_type: str
    default: str | None = None


def quote_markers(question: str) -> str:
    """Replace a template question's markers (``:name``) by quoted spans, which mask.

    Args:
        question: the template's question.

    Returns:
        The question with each ``:name`` written ``'name'``.
    """
    return MARKER.sub(lambda m: f"'{m.group(1)}'", question)


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

    Args:
        tree: the parsed query; not changed.
        schema: the schema the role may read.

    Returns:
        ``(node, (schema, table, column) or None, data_type)`` per site, in tree order; the
        column is None for a LIMIT/OFFSET (type ``integer``) and for a column that does not
        resolve to exactly one schema column (type ``""``).
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

    Args:
        tree: the parsed verified SQL, changed in place.
        schema: the schema of the adding role.
        question: the verified question.
        strong: its strong values (``question_words.strong_values``).
        numbers: its numbers (``question_words.question_numbers``).

    Returns:
        ``(slots, constants, numbers)``: the parameters (value parameters in question order),
        the named values that are no parameter (per phrase, its ``[schema, table, column,
        value]`` matches), and ``numbers`` with each parameter's position as ``:name``.
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
        key=lambda s: phrase_position(question, named[(*s.column, s.default)]),
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
    shown = MARKER.findall(question)
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
        (m.start(), f":{m.group(1)}") for m in MARKER.finditer(question) if m.group(1) in numeric
    ]
    plain = MARKER.sub(" ", question)
    items += [(m.start(), m.group(0)) for m in NUMBER.finditer(plain)]
    return [t for _, t in sorted(items)]


def dummy_literal(slot: Slot) -> exp.Expression:
    """A literal of the slot's kind to check a template with (``''`` or ``0``).

    Args:
        slot: the parameter.

    Returns:
        ``exp.Literal.string("")`` for a value parameter, ``exp.Literal.number(0)`` otherwise.
    """
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
        A string literal for a value; a number literal of an integer (integer columns,
        LIMIT/OFFSET) or decimal otherwise.

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
