"""Writing one table's cell values to the value index, with embeddings (docs/internals/ops.md
"Cell values")."""

from __future__ import annotations

import json
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from ..core import spi
from ..embedding.encode import to_pgvector
from ..embedding.value_vectors import embed_values

# Distinct strings embedded and written per chunk (bounds memory: 4,096 x 384 floats; the CLI's
# progress bar moves once per chunk).
EMBED_CHUNK = 4096

# (k, n): part k of a table indexed in n parts (sql/incremental/027-reindex-parts.sql); the
# whole table is part 0 of 1.
WHOLE = (0, 1)


def in_part(value: str, part: tuple[int, int]) -> bool:
    """Whether cell value ``value`` is written by ``part`` of its table: the CRC-32 of its
    UTF-8 bytes modulo the parts (the same in every process, unlike ``hash``).

    Args:
        value: the string.
        part: ``(k, n)``, 0 <= k < n.

    Returns:
        True when ``crc32(value) % n == k`` (always for ``WHOLE``).
    """
    return part[1] <= 1 or zlib.crc32(value.encode("utf-8", "surrogatepass")) % part[1] == part[0]


def _progress(plpy, on: bool, table: str, done: int) -> None:
    """Tell the nl2sql-index CLI how many values of ``table`` are written (a NOTICE, only in a
    session that set ``nl2sql.progress`` to on)."""
    if on:
        plpy.notice("nl2sql-progress " + json.dumps({"table": table, "values": done}))


def _embed_texts(texts: list[str]) -> list[str]:
    """Bulk embeddings of ``texts`` as pgvector text (runs in the indexer's helper thread)."""
    return [to_pgvector(v) for v in embed_values(texts, bulk=True)]


def _insert_chunk(
    plpy,
    ins,
    schema: str,
    table: str,
    chunk: list[str],
    vecs: list[str],
    by_value: dict[str, list[str]],
) -> None:
    """Insert one chunk of new strings (each into every column that holds it)."""
    c_, v_, e_ = [], [], []
    for text, vec in zip(chunk, vecs):
        for colname in by_value[text]:
            c_.append(colname)
            v_.append(text)
            e_.append(vec)
    spi.execute(plpy, ins, [schema, table, c_, v_, e_])


# The (column, value) pairs of ``write_values`` as a relation ``u(c, v)``: parameters $3, $4.
_PAIRS_CTE = "WITH u AS MATERIALIZED (SELECT * FROM unnest($3::name[], $4::text[]) AS u(c, v))"

_PAIRS_TYPES = ["name", "name", "name[]", "text[]"]


class _NewValues(NamedTuple):
    """New cell values after copying embeddings already in the value index."""

    reused: int  # rows inserted with an embedding copied from the value index
    by_value: dict[str, list[str]]  # each string still to embed -> the columns holding it


def _delete_gone(plpy, schema: str, table: str, cols: list[str], vals: list[str]) -> int:
    """Delete the table's cell values no longer among the pairs; returns how many."""
    gone = spi.query(
        plpy,
        _PAIRS_CTE + " "
        "DELETE FROM nl2sql.cell_value x WHERE x.schema_name = $1 AND x.table_name = $2 "
        "AND NOT EXISTS (SELECT 1 FROM u WHERE u.c = x.column_name AND u.v = x.value) RETURNING 1",
        [schema, table, cols, vals],
        _PAIRS_TYPES,
    )
    return len(gone)


def _insert_reused(plpy, schema: str, table: str, cols: list[str], vals: list[str]) -> _NewValues:
    """Insert the missing pairs whose string the value index holds already (copying its
    embedding); the others are returned, grouped by string, to be embedded."""
    todo = spi.query(
        plpy,
        _PAIRS_CTE + ", "
        "missing AS MATERIALIZED (SELECT u.c, u.v FROM u WHERE NOT EXISTS (SELECT 1 FROM "
        "  nl2sql.cell_value x WHERE x.schema_name = $1 AND x.table_name = $2 "
        "  AND x.column_name = u.c AND x.value = u.v)), "
        "ins AS (INSERT INTO nl2sql.cell_value (schema_name, table_name, column_name, value, "
        "  embedding) SELECT $1, $2, m.c, m.v, e.embedding FROM missing m CROSS JOIN LATERAL "
        "  (SELECT x.embedding FROM nl2sql.cell_value x WHERE lower(x.value) = lower(m.v) "
        "   AND x.value = m.v LIMIT 1) e ON CONFLICT DO NOTHING RETURNING column_name, value), "
        "rest AS MATERIALIZED (SELECT m.c, m.v FROM missing m WHERE NOT EXISTS "
        "  (SELECT 1 FROM ins WHERE ins.column_name = m.c AND ins.value = m.v)) "
        "SELECT (SELECT count(*) FROM ins) AS n_reused, array_agg(r.c) AS cs, "
        "array_agg(r.v) AS vs FROM rest r",
        [schema, table, cols, vals],
        _PAIRS_TYPES,
    )[0]
    by_value: dict[str, list[str]] = {}
    for c, v in zip(todo["cs"] or [], todo["vs"] or []):
        by_value.setdefault(v, []).append(c)
    return _NewValues(int(todo["n_reused"]), by_value)


def _embed_and_insert(
    plpy, schema: str, table: str, by_value: dict[str, list[str]], progress: bool
) -> float:
    """Embed the new strings ``EMBED_CHUNK`` at a time and insert them; returns the seconds
    spent waiting for embeddings."""
    ins = spi.plan(
        plpy,
        "INSERT INTO nl2sql.cell_value (schema_name, table_name, column_name, value, embedding) "
        "SELECT $1, $2, c, v, e::halfvec FROM unnest($3::name[], $4::text[], $5::text[]) AS u(c, v, e) "
        "ON CONFLICT DO NOTHING",
        ["name", "name", "name[]", "text[]", "text[]"],
    )
    # in one order for every worker: two workers' transactions lock the trigram mirror's
    # shared new strings (sql/idempotent/013-lookup-speed.sql) in the same order
    strings = sorted(by_value)
    chunks = [strings[i : i + EMBED_CHUNK] for i in range(0, len(strings), EMBED_CHUNK)]
    embed_s, done = 0.0, 0
    # the next chunk is embedded in a thread (ONNX Runtime releases the GIL) while this one is
    # formatted and written: only this thread calls plpy
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="nl2sql-index") as pool:
        pending = pool.submit(_embed_texts, chunks[0]) if chunks else None
        for k, chunk in enumerate(chunks):
            t0 = time.perf_counter()
            vecs = pending.result()
            embed_s += time.perf_counter() - t0
            pending = pool.submit(_embed_texts, chunks[k + 1]) if k + 1 < len(chunks) else None
            _insert_chunk(plpy, ins, schema, table, chunk, vecs, by_value)
            done += len(chunk)
            _progress(plpy, progress, f"{schema}.{table}", done)
    return embed_s


def write_values(
    plpy,
    schema: str,
    table: str,
    pairs: list[tuple[str, str]],
    progress: bool,
    part: tuple[int, int] = WHOLE,
) -> dict:
    """Make the table's rows of ``nl2sql.cell_value`` equal ``pairs``, reusing embeddings.

    Args:
        schema: the table's schema name.
        table: the table's name.
        pairs: ``(column, value)`` pairs, the table's value index as it should be.
        progress: send the CLI's progress NOTICEs.
        part: ``(k, n)``: insert only the pairs ``in_part`` k; part 0 deletes the values
            no longer among all ``pairs`` (the other parts delete nothing).

    Returns:
        ``{"values", "values_embedded", "values_reused", "values_deleted"}`` (counts:
        ``values`` the pairs of this part) and
        ``embed_seconds`` (time spent waiting for embeddings).
    """
    cols = [p[0] for p in pairs]
    vals = [p[1] for p in pairs]
    n_gone = _delete_gone(plpy, schema, table, cols, vals) if part[0] == 0 else 0
    if part != WHOLE:
        mine = [p for p in pairs if in_part(p[1], part)]
        cols, vals = [p[0] for p in mine], [p[1] for p in mine]
    new = _insert_reused(plpy, schema, table, cols, vals)
    embed_s = _embed_and_insert(plpy, schema, table, new.by_value, progress)
    return {
        "values": len(vals),
        "values_embedded": len(new.by_value),
        "values_reused": new.reused,
        "values_deleted": n_gone,
        "embed_seconds": round(embed_s, 3),
    }
