"""The example pool: question/SQL pairs with masked questions and SQL skeletons.
Source: DAIL-SQL (Gao et al. 2023) §3.3; PET-SQL (Li et al. 2024) §3.2."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

from sqlglot import exp

from ..core.errors import CandidateRefused, ConfigError, QuestionError
from ..core.sqlcheck import STRING_FORMS, constant_values, parse_one, parse_shared, transpile
from ..model.masking import literal_phrases, mask_question

BUILTIN_SOURCE = "builtin"


@dataclass
class PoolEntry:
    """One pair ready for the pool (before embedding); ``schema``: table -> column names."""

    db_id: str
    question: str
    sql: str
    schema: dict[str, list[str]]
    masked_question: str
    sql_skeleton: str


def _sql_identifiers(sql: str) -> tuple[set[str], set[str]]:
    """(table and column names, non-empty literal values as text) of one PostgreSQL query."""
    tree = parse_one(sql)
    names: set[str] = set()
    for t in tree.find_all(exp.Table):
        if t.name:
            names.add(t.name)
    for c in tree.find_all(exp.Column):
        if c.name:
            names.add(c.name)
    values = set(constant_values(tree))
    return names, values


def sql_skeleton(sql: str) -> str:
    """Remove identifiers (``_``) and literals (``%s``) from the SQL (DAIL-SQL §3.3 skeleton).

    ``SELECT count(*) FROM singer WHERE age > 30`` → ``SELECT COUNT(*) FROM _ WHERE _ > %s``.

    Args:
        sql: one PostgreSQL statement.

    Returns:
        The skeleton, as PostgreSQL text.

    Raises:
        CandidateRefused: the SQL does not parse as one PostgreSQL statement.
    """
    tree = parse_shared(sql).copy()  # shared: changed below on a copy
    # Not ``tree.transform``: sqlglot's ``set`` of one list item re-parents the whole list, so
    # replacing the items of an IN list one by one is quadratic (minutes for 200,000 items).
    # The replacements are collected first, then each changed list is set once: linear.
    changed: dict[tuple[int, str], tuple[exp.Expression, str, dict[int, exp.Expression]]] = {}
    for node in list(tree.walk()):
        if isinstance(node, (exp.Literal, *STRING_FORMS)):
            new: exp.Expression = exp.Placeholder()
        elif isinstance(node, exp.Identifier):
            new = exp.to_identifier("_")
        else:
            continue
        parent, key = node.parent, node.arg_key
        if parent is None:
            tree = new
        elif node.index is None:
            parent.set(key, new)
        else:
            changed.setdefault((id(parent), key), (parent, key, {}))[2][node.index] = new
    for parent, key, items in changed.values():
        parent.set(key, [items.get(i, e) for i, e in enumerate(parent.args[key])])
    return tree.sql(dialect="postgres")


def make_entry(
    db_id: str,
    question: str,
    sql: str,
    schema: dict[str, list[str]] | None = None,
    dialect: str = "postgres",
) -> PoolEntry:
    """Validate and prepare one question/SQL pair for the pool: SQL transpiled to PostgreSQL,
    question masked (names and ``literal_phrases``), skeleton computed.

    Args:
        db_id: the database the pair was written for.
        question: the pair's question.
        sql: the pair's SQL, in ``dialect``.
        schema: table name -> column names of its database, or None.
        dialect: the sqlglot dialect of ``sql`` (``postgres``, ``sqlite``, ``mysql``).

    Returns:
        The ``PoolEntry``.

    Raises:
        QuestionError: the question is empty.
        CandidateRefused: the SQL does not parse as one statement.
    """
    if not question or not question.strip():
        raise QuestionError("empty question")
    pg_sql = sql if dialect == "postgres" else transpile(sql, read=dialect)
    names, values = _sql_identifiers(pg_sql)
    schema = {k: list(v) for k, v in (schema or {}).items()}
    all_names = set(names)
    for table, cols in schema.items():
        all_names.add(table)
        all_names.update(cols)
    masked = mask_question(question, names=sorted(all_names), values=literal_phrases(values))
    return PoolEntry(
        db_id=db_id,
        question=question.strip(),
        sql=pg_sql,
        schema=schema,
        masked_question=masked,
        sql_skeleton=sql_skeleton(pg_sql),
    )


def builtin_pool() -> list[PoolEntry]:
    """Load and prepare the project's cross-domain pool (``data/example_pool.json``).

    Returns:
        One ``PoolEntry`` per example of the file, in file order.

    Raises:
        CandidateRefused: an example's SQL does not parse (a packaging error).
    """
    raw = json.loads(resources.files("nl2sql").joinpath("data/example_pool.json").read_text())
    schemas = raw.get("schemas", {})
    return [
        make_entry(e["db_id"], e["question"], e["sql"], schemas.get(e["db_id"]))
        for e in raw["examples"]
    ]


MAX_JSON_BYTES = 32 * 2**20
"""Largest JSON text ``nl2sql.load_examples`` reads (``data`` and ``tables`` each): what the
JSON reader builds grows with the text (up to about 25 times its size in memory for
``[[],[],…]``) and is built in one uninterrupted step of about a second at this size."""
MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects in that JSON (Spider's parsed ``sql`` trees nest
about 20 deep)."""
_TEXT_KEYS = ("question", "query", "SQL", "sql", "db_id")


def read_json(text: str, what: str, lines: bool = False) -> list:
    """Read a JSON array (or JSON lines) given to ``nl2sql.load_examples`` within the bounds:
    at most ``MAX_JSON_BYTES`` (checked before it is read) and ``MAX_JSON_DEPTH`` levels.

    Args:
        text: the JSON text.
        what: its name in messages (``data``, ``tables``).
        lines: also read JSON lines (one value a line) when the text is no array.

    Returns:
        The array's items (a JSON lines text: its lines' values).

    Raises:
        ConfigError: larger than ``MAX_JSON_BYTES``, nested deeper than ``MAX_JSON_DEPTH``, not
            JSON (the message names the line and column), or not an array.
    """
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_JSON_BYTES:
        raise ConfigError(
            f"{what} is {size:,} bytes, more than nl2sql.load_examples reads at once "
            f"({MAX_JSON_BYTES:,}): split it into several calls (pairs already loaded are "
            "skipped as duplicates)"
        )
    body = text.strip()
    try:
        if lines and not body.startswith("["):
            items = [json.loads(line) for line in body.splitlines() if line.strip()]
        else:
            items = json.loads(body)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{what} is not JSON: {e}") from None
    except RecursionError:
        raise ConfigError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels") from None
    if not isinstance(items, list):
        raise ConfigError(f"{what} must be a JSON array, not a JSON {type(items).__name__}")
    if json_depth(items) > MAX_JSON_DEPTH:
        raise ConfigError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
    return items


def json_depth(value: object) -> int:
    """The nesting depth of a value read from JSON (lists and dicts), without recursion.

    Args:
        value: the value.

    Returns:
        0 for a scalar, 1 for a flat list or dict, and so on.
    """
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def parse_benchmark_json(
    text: str,
    dialect: str = "sqlite",
    tables: list | None = None,
    tick: Callable[[], None] | None = None,
) -> tuple[list[PoolEntry], list[dict]]:
    """Read Spider/BIRD-format question/SQL pairs and prepare them for the pool.

    Args:
        text: a JSON list (or JSON lines) of objects with ``question``, ``query`` (or ``SQL`` or
            ``sql``) and ``db_id`` (``read_json``'s bounds).
        dialect: the sqlglot dialect of the SQL (transpiled to PostgreSQL).
        tables: Spider ``tables.json`` content (each db_id's schema, for masking), or None.
        tick: called between pairs every 0.2 s or so (``spi.cancel_point``); None for none.

    Returns:
        ``(entries, failures)``; a failure is ``{"index", "question", "error"}``, never dropped
        silently (an item that is not an object with text fields among them).

    Raises:
        ConfigError: ``read_json``'s refusals, or ``tables`` not in Spider's form.
    """
    items = read_json(text, "data", lines=True)
    schemas = _schemas(tables or [])
    entries, failures = [], []
    last = time.monotonic()
    for i, it in enumerate(items):
        if tick is not None and time.monotonic() - last >= 0.2:
            tick()
            last = time.monotonic()
        bad = _not_a_pair(it)
        if bad:
            q = it.get("question") if isinstance(it, dict) else None
            failures.append({"index": i, "question": q if isinstance(q, str) else "", "error": bad})
            continue
        q = it.get("question", "")
        sql = it.get("query") or it.get("SQL") or it.get("sql") or ""
        try:
            entries.append(
                make_entry(
                    it.get("db_id", "unknown"),
                    q,
                    sql,
                    schemas.get(it.get("db_id", "")),
                    dialect=dialect,
                )
            )
        except (CandidateRefused, ValueError) as e:
            failures.append({"index": i, "question": q, "error": str(e)})
    return entries, failures


def _not_a_pair(item: object) -> str | None:
    """Why ``item`` is no question/SQL object (its text fields of another type), or None."""
    if not isinstance(item, dict):
        return f"not a JSON object but a JSON {type(item).__name__}"
    for key in _TEXT_KEYS:
        if key in item and item[key] is not None and not isinstance(item[key], str):
            return f"{key} is not a text but a JSON {type(item[key]).__name__}"
    return None


def _schemas(tables: list) -> dict[str, dict[str, list[str]]]:
    """Each db_id's tables and columns from Spider's ``tables.json`` content.

    Raises:
        ConfigError: an entry not in Spider's form (``db_id``, ``table_names``, ``column_names``
            of ``[table index, name]`` pairs).
    """
    schemas: dict[str, dict[str, list[str]]] = {}
    for n, db in enumerate(tables):
        try:
            tnames = db.get("table_names_original") or db.get("table_names") or []
            cols = db.get("column_names_original") or db.get("column_names") or []
            s: dict[str, list[str]] = {str(t): [] for t in tnames}
            for ti, cname in cols:
                if ti >= 0:
                    s[str(tnames[ti])].append(str(cname))
            schemas[str(db["db_id"])] = s
        except (AttributeError, KeyError, IndexError, TypeError, ValueError):
            raise ConfigError(
                f"tables[{n}] is not a Spider tables.json entry (db_id, table_names, "
                "column_names as [table index, name] pairs)"
            ) from None
    return schemas
