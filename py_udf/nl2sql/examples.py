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

from .masking import _STOP, mask_question, tokenize
from .errors import CandidateRefused, QuestionError
from .sqlcheck import parse_one, parse_shared, transpile

BUILTIN_SOURCE = "builtin"


@dataclass
class PoolEntry:
    """One pair ready for the pool (before embedding)."""

    db_id: str
    question: str
    sql: str
    schema: dict[str, list[str]]
    masked_question: str
    sql_skeleton: str


def sql_identifiers(sql: str) -> tuple[set[str], set[str]]:
    """(table and column names, literal values) that a PostgreSQL query mentions."""
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
    """The SQL with identifiers and literals removed: keywords and structure only (DAIL-SQL §3.3).

    Identifiers become ``_``, literals ``?``; e.g. ``SELECT count(*) FROM singer WHERE age > 30``
    → ``SELECT COUNT(*) FROM _ WHERE _ > ?``."""
    tree = parse_shared(sql)  # transform() below works on a copy

    def strip(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Literal):
            return exp.Placeholder()
        if isinstance(node, exp.Identifier):
            return exp.to_identifier("_")
        return node

    return tree.transform(strip).sql(dialect="postgres")


def literal_phrases(values) -> list[str]:
    """Phrases of SQL literals a question may use for them: each literal, and its contiguous
    runs of two or more words, and its single words of four or more letters that are not stop
    words ('Band-Omega-9' → 'band omega', 'omega 9', 'band', 'omega', …). The question asked is
    masked with the phrases that matched the value index (also misspelt or partial ones), so a
    pool question is masked with these to stay comparable."""
    out: set[str] = set()
    for v in values:
        v = str(v)
        out.add(v)
        words = [t for t in tokenize(v) if t[0].isalnum()]
        for n in range(2, len(words)):
            for i in range(len(words) - n + 1):
                out.add(" ".join(words[i:i + n]))
        out.update(w for w in words if len(w) >= 4 and w.lower() not in _STOP)
    return sorted(out)


def make_entry(db_id: str, question: str, sql: str, schema: dict[str, list[str]] | None = None,
               dialect: str = "postgres") -> PoolEntry:
    """Validate and prepare one pair: transpile ``sql`` from ``dialect`` to PostgreSQL, parse it,
    mask the question with the schema's names (``schema`` or, if absent, the identifiers of the
    SQL) and the SQL's literals. Raises CandidateRefused when the SQL does not parse,
    QuestionError (a ValueError) on an empty question."""
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
    return PoolEntry(db_id=db_id, question=question.strip(), sql=pg_sql, schema=schema,
                     masked_question=masked, sql_skeleton=sql_skeleton(pg_sql))


def builtin_pool() -> list[PoolEntry]:
    """The project's cross-domain pool (``data/example_pool.json``), prepared."""
    raw = json.loads(resources.files("nl2sql").joinpath("data/example_pool.json").read_text())
    schemas = raw.get("schemas", {})
    return [make_entry(e["db_id"], e["question"], e["sql"], schemas.get(e["db_id"]))
            for e in raw["examples"]]


def parse_benchmark_json(text: str, dialect: str = "sqlite",
                         tables: list[dict] | None = None) -> tuple[list[PoolEntry], list[dict]]:
    """Read Spider/BIRD-format pairs: a JSON list (or JSON lines) of objects with ``question``,
    ``query`` or ``SQL``, ``db_id``; SQL in ``dialect`` is transpiled to PostgreSQL.

    ``tables``: optional Spider ``tables.json`` content giving each db_id's schema for masking.
    Returns (entries, failures) where each failure is ``{"index", "question", "error"}`` —
    pairs that fail are reported, never silently dropped."""
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
            entries.append(make_entry(it.get("db_id", "unknown"), q, sql,
                                      schemas.get(it.get("db_id", "")), dialect=dialect))
        except (CandidateRefused, ValueError) as e:
            failures.append({"index": i, "question": q, "error": str(e)})
    return entries, failures
