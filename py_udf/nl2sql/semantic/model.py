"""The semantic model as one question uses it: the objects and relationships the asking role may
see, the ones the question names, and what the prompts show of them (docs/semantic-model.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..core import spi
from ..core.errors import CandidateRefused
from ..core.sqlcheck import parse_shared
from ..core.types import ForeignKey, Schema
from ..curated.business import named_terms
from ..model import prompts
from ..model.gate import Gate
from ..model.prompts import ShownSQL

OBJECTS = (
    "SELECT o.id, o.kind, o.name, o.sql, o.description, o.synonyms, t.name AS logical_table, "
    "t.schema_name, t.table_name FROM nl2sql.visible_semantic_object o "
    "JOIN nl2sql.visible_semantic_table t ON t.id = o.table_id ORDER BY t.name, o.kind, o.name"
)
TABLES = (
    "SELECT id, name, schema_name, table_name, synonyms FROM nl2sql.visible_semantic_table "
    "ORDER BY name"
)
RELATIONSHIPS = (
    "SELECT name, left_table_id, right_table_id, left_columns, right_columns, join_type, "
    "relationship_type FROM nl2sql.visible_semantic_relationship ORDER BY name"
)
KIND_ORDER = {"metric": 0, "fact": 1, "dimension": 2, "time_dimension": 3, "filter": 4}


@dataclass
class SemanticObject:
    """A dimension, time dimension, fact, metric or filter the asking role may see."""

    id: int
    kind: str  # dimension | time_dimension | fact | metric | filter
    name: str
    table: str  # its table's prompt name
    sql: str  # the expression with columns qualified by prompt names (PostgreSQL)
    tables: list[str]  # prompt names of every table the expression names (``table`` first)
    description: str | None = None
    synonyms: list[str] = field(default_factory=list)


@dataclass
class NamedUse:
    """An object or logical table the question names: ``phrase`` is the question's words."""

    kind: str  # an object's kind, or ``table``
    name: str
    table: str  # prompt name of the table it links
    phrase: str


@dataclass
class SemanticModel:
    """The semantic model of one question, as the asking role may see it."""

    objects: list[SemanticObject] = field(default_factory=list)
    # prompt name -> (logical name, synonyms) of each logical table
    tables: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    # (name, foreign-key form) of each relationship between two of the role's tables
    relationships: list[tuple[str, ForeignKey]] = field(default_factory=list)
    named: list[NamedUse] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)  # ``kind table.name`` of objects shown
    relationships_shown: list[str] = field(default_factory=list)  # their names

    def name_in(self, question: str) -> list[NamedUse]:
        """Find the objects and logical tables ``question`` names by name or synonym (the name's
        words in order, the last singular or plural, as business terms are found).

        Args:
            question: the question as the prompts show it.

        Returns:
            The ``NamedUse`` list, also kept in ``named``: each object or table once.
        """
        entries: list[tuple[str, str, str]] = []  # (kind, name, table) per phrase
        phrases: list[tuple[int, str]] = []
        for o in self.objects:
            for p in [o.name, *o.synonyms]:
                phrases.append((len(entries), _words(p)))
                entries.append((o.kind, o.name, o.table))
        for table, (logical, synonyms) in self.tables.items():
            for p in [logical, *synonyms]:
                phrases.append((len(entries), _words(p)))
                entries.append(("table", logical, table))
        seen: set[tuple[str, str, str]] = set()
        self.named = []
        for i, phrase in named_terms(question, phrases):
            if entries[i] not in seen:
                seen.add(entries[i])
                self.named.append(NamedUse(*entries[i], phrase))
        return self.named

    def links(self) -> list[tuple[str, str]]:
        """The tables the named objects link, for schema linking.

        Returns:
            ``(table prompt name, reason)`` per named object or table, in ``named`` order.
        """
        return [(n.table, f"semantic {n.kind} {n.name} named ({n.phrase!r})") for n in self.named]

    def gated(self, gate: Gate, stage: str, tables: set[str] | None = None) -> dict[int, ShownSQL]:
        """Pass every object's expression through the gate's SQL path (``Gate.expression``):
        its literals replaced when it names a withheld column, every literal with
        ``send_values`` off.

        Args:
            gate: the call's gate.
            stage: the asking stage (``presql``, ``finsql``).
            tables: prompt names of the tables the prompt shows; None for every object.

        Returns:
            Object id -> the expression as it may be shown, for the objects of ``tables``.
        """
        return {
            o.id: gate.expression(stage, o.sql)
            for o in self.objects
            if tables is None or all(t in tables for t in o.tables)
        }

    def prompt_text(self, tables: set[str], shown_sql: dict[int, ShownSQL]) -> str:
        """Render the objects of ``tables`` for a prompt (``prompts.render_semantic``); record
        what was shown and which relationships join two of ``tables``.

        Args:
            tables: prompt names of the tables the prompt shows.
            shown_sql: ``gated``'s result for the prompt's stage.

        Returns:
            The text block, ``""`` when no object of these tables is known.
        """
        rows = []
        for o in sorted(self.objects, key=lambda o: (o.table, KIND_ORDER.get(o.kind, 9), o.name)):
            if o.id in shown_sql and all(t in tables for t in o.tables):
                rows.append(
                    (o.kind, o.table, o.name, shown_sql[o.id], o.description, list(o.synonyms))
                )
                _add(self.shown, f"{o.kind} {o.table}.{o.name}")
        for name, fk in self.relationships:
            if fk.table in tables and fk.ref_table in tables:
                _add(self.relationships_shown, name)
        return prompts.render_semantic(rows)

    def to_json(self) -> dict[str, Any]:
        """The trace's ``semantic_model``: names only (no expression).

        Returns:
            ``{"named": [{kind, name, table, phrase}], "shown": ["kind table.name"],
            "relationships": [names]}``.
        """
        return {
            "named": [n.__dict__ for n in self.named],
            "shown": list(self.shown),
            "relationships": list(self.relationships_shown),
        }


def load(plpy, schema: Schema) -> SemanticModel:
    """Read the semantic model the calling role may see over ``schema``'s tables; its
    relationships are added to ``schema.foreign_keys`` (a note says so), except where a
    declared foreign key already joins the same columns.

    Args:
        schema: the role's schema (``catalog.load_schema``), changed in place.

    Returns:
        The ``SemanticModel`` (empty when none is imported).
    """
    trows = spi.query(plpy, TABLES)
    if not trows:
        return SemanticModel()
    prompt = {(t.schema, t.table): t.name for t in schema.tables}
    sm = SemanticModel()
    by_id: dict[int, str] = {}
    for r in trows:
        p = prompt.get((r["schema_name"], r["table_name"]))
        if p is not None:
            by_id[r["id"]] = p
            sm.tables[p] = (r["name"], list(r["synonyms"] or []))
    for r in spi.query(plpy, OBJECTS):
        p = prompt.get((r["schema_name"], r["table_name"]))
        shown = _requalified(r["sql"], prompt) if p is not None else None
        if shown is None:
            continue
        sql, tables = shown
        sm.objects.append(
            SemanticObject(
                r["id"],
                r["kind"],
                r["name"],
                p,
                sql,
                [p] + [t for t in tables if t != p],
                r["description"],
                list(r["synonyms"] or []),
            )
        )
    _add_relationships(plpy, sm, schema, by_id)
    return sm


def _add_relationships(plpy, sm: SemanticModel, schema: Schema, by_id: dict[int, str]) -> None:
    """``load``'s relationships between the tables the role may see (``by_id``: logical table
    id → the prompt's table name): added to ``sm``, and to ``schema``'s foreign keys where the
    catalog declares none the same."""
    declared = {
        (fk.table, tuple(c.lower() for c in fk.columns), fk.ref_table) for fk in schema.foreign_keys
    }
    for r in spi.query(plpy, RELATIONSHIPS):
        left, right = by_id.get(r["left_table_id"]), by_id.get(r["right_table_id"])
        if left is None or right is None:
            continue
        cols = tuple(c.lower() for c in r["left_columns"])
        fk = ForeignKey(
            left,
            list(r["left_columns"]),
            right,
            list(r["right_columns"]),
            note=f"relationship {r['name']}, {r['relationship_type']}, {r['join_type']} join",
        )
        sm.relationships.append((r["name"], fk))
        if (left, cols, right) not in declared:
            schema.foreign_keys.append(fk)


def _requalified(sql: str, prompt: dict[tuple[str, str], str]) -> tuple[str, list[str]] | None:
    """``sql`` (columns qualified by ``schema.table``) with each qualifier replaced by the table's
    prompt name, and those names in order; None when a table is not in the role's schema. Both
    steps are cached per backend: a question reads every object of the model."""
    quals = _qualifiers(sql)
    if quals is None:
        return None
    names = tuple(prompt.get(q) for q in quals)
    if None in names:
        return None
    return _rendered(sql, quals, names), list(dict.fromkeys(names))


@lru_cache(maxsize=8192)
def _qualifiers(sql: str) -> tuple[tuple[str, str], ...] | None:
    """The ``(schema, table)`` qualifiers of ``sql``'s columns, each once in order; None when
    it does not parse."""
    tree = _expression(sql)
    if tree is None:
        return None
    return tuple(dict.fromkeys((c.db, c.table) for c in tree.find_all(exp.Column) if c.table))


@lru_cache(maxsize=8192)
def _rendered(sql: str, quals: tuple[tuple[str, str], ...], names: tuple[str, ...]) -> str:
    """``sql`` with the qualifiers ``quals`` replaced by the prompt names ``names``."""
    tree = _expression(sql).copy()  # the parse is shared
    by = dict(zip(quals, names))
    for col in list(tree.find_all(exp.Column)):
        if col.table:
            ref = exp.to_table(by[(col.db, col.table)])
            col.set("db", ref.args.get("db"))
            col.set("table", ref.args.get("this"))
    return tree.sql(dialect="postgres")


def _expression(sql: str) -> exp.Expression | None:
    try:
        return parse_shared(f"SELECT {sql}").expressions[0]
    except (CandidateRefused, SqlglotError, RecursionError, IndexError):
        return None


def _words(name: str) -> str:
    """A model name as words: ``total_revenue`` -> ``total revenue``."""
    return " ".join(str(name).replace("_", " ").split())


def _add(items: list, item) -> None:
    if item not in items:
        items.append(item)
