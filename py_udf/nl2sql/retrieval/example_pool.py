"""The example pool: question/SQL pairs from other databases, their masked questions and SQL
skeletons; loading Spider/BIRD-format JSON (SQLite SQL transpiled to PostgreSQL by sqlglot).

Sources: DAIL-SQL (Gao et al. 2023) §3.3 (masked-question similarity, SQL skeleton);
PET-SQL (Li et al. 2024) §3.2 (examples masked with their own schema's names and values).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from sqlglot import exp

from ..core.errors import CandidateRefused, QuestionError
from ..core.sqlcheck import parse_one, parse_shared, transpile
from .masking import _STOP, mask_question, tokenize

BUILTIN_SOURCE = "builtin"


@dataclass
class PoolEntry:
    """One pair ready for the pool (before embedding).

    Attributes:
        db_id: the database the pair was written for.
        question: the question, stripped.
        sql: the SQL, as PostgreSQL.
        schema: table name -> column names of its database (for masking); may be empty.
        masked_question: the question with schema names and the SQL's literals masked.
        sql_skeleton: the SQL with identifiers and literals removed (``sql_skeleton``).
    """

    db_id: str
    question: str
    sql: str
    schema: dict[str, list[str]]
    masked_question: str
    sql_skeleton: str


def sql_identifiers(sql: str) -> tuple[set[str], set[str]]:
    """Collect the names and literal values a PostgreSQL query mentions.

    Args:
        sql: one PostgreSQL statement.

    Returns:
        ``(names, values)``: the table and column names, and the non-empty literal values as
        text.

    Raises:
        CandidateRefused: the SQL does not parse as one PostgreSQL statement.
    """
    tree = parse_one(sql)
    names: set[str] = set()
    for t in tree.find_all(exp.Table):
        if t.name:
            names.add(t.name)
    for c in tree.find_all(exp.Column):
        if c.name:
            names.add(c.name)
    values = {lit.this for lit in tree.find_all(exp.Literal) if lit.this}
    return names, values


def sql_skeleton(sql: str) -> str:
    """Remove identifiers and literals from the SQL: keywords and structure only.

    Identifiers become ``_``, literals a placeholder (``%s``); e.g.
    ``SELECT count(*) FROM singer WHERE age > 30`` → ``SELECT COUNT(*) FROM _ WHERE _ > %s``.

    Source: DAIL-SQL (Gao et al. 2023) §3.3, SQL skeleton.

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
        if isinstance(node, exp.Literal):
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
    """List the phrases a question may use for SQL literals.

    Each literal, its contiguous runs of two or more (but not all) words, and its single words
    of four or more characters that are not stop words, case kept ('Band-Omega-9' →
    'Band', 'Band Omega', 'Band-Omega-9', 'Omega', 'Omega 9'). The question asked is masked
    with the phrases that matched the value index (also misspelt or partial ones), so a pool
    question is masked with these to stay comparable.

    Source: PET-SQL (Li et al. 2024) §3.2, examples masked with their own values.

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
        out.update(w for w in words if len(w) >= 4 and w.lower() not in _STOP)
    return sorted(out)


def make_entry(
    db_id: str,
    question: str,
    sql: str,
    schema: dict[str, list[str]] | None = None,
    dialect: str = "postgres",
) -> PoolEntry:
    """Validate and prepare one question/SQL pair for the pool.

    Transpiles ``sql`` from ``dialect`` to PostgreSQL, parses it, masks the question with the
    schema's names (those of ``schema`` and the identifiers of the SQL) and the SQL's literals
    (``literal_phrases``), and computes the SQL skeleton.

    Source: PET-SQL (Li et al. 2024) §3.2, masked questions; DAIL-SQL (Gao et al. 2023) §3.3,
    SQL skeleton.

    Args:
        db_id: the database the pair was written for.
        question: the pair's question.
        sql: the pair's SQL, in ``dialect``.
        schema: table name -> column names of its database, or None.
        dialect: the sqlglot dialect of ``sql`` (``postgres``, ``sqlite``, ``mysql``).

    Returns:
        The ``PoolEntry``.

    Raises:
        QuestionError: (a ValueError) the question is empty.
        CandidateRefused: (a ValueError) the SQL does not parse as one statement.
    """
    if not question or not question.strip():
        raise QuestionError("empty question")
    pg_sql = sql if dialect == "postgres" else transpile(sql, read=dialect)
    names, values = sql_identifiers(pg_sql)
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
    """Load and prepare the project's cross-domain pool (package file ``data/example_pool.json``).

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
        text: a JSON list (or JSON lines) of objects with ``question``, ``query`` (or ``SQL``
            or ``sql``) and ``db_id``.
        dialect: the sqlglot dialect of the SQL (transpiled to PostgreSQL).
        tables: Spider ``tables.json`` content giving each db_id's schema for masking, or None.

    Returns:
        ``(entries, failures)``: each failure is ``{"index", "question", "error"}`` — pairs
        that fail are reported, never silently dropped.

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
