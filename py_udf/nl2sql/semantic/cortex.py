"""Snowflake Cortex Analyst semantic-model YAML, read into nl2sql's semantic model
(``nl2sql.import_semantic_model``) and written back (``nl2sql.export_semantic_model``);
docs/semantic-model.md. Source: Snowflake, "Cortex Analyst semantic model specification"."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlglot
import yaml
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..core import spi
from ..core.catalog import caller_schema
from ..core.errors import CandidateRefused, ConfigError, ItemSkipped
from ..core.settings import get_settings
from ..core.types import Schema, Table
from ..curated.verified import add_verified
from . import _bounded_yaml, _metricflow, _store

KINDS = {
    "dimensions": "dimension",
    "time_dimensions": "time_dimension",
    "facts": "fact",
    "metrics": "metric",
    "filters": "filter",
}
SECTIONS = {v: k for k, v in KINDS.items()}
OBJECT_KEYS = {"name", "synonyms", "description", "expr", "data_type"}
TABLE_KEYS = {"name", "description", "synonyms", "base_table", "primary_key", *KINDS}
MODEL_KEYS = {"name", "description", "tables", "relationships", "verified_queries"}
MAX_ITEMS = 10_000  # tables, objects, relationships and verified queries in one model
SPEC_HINT = "see docs/semantic-model.md for the format nl2sql reads"


@dataclass
class Report:
    """What an import did: each item added, updated or skipped (with why)."""

    model: str
    added: list[dict] = field(default_factory=list)
    updated: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)

    def done(self, kind: str, name: str, added: bool, **more) -> None:
        """Record an item written.

        Args:
            kind, name: the item's kind (``table``, ``metric``, …) and name.
            added: True when new, False when it replaced one of its name.
            **more: further keys of its report entry.
        """
        (self.added if added else self.updated).append({"kind": kind, "name": name, **more})

    def skip(self, kind: str, name: str, why: str) -> None:
        """Record an item left out.

        Args:
            kind, name: the item's kind and name.
            why: the reason.
        """
        self.skipped.append({"kind": kind, "name": name, "reason": why})

    def to_json(self) -> dict[str, Any]:
        """The report as ``import_semantic_model`` returns it.

        Returns:
            ``{"model", "added", "updated", "skipped", "counts": {added, updated, skipped}}``.
        """
        return {
            "model": self.model,
            "added": self.added,
            "updated": self.updated,
            "skipped": self.skipped,
            "counts": {
                "added": len(self.added),
                "updated": len(self.updated),
                "skipped": len(self.skipped),
            },
        }


def parse(
    text: str | None, max_bytes: int, tick: Callable[[], None] | None = None
) -> tuple[dict, list[dict]]:
    """Read a semantic model's YAML after the size check, as ``yaml.safe_load`` does but within
    the bounds of ``_bounded_yaml`` (depth, aliases, and the size with aliases expanded, at most
    ``max_bytes``), and check its shape; dbt MetricFlow YAML is rewritten as a Cortex Analyst
    model first (``_metricflow``).

    Args:
        text: the YAML text.
        max_bytes: setting ``semantic_model_max_bytes``.
        tick: called every 0.2 s or so while the YAML is parsed (``spi.cancel_point``); None
            for none.

    Returns:
        ``(model, skipped)``: the model as a mapping (``name``, ``tables``; the rest as the YAML
        has them), and what a dbt model's rewriting left out (``{kind, name, reason}``).

    Raises:
        ConfigError: empty, larger than ``max_bytes``, past a bound of the YAML (nested too
            deep, too many aliases, larger than ``max_bytes`` with its aliases expanded), not
            YAML, or not a semantic model (the message names the bound, or what is missing or
            of the wrong type).
        plpy.SPIError: QueryCanceled from ``tick``: the caller cancelled.
    """
    if text is None or not str(text).strip():
        raise ConfigError(
            "the semantic model is empty: pass its YAML text, e.g. SELECT "
            "nl2sql.import_semantic_model(pg_read_file('/path/model.yaml'))"
        )
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise ConfigError(
            f"the semantic model is {size} bytes, more than setting semantic_model_max_bytes "
            f"({max_bytes}): split it, or raise the setting with "
            f"SELECT nl2sql.set_setting('semantic_model_max_bytes', '{size}')"
        )
    try:
        doc = _bounded_yaml.load(text, max_bytes, "the semantic model", tick)
    except yaml.YAMLError as e:
        raise ConfigError(
            f"the semantic model is not valid YAML: {' '.join(str(e).split())}"
        ) from e
    skipped: list[dict] = []
    if _metricflow.is_metricflow(doc):
        doc, skipped = _metricflow.to_cortex(doc)
    elif isinstance(doc, dict) and "metrics" in doc and "tables" not in doc:
        raise ConfigError(
            "this looks like dbt MetricFlow metrics without their semantic_models: pass both in "
            f"one text, or a Cortex Analyst model (name:, tables: with base_table); {SPEC_HINT}"
        )
    if not isinstance(doc, dict) or not isinstance(doc.get("tables"), list) or not doc["tables"]:
        raise ConfigError(
            "not a semantic model: expected a mapping with name: and a non-empty list tables: "
            f"(each with name: and base_table:); {SPEC_HINT}"
        )
    if not _text(doc.get("name")):
        raise ConfigError(f"the semantic model has no name: (a text); {SPEC_HINT}")
    n = _item_count(doc)
    if n > MAX_ITEMS:
        raise ConfigError(f"the semantic model has {n} items, more than {MAX_ITEMS}: split it")
    return doc, skipped


def _item_count(doc: dict) -> int:
    """``parse``'s count of a model's items: its tables, relationships, verified queries and
    every table's objects (ConfigError names a section of the wrong shape)."""
    n = 0
    for key in ("tables", "relationships", "verified_queries"):
        n += len(_items(doc, key, "the model"))
    for i, t in enumerate(doc["tables"]):
        for key in KINDS:
            n += len(_items(t, key, f"tables[{i}]"))
    return n


def import_model(plpy, text: str | None) -> dict[str, Any]:
    """Import a Cortex Analyst (or dbt MetricFlow) semantic model
    (``nl2sql.import_semantic_model``): logical tables
    over indexed tables, their objects (expressions checked, ``_store.check_expression``),
    relationships, and verified queries (``verified.add_verified``). Items are matched by
    name: a new one is added, one of the same name replaced. Nothing is written unless the
    whole import succeeds (the caller's statement is one transaction).

    Args:
        text: the model's YAML text.

    Returns:
        ``Report.to_json()``: what was added, updated and skipped (with the reason).

    Raises:
        ConfigError: ``parse``'s refusals.
        CandidateRefused: an expression or base table the importing role must not use: a
            statement, a volatile or refused function, a relation it may not SELECT.
        NotIndexedError: nothing is indexed.
        EmbeddingError: a verified query needs the embedding model and it is missing.
    """
    doc, skipped = parse(
        text,
        get_settings(plpy).semantic_model_max_bytes,
        functools.partial(spi.cancel_point, plpy),
    )
    schema = caller_schema(plpy)
    rep = Report(_text(doc["name"]), skipped=list(skipped))
    _store.save_model(
        plpy,
        rep.model,
        _text(doc.get("description")) or None,
        {k: v for k, v in doc.items() if k not in MODEL_KEYS},
    )
    logical, ids = _import_tables(plpy, doc, schema, rep)
    for t in doc["tables"]:
        if _text(t.get("name")).lower() in ids:
            _import_objects(plpy, t, ids, logical, schema, rep)
    _import_relationships(plpy, doc, ids, logical, rep)
    _import_verified(plpy, doc, logical, rep)
    return rep.to_json()


def _import_tables(
    plpy, doc: dict, schema: Schema, rep: Report
) -> tuple[dict[str, Table], dict[str, int]]:
    """``import_model``'s logical tables, each over a base table the role may read, added or
    updated (or skipped with why, in ``rep``).

    Returns:
        ``(logical, ids)``: lower-cased logical table name → its base table, and → its id.
    """
    logical: dict[str, Table] = {}
    ids: dict[str, int] = {}
    for i, t in enumerate(doc["tables"]):
        name = _text(t.get("name"))
        try:
            if not name:
                raise ItemSkipped("it has no name")
            base = _store.base_table(plpy, t.get("base_table"), schema)
        except ItemSkipped as e:
            rep.skip("table", name or f"tables[{i}]", str(e))
            continue
        pk = t.get("primary_key")
        pk_cols = pk.get("columns") if isinstance(pk, dict) else None
        tid, added = _store.upsert_table(
            plpy,
            name,
            base,
            _text(t.get("description")) or None,
            _texts(t.get("synonyms")),
            _texts(pk_cols),
            {k: v for k, v in t.items() if k not in TABLE_KEYS},
        )
        logical[name.lower()] = base
        ids[name.lower()] = tid
        rep.done("table", name, added, base_table=f"{base.schema}.{base.table}")
    return logical, ids


def _import_objects(plpy, t: dict, ids, logical, schema, rep: Report) -> None:
    """A logical table's dimensions, time dimensions, facts, metrics and filters."""
    tname = _text(t["name"])
    base = logical[tname.lower()]
    for section, kind in KINDS.items():
        for i, o in enumerate(_items(t, section, tname)):
            name = _text(o.get("name"))
            label = f"{tname}.{name or f'{section}[{i}]'}"
            try:
                if not name:
                    raise ItemSkipped("it has no name")
                expr = _text(o.get("expr"))
                sql, rels = _store.check_expression(plpy, kind, expr, base, schema, logical)
            except ItemSkipped as e:
                rep.skip(kind, label, str(e))
                continue
            except CandidateRefused as e:
                raise CandidateRefused(f"{kind} {label}: {e}") from e
            fields = {
                "name": name,
                "expr": expr,
                "sql": sql,
                "description": _text(o.get("description")) or None,
                "synonyms": _texts(o.get("synonyms")),
                "data_type": _text(o.get("data_type")) or None,
                "extra": {k: v for k, v in o.items() if k not in OBJECT_KEYS},
            }
            _id, added = _store.upsert_object(plpy, ids[tname.lower()], kind, fields, rels)
            rep.done(kind, label, added)


def _import_relationships(plpy, doc: dict, ids, logical, rep: Report) -> None:
    """The relationships between logical tables (declared foreign keys or not)."""
    for i, r in enumerate(_items(doc, "relationships", "the model")):
        name = _text(r.get("name"))
        try:
            if not name:
                raise ItemSkipped("it has no name")
            left, right = _text(r.get("left_table")).lower(), _text(r.get("right_table")).lower()
            for side, key in (("left_table", left), ("right_table", right)):
                if key not in ids:
                    raise ItemSkipped(
                        f"{side} {key or '(none)'} is not a table imported from the model"
                    )
            lcols, rcols = _relationship_columns(r, logical[left], logical[right])
            join = (_text(r.get("join_type")) or "left_outer").lower()
            card = (_text(r.get("relationship_type")) or "many_to_one").lower()
            if join not in ("left_outer", "inner"):
                raise ItemSkipped(f"join_type {join} is not left_outer or inner")
            if card not in ("many_to_one", "one_to_one"):
                raise ItemSkipped(f"relationship_type {card} is not many_to_one or one_to_one")
        except ItemSkipped as e:
            rep.skip("relationship", name or f"relationships[{i}]", str(e))
            continue
        _id, added = _store.upsert_relationship(
            plpy,
            {
                "name": name,
                "left_table_id": ids[left],
                "right_table_id": ids[right],
                "left_columns": lcols,
                "right_columns": rcols,
                "join_type": join,
                "relationship_type": card,
            },
        )
        rep.done("relationship", name, added)


def _relationship_columns(r: dict, left: Table, right: Table) -> tuple[list[str], list[str]]:
    """A relationship's ``relationship_columns`` as the left and right base tables' columns.

    Raises:
        ItemSkipped: not a list of left_column/right_column pairs, or an unknown column.
    """
    pairs = r.get("relationship_columns")
    if not isinstance(pairs, list) or not pairs or not all(isinstance(p, dict) for p in pairs):
        raise ItemSkipped("relationship_columns must list left_column/right_column pairs")
    lcols = [_store.column_of(left, _text(p.get("left_column"))) for p in pairs]
    rcols = [_store.column_of(right, _text(p.get("right_column"))) for p in pairs]
    return lcols, rcols


def _import_verified(plpy, doc: dict, logical: dict[str, Table], rep: Report) -> None:
    """Verified queries become nl2sql's (``add_verified``): logical table names (``__orders``
    or ``orders``) in their SQL replaced by the base tables; each in its own subtransaction."""
    before = {
        r["id"]
        for r in spi.query(plpy, "SELECT id FROM nl2sql.verified_query WHERE kind = 'query'")
    }
    for i, q in enumerate(_items(doc, "verified_queries", "the model")):
        name = _text(q.get("name")) or _text(q.get("question")) or f"verified_queries[{i}]"
        try:
            sql, dialect = physical_sql(_text(q.get("sql")), logical)
            with plpy.subtransaction():
                vid = add_verified(plpy, _text(q.get("question")), sql, "query", dialect)
        except (ItemSkipped, CandidateRefused, ValueError) as e:
            rep.skip("verified_query", name, str(e) or type(e).__name__)
            continue
        rep.done("verified_query", name, vid not in before, id=vid)


def physical_sql(sql: str, logical: dict[str, Table]) -> tuple[str, str]:
    """A verified query's SQL with logical table names replaced by their base tables.

    Args:
        sql: the SQL (Snowflake's dialect, as Cortex Analyst writes it; PostgreSQL read when
            Snowflake's parser refuses it).
        logical: lower-cased logical table name -> its base table.

    Returns:
        ``(sql, dialect)``: the rewritten SQL in the dialect it was read in.

    Raises:
        ItemSkipped: no SQL, or it parses in neither dialect.
    """
    if not sql:
        raise ItemSkipped("it has no sql")
    for dialect in ("snowflake", "postgres"):
        try:
            tree = sqlglot.parse_one(sql, read=dialect)
            break
        except (SqlglotError, RecursionError):
            continue
    else:
        raise ItemSkipped("its sql does not parse")
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for t in tree.find_all(exp.Table):
        key = t.name.lower()
        if t.args.get("db") or key in ctes:
            continue
        base = logical.get(key) or (logical.get(key[2:]) if key.startswith("__") else None)
        if base is not None:
            t.set("this", _store.identifier(base.table))
            t.set("db", _store.identifier(base.schema))
    return tree.sql(dialect=dialect), dialect


def export_model(plpy) -> str:
    """The semantic model the calling role may see, as Cortex Analyst YAML
    (``nl2sql.export_semantic_model``); verified queries are the role's verified queries.

    Args:
        plpy: PL/Python's module.

    Returns:
        The YAML text (``yaml.safe_dump``, keys in the specification's order).
    """
    info = spi.query(plpy, "SELECT name, description, extra FROM nl2sql.semantic_model")
    db = spi.query(plpy, "SELECT current_database() AS d")[0]["d"]
    doc: dict[str, Any] = {"name": info[0]["name"] if info else db}
    if info and info[0]["description"]:
        doc["description"] = info[0]["description"]
    doc["tables"] = _export_tables(plpy, db)
    rels = _export_relationships(plpy)
    if rels:
        doc["relationships"] = rels
    vqs = _export_verified(plpy)
    if vqs:
        doc["verified_queries"] = vqs
    if info:
        doc.update({k: v for k, v in _loads(info[0]["extra"]).items() if k not in doc})
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)


def _export_tables(plpy, db: str) -> list[dict[str, Any]]:
    """``export_model``'s ``tables``: the logical tables the role may see, each with its
    metrics, dimensions, facts and filters, in the specification's keys."""
    tables, by_id = [], {}
    for r in spi.query(plpy, "SELECT * FROM nl2sql.visible_semantic_table ORDER BY name"):
        t = _drop_empty(
            {
                "name": r["name"],
                "description": r["description"],
                "synonyms": list(r["synonyms"] or []),
                "base_table": {
                    "database": db,
                    "schema": r["schema_name"],
                    "table": r["table_name"],
                },
                "primary_key": {"columns": list(r["primary_key"])} if r["primary_key"] else None,
            }
        )
        t.update(_loads(r["extra"]))
        tables.append(t)
        by_id[r["id"]] = t
    for r in spi.query(
        plpy, "SELECT * FROM nl2sql.visible_semantic_object ORDER BY table_id, kind, name"
    ):
        o = _drop_empty(
            {
                "name": r["name"],
                "synonyms": list(r["synonyms"] or []),
                "description": r["description"],
                "expr": r["expr"],
                "data_type": r["data_type"],
            }
        )
        o.update(_loads(r["extra"]))
        by_id[r["table_id"]].setdefault(SECTIONS[r["kind"]], []).append(o)
    return tables


def _export_relationships(plpy) -> list[dict[str, Any]]:
    """``export_model``'s ``relationships``, in the specification's keys."""
    return [
        {
            "name": r["name"],
            "left_table": r["left_table"],
            "right_table": r["right_table"],
            "relationship_columns": [
                {"left_column": a, "right_column": b}
                for a, b in zip(r["left_columns"], r["right_columns"])
            ],
            "join_type": r["join_type"],
            "relationship_type": r["relationship_type"],
        }
        for r in spi.query(plpy, "SELECT * FROM nl2sql.semantic_relationships")
    ]


def _export_verified(plpy) -> list[dict[str, Any]]:
    """``export_model``'s ``verified_queries``: the role's verified queries (not templates)."""
    return [
        {"name": f"verified_query_{r['id']}", "question": r["question"], "sql": r["sql"]}
        for r in spi.query(
            plpy, "SELECT id, question, sql FROM nl2sql.verified_queries WHERE kind = 'query'"
        )
    ]


def _items(d: dict, key: str, where: str) -> list[dict]:
    """``d[key]`` as a list of mappings (absent: empty); ConfigError names a wrong shape."""
    v = d.get(key) if isinstance(d, dict) else None
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise ConfigError(f"not a semantic model: {key} of {where} must be a list of mappings")
    return v


def _text(v: Any) -> str:
    return "" if v is None or isinstance(v, (dict, list)) else str(v).strip()


def _texts(v: Any) -> list[str]:
    return [_text(x) for x in v if _text(x)] if isinstance(v, list) else []


def _loads(v: Any) -> dict:
    return json.loads(v) if isinstance(v, str) else dict(v or {})


def _drop_empty(d: dict) -> dict:
    return {k: v for k, v in d.items() if v not in (None, "", [], {})}
