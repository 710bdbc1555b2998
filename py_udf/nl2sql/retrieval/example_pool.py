"""The example pool: question/SQL pairs with masked questions and SQL skeletons.
Source: DAIL-SQL (Gao et al. 2023) §3.3; PET-SQL (Li et al. 2024) §3.2."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from sqlglot import exp

from ..core.errors import CandidateRefused, QuestionError
from ..core.sqlcheck import STRING_FORMS, constant_values, parse_one, parse_shared, transpile
from .masking import STOP_WORDS, mask_question, tokenize

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


def literal_phrases(values) -> list[str]:
    """List the phrases a question may use for SQL literals, to mask a pool question.

    'Band-Omega-9' → 'Band', 'Band Omega', 'Band-Omega-9', 'Omega', 'Omega 9'.

    Args:
        values: the literal values (any objects; taken as ``str``).

    Returns:
        The phrases, sorted, each once.
    """
    out: set[str] = set()
    for v in values:
        v = str(v)
        out.add(v)
        words = [t for t in tokenize(v) if t[0].isalnum()]
        for n in range(2, len(words)):
            for i in range(len(words) - n + 1):
                out.add(" ".join(words[i : i + n]))
        out.update(w for w in words if len(w) >= 4 and w.lower() not in STOP_WORDS)
    return sorted(out)


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


def parse_benchmark_json(
    text: str, dialect: str = "sqlite", tables: list[dict] | None = None
) -> tuple[list[PoolEntry], list[dict]]:
    """Read Spider/BIRD-format question/SQL pairs and prepare them for the pool.

    Args:
        text: a JSON list (or JSON lines) of objects with ``question``, ``query`` (or ``SQL`` or
            ``sql``) and ``db_id``.
        dialect: the sqlglot dialect of the SQL (transpiled to PostgreSQL).
        tables: Spider ``tables.json`` content (each db_id's schema, for masking), or None.

    Returns:
        ``(entries, failures)``; a failure is ``{"index", "question", "error"}``, never dropped
        silently.

    Raises:
        ValueError: (json.JSONDecodeError) ``text`` is not JSON or JSON lines.
    """
    text = text.strip()
    if text.startswith("["):
        items = json.loads(text)
    else:
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    schemas: dict[str, dict[str, list[str]]] = {}
    for db in tables or []:
        tnames = db.get("table_names_original") or db.get("table_names") or []
        cols = db.get("column_names_original") or db.get("column_names") or []
        s: dict[str, list[str]] = {t: [] for t in tnames}
        for ti, cname in cols:
            if ti >= 0:
                s[tnames[ti]].append(cname)
        schemas[db["db_id"]] = s
    entries, failures = [], []
    for i, it in enumerate(items):
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
