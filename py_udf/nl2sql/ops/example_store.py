"""The example pool's rows (``nl2sql.example``) and the relations each reads.
Source: DAIL-SQL (Gao et al. 2023) §3.3; PET-SQL (Li et al. 2024) §3.2."""

from __future__ import annotations

import functools
import json

from sqlglot import exp

from ..core import spi
from ..core.catalog import load_schema, parse_search_path
from ..core.types import Schema
from ..embedding.encode import embed, to_pgvector
from ..generation.db_checks import check_candidate_in_db, relation_targets
from ..retrieval.example_pool import (
    BUILTIN_SOURCE,
    builtin_pool,
    make_entry,
    parse_benchmark_json,
    read_json,
)

_INSERT = (
    "INSERT INTO nl2sql.example (db_id, question, sql, masked_question, sql_skeleton, "
    "schema, source, embedding) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8::vector) "
)
_INSERT_TYPES = ["text", "text", "text", "text", "text", "text", "text", "text"]


def add_example(
    plpy, question: str, sql: str, db_id: str | None, dialect: str, source: str = "user"
) -> int:
    """Add one question/SQL pair to the pool, transpiled, masked and embedded; a pair of this
    database is checked as a candidate is.

    Args:
        question: the pair's question.
        sql: the pair's SQL, in ``dialect``.
        db_id: the database it was written for; None for this database.
        dialect: the sqlglot dialect of ``sql`` (``postgres``, ``sqlite``, ``mysql``).
        source: the pool row's source (``user``, ``feedback``, ``mined``).

    Returns:
        The example's id.

    Raises:
        ValueError: the question is empty or the SQL does not parse.
        CandidateRefused: the SQL fails the candidate check.
        NotIndexedError: ``db_id`` is None and nothing is indexed.
        EmbeddingError: the embedding model is missing.
    """
    tree = schema = None
    entry = make_entry(db_id or "local", question, sql, None, dialect=dialect)
    if db_id is None:
        path = parse_search_path(
            plpy, spi.query(plpy, "SELECT current_setting('search_path') AS p")[0]["p"]
        )
        schema = load_schema(plpy, path)
        tree = check_candidate_in_db(plpy, entry.sql, schema)
        entry.schema = {t.table: [c.name for c in t.columns] for t in schema.tables}
        entry = make_entry("local", question, entry.sql, entry.schema)
    vec = to_pgvector(embed([entry.masked_question])[0])
    res = spi.query(
        plpy,
        _INSERT + "ON CONFLICT (db_id, question, sql) DO UPDATE SET source = EXCLUDED.source "
        "RETURNING id",
        [
            entry.db_id,
            entry.question,
            entry.sql,
            entry.masked_question,
            entry.sql_skeleton,
            json.dumps(entry.schema),
            source,
            vec,
        ],
        _INSERT_TYPES,
    )
    if tree is not None:  # an example of this database: shown only to roles that may read it
        record_example_relations(plpy, res[0]["id"], tree, schema)
    return res[0]["id"]


def load_examples(plpy, data: str, dialect: str, tables: str | None) -> dict:
    """Bulk-load Spider/BIRD-format pairs into the pool (source ``load``), embedded.

    Args:
        data: a JSON array (or JSON lines) of ``{question, query|SQL, db_id}`` objects.
        dialect: the sqlglot dialect of the SQL (transpiled to PostgreSQL).
        tables: Spider ``tables.json`` text giving each db_id's schema for masking, or None.

    Returns:
        ``{"loaded", "duplicates", "failed": [{"index", "question", "error"}]}``: pairs
        inserted, pairs already in the pool, pairs that failed.

    Raises:
        ConfigError: ``data`` or ``tables`` is not JSON, too large or nested too deep
            (``example_pool.read_json``), or ``tables`` is not Spider's.
        EmbeddingError: the embedding model is missing.
        plpy.SPIError: QueryCanceled: the caller cancelled.
    """
    entries, failures = parse_benchmark_json(
        data or "",
        dialect=dialect,
        tables=read_json(tables, "tables") if tables else None,
        tick=functools.partial(spi.cancel_point, plpy),
    )
    vecs = embed([e.masked_question for e in entries], cache=False)
    ins = spi.plan(plpy, _INSERT + "ON CONFLICT DO NOTHING RETURNING id", _INSERT_TYPES)
    loaded = 0
    for e, v in zip(entries, vecs):
        row = [e.db_id, e.question, e.sql, e.masked_question, e.sql_skeleton]
        row += [json.dumps(e.schema), "load", to_pgvector(v)]
        loaded += len(spi.execute(plpy, ins, row))
    return {"loaded": loaded, "duplicates": len(entries) - loaded, "failed": failures}


def record_example_relations(plpy, example_id: int, tree: exp.Expression, schema: Schema) -> int:
    """Store which relations an example of this database reads (``nl2sql.example_relation``),
    so that view ``nl2sql.visible_example`` shows it only to roles that may read them all.

    Args:
        example_id: the example's id.
        tree: the example's parsed SQL.
        schema: the visible schema its relations are resolved against.

    Returns:
        How many relations were recorded.
    """
    targets = sorted(set(relation_targets(tree, schema)))
    spi.query(
        plpy, "DELETE FROM nl2sql.example_relation WHERE example_id = $1", [example_id], ["int8"]
    )
    ins = spi.plan(
        plpy,
        "INSERT INTO nl2sql.example_relation (example_id, schema_name, "
        "table_name) VALUES ($1, $2, $3)",
        ["int8", "name", "name"],
    )
    for s, t in targets:
        spi.execute(plpy, ins, [example_id, s, t])
    return len(targets)


def load_builtin_examples(plpy) -> int:
    """Insert the built-in example pool (source ``builtin``) where its rows are missing.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        How many rows were inserted (0 when all were there).
    """
    ins = spi.plan(
        plpy,
        "INSERT INTO nl2sql.example (db_id, question, sql, masked_question, sql_skeleton, "
        "schema, source) VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7) ON CONFLICT DO NOTHING RETURNING id",
        ["text", "text", "text", "text", "text", "text", "text"],
    )
    n = 0
    for e in builtin_pool():
        n += len(
            spi.execute(
                plpy,
                ins,
                [
                    e.db_id,
                    e.question,
                    e.sql,
                    e.masked_question,
                    e.sql_skeleton,
                    json.dumps(e.schema),
                    BUILTIN_SOURCE,
                ],
            )
        )
    return n


def index_examples(plpy) -> dict:
    """Load the built-in pool if needed and embed every example without an embedding (of the
    masked question: all-MiniLM-L6-v2, 384 floats).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        ``{"examples_added", "examples_embedded", "examples_total"}`` (counts).

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    added = load_builtin_examples(plpy)
    rows = spi.query(plpy, "SELECT id, masked_question FROM nl2sql.example WHERE embedding IS NULL")
    if rows:
        vecs = embed([r["masked_question"] for r in rows], cache=False)
        spi.query(
            plpy,
            "UPDATE nl2sql.example SET embedding = e::vector "
            "FROM unnest($1::int8[], $2::text[]) AS u(i, e) WHERE id = u.i",
            [[r["id"] for r in rows], [to_pgvector(v) for v in vecs]],
            ["int8[]", "text[]"],
        )
    total = spi.query(plpy, "SELECT count(*) AS n FROM nl2sql.example")[0]["n"]
    return {"examples_added": added, "examples_embedded": len(rows), "examples_total": total}
