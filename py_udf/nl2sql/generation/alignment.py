"""Value alignment: a literal that is no cell value of its column becomes the closest indexed
value (docs/internals/generation.md "Value alignment"). Source: OpenSearch-SQL (Xie et al. 2024) §3.5.
And a comparison with a number the question bounds inclusively ("2014 or after", "at least 3")
made inclusive (``align_bounds``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from ..core import spi
from ..core.names import Names, resolve
from ..core.types import Schema
from ..embedding.encode import to_pgvector
from ..embedding.value_vectors import embed_values

# Most literals of one candidate looked up for alignment (the first ones, in tree order). Each
# lookup may be an SPI query and an embedding; a model's IN list of thousands of strings would
# otherwise cost thousands of them. A real query compares a handful of literals.
MAX_ALIGNED_LITERALS = 50
# the question's words that bound a number inclusively: ``(phrase) N`` or ``N or (word)``
_NUMBER = r"(\d+(?:\.\d+)?)"
_AT_LEAST = re.compile(
    rf"\b(?:at least|no less than|not less than)\s+{_NUMBER}\b"
    rf"|\b{_NUMBER}\s+or\s+(?:more|after|later|older|above|greater|higher|over)\b",
    re.I,
)
_AT_MOST = re.compile(
    rf"\b(?:at most|no more than|not more than)\s+{_NUMBER}\b"
    rf"|\b{_NUMBER}\s+or\s+(?:less|fewer|before|earlier|younger|below|lower|under)\b",
    re.I,
)
# a comparison read with the column on the left: ``N > col`` is ``col < N``
_MIRROR = {exp.EQ: exp.EQ, exp.GT: exp.LT, exp.LT: exp.GT}


@dataclass
class Lookup:
    """The best indexed value for one (column, literal), or why there is none."""

    value: str | None  # the indexed value to use; None when nothing is close enough
    method: str | None = None  # exact | case | trigram | vector
    score: float | None = None  # 1.0 exact/case, trigram or cosine similarity (4 digits)
    reason: str | None = None  # why there is no value (for the trace)


def _table_lookup(schema: Schema) -> dict[str, Any]:
    """Schema tables by prompt name and by ``schema.table``, lower-cased."""
    out: dict[str, Any] = {t.name.lower(): t for t in schema.tables}
    out.update({f"{t.schema}.{t.table}".lower(): t for t in schema.tables})
    return out


def resolve_column(
    col: exp.Column, names: Names, lookup: dict[str, Any]
) -> tuple[str, str, str] | None:
    """Find the schema column a column reference means.

    Args:
        col: a column reference (``exp.Column``) of the query ``names`` was resolved from.
        names: ``names.resolve`` of the query.
        lookup: ``_table_lookup`` of the schema.

    Returns:
        (schema, table, column) as the schema spells them when exactly one relation the
        reference may belong to has such a column (case-insensitive); None otherwise.
    """
    name = col.name.lower()
    tables = list(
        {
            id(t): t
            for t in (lookup.get(r.key) for r in names.column_relations(col))
            if t is not None
        }.values()
    )
    hits = [
        (t.schema, t.table, c.name) for t in tables for c in t.columns if c.name.lower() == name
    ]
    return hits[0] if len(hits) == 1 else None


def literal_comparisons(
    tree: exp.Expression, schema: Schema
) -> list[tuple[exp.Literal, tuple[str, str, str]]]:
    """Find the string literals compared with a resolvable column (``=``, ``<>``/``!=``, ``IN``).

    Args:
        tree: the candidate's sqlglot tree; not changed.
        schema: the schema the calling role may see (``catalog.load_schema``).

    Returns:
        (literal node, (schema, table, column)) pairs in tree order.
    """
    names, lookup = resolve(tree), _table_lookup(schema)
    out: list[tuple[exp.Literal, tuple[str, str, str]]] = []
    for node in tree.find_all(exp.EQ, exp.NEQ, exp.In):
        if isinstance(node, exp.In):
            col, lits = node.this, list(node.expressions)
        else:
            a, b = node.this, node.expression
            col, lits = (a, [b]) if isinstance(a, exp.Column) else (b, [a])
        if not isinstance(col, exp.Column):
            continue
        lits = [x for x in lits if isinstance(x, exp.Literal) and x.is_string]
        if not lits:
            continue
        where = resolve_column(col, names, lookup)
        if where is None:
            continue
        out.extend((lit, where) for lit in lits)
    return out


class ValueIndex:
    """Look up values in ``nl2sql.cell_value`` for one question, cached; main thread only.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        values_per_column: the indexer's cap per column (a column at the cap is not aligned).
        value_max_chars: the longest value the indexer keeps (a longer literal is not aligned).
        min_trigram: the least pg_trgm similarity for a trigram match, in [0, 1].
        min_cosine: the least cosine similarity for an embedding match; above 1.0: off.
        partial: (schema, table, column) of partially indexed columns (not aligned).
    """

    def __init__(
        self,
        plpy,
        values_per_column: int,
        value_max_chars: int,
        min_trigram: float,
        min_cosine: float,
        partial: set[tuple[str, str, str]] | frozenset = frozenset(),
    ):
        self.plpy = plpy
        self.partial = set(partial)
        self.cap = values_per_column
        self.max_chars = value_max_chars
        self.min_trigram = min_trigram
        self.min_cosine = min_cosine
        self._counts: dict[tuple[str, str, str], int] = {}
        self._cache: dict[tuple[str, str, str, str], Lookup] = {}
        self.lookups = 0  # literals looked up in the database (cache misses)

    def column_count(self, col: tuple[str, str, str]) -> int:
        """Count the indexed values of a column that the calling role may read (cached).

        Args:
            col: (schema, table, column) names.

        Returns:
            The number of values; 0 when not indexed, not readable or withheld.
        """
        if col not in self._counts:
            rows = spi.query(
                self.plpy,
                "SELECT n_values AS n FROM nl2sql._column_values("
                "current_user, $1, $2, $3, NULL, NULL, 0)",
                list(col),
                ["name", "name", "name"],
            )
            self._counts[col] = int(rows[0]["n"])
        return self._counts[col]

    def closest(self, col: tuple[str, str, str], literal: str) -> Lookup:
        """Find the best indexed value of ``col`` for ``literal`` (cached per column and literal).
        Source: OpenSearch-SQL (Xie et al. 2024) §3.5.

        Args:
            col: (schema, table, column) names.
            literal: the literal's text as the candidate wrote it.

        Returns:
            Lookup: the value with its method and score, or ``value`` None with the reason.

        Raises:
            EmbeddingError: the embedding fallback cannot load the embedding model.
        """
        key = (*col, literal)
        if key in self._cache:
            return self._cache[key]
        res = self._closest(col, literal)
        self._cache[key] = res
        return res

    def _unaligned(self, col: tuple[str, str, str], literal: str) -> Lookup | None:
        """Why ``literal`` is not looked up in ``col`` (no, too many or a part of its values
        indexed; the literal too long or blank), as a ``Lookup`` without a value; None to look."""
        n = self.column_count(col)
        if n == 0:
            return Lookup(None, reason="column has no indexed cell values")
        if n >= self.cap:
            return Lookup(
                None, reason=f"column has {n} indexed values (the cap): index may be incomplete"
            )
        if col in self.partial:
            return Lookup(
                None,
                reason="column is partially indexed (more distinct values than "
                "values_per_column, or sampled)",
            )
        if len(literal) > self.max_chars or not literal.strip():
            return Lookup(None, reason="literal longer than value_max_chars or blank")
        return None

    def _closest(self, col: tuple[str, str, str], literal: str) -> Lookup:
        refused = self._unaligned(col, literal)
        if refused is not None:
            return refused
        self.lookups += 1
        rows = spi.query(
            self.plpy,
            "SELECT value, score FROM nl2sql._column_values(current_user, $1, $2, $3, $4, $5, 1)",
            [*col, literal, self.min_trigram],
            ["name", "name", "name", "text", "float8"],
        )
        if rows and rows[0]["value"] is not None:
            v = rows[0]["value"]
            if v == literal:
                return Lookup(literal, "exact", 1.0)
            if v.lower() == literal.lower():
                return Lookup(v, "case", 1.0)
            return Lookup(v, "trigram", round(float(rows[0]["score"]), 4))
        if self.min_cosine > 1.0:
            return Lookup(None, reason="no value within the trigram threshold")
        vec = to_pgvector(embed_values([literal])[0])
        rows = spi.query(
            self.plpy,
            "SELECT value, 1 - (embedding <=> $4::halfvec) AS cos "
            "FROM nl2sql.visible_cell_value WHERE schema_name = $1 AND "
            "table_name = $2 AND column_name = $3 "
            "ORDER BY embedding <=> $4::halfvec LIMIT 1",
            [*col, vec],
            ["text", "text", "text", "text"],
        )
        if rows and float(rows[0]["cos"]) >= self.min_cosine:
            return Lookup(rows[0]["value"], "vector", round(float(rows[0]["cos"]), 4))
        best = f" (best {rows[0]['value']!r} at cosine {float(rows[0]['cos']):.2f})" if rows else ""
        return Lookup(None, reason=f"no value close enough{best}")

    def nearest_values(self, col: tuple[str, str, str], literal: str, k: int = 3) -> list[str]:
        """List the indexed values of ``col`` most similar to ``literal``, for repair prompts
        (equal, equal ignoring case, then by trigram similarity, no threshold).

        Args:
            col: (schema, table, column) names.
            literal: the literal's text.
            k: how many values at most.

        Returns:
            Up to ``k`` values, best first; empty when the role may read none.
        """
        if self.column_count(col) == 0:
            return []
        rows = spi.query(
            self.plpy,
            "SELECT value FROM nl2sql._column_values(current_user, $1, $2, "
            "$3, $4, NULL, $5) WHERE value IS NOT NULL",
            [*col, literal, k],
            ["name", "name", "name", "text", "int4"],
        )
        return [r["value"] for r in rows]


def align_values(
    tree: exp.Expression, schema: Schema, index: ValueIndex
) -> tuple[exp.Expression, list[dict[str, Any]]]:
    """Replace each compared literal that is not a cell value of its column by the closest value
    (the first ``MAX_ALIGNED_LITERALS``; one that cannot be aligned is left as is).

    Source: OpenSearch-SQL (Xie et al. 2024) §3.5.

    Args:
        tree: the candidate's sqlglot tree; may be shared and is not changed.
        schema: the schema the calling role may see (``catalog.load_schema``).
        index: the question's ValueIndex.

    Returns:
        (tree, alignments): ``tree`` itself when nothing changed, else a changed copy; one
        ``{"column": "schema.table.column", "from", "to", "method", "score"}`` per replacement.

    Raises:
        EmbeddingError: as ``ValueIndex.closest``.
    """
    done: list[dict[str, Any]] = []
    replace: list[tuple[int, str]] = []
    found_in = literal_comparisons(tree, schema)
    for i, (lit, col) in enumerate(found_in[:MAX_ALIGNED_LITERALS]):
        text = lit.this
        found = index.closest(col, text)
        if found.value is None or found.method == "exact" or found.value == text:
            continue
        replace.append((i, found.value))
        done.append(
            {
                "column": ".".join(col),
                "from": text,
                "to": found.value,
                "method": found.method,
                "score": found.score,
            }
        )
    if not replace:
        return tree, done
    tree = tree.copy()
    in_copy = literal_comparisons(tree, schema)  # the same traversal: the same order
    for i, value in replace:
        in_copy[i][0].replace(exp.Literal.string(value))
    return tree, done


def align_bounds(
    tree: exp.Expression, question: str | None
) -> tuple[exp.Expression, list[dict[str, Any]]]:
    """Make inclusive a comparison with a number the question bounds inclusively: where it says
    "2014 or after", "2 or more", "at least 3" or "no less than 3000", ``x = N`` and ``x > N``
    become ``x >= N``; where it says "N or before", "at most N", "no more than N", ``x = N`` and
    ``x < N`` become ``x <= N``. Only a number the question says once. Small models write the
    equality or the strict bound (Qwen2.5-Coder-0.5B: "in year 2014 or after" as ``year =
    2014``); every such question of Spider dev (9 of 472) has an inclusive gold (Yu et al. 2018).

    Args:
        tree: the candidate's sqlglot tree; may be shared and is not changed.
        question: the user's question, or None.

    Returns:
        (tree, alignments): ``tree`` itself when nothing changed, else a changed copy; one
        ``{"column", "from", "to", "method": "question", "score": None}`` per comparison, the
        comparisons as SQL text.
    """
    lower, upper = _bounded(question, _AT_LEAST), _bounded(question, _AT_MOST)
    if not lower and not upper:
        return tree, []
    found = [_inclusive(n, lower, upper) for n in tree.find_all(exp.EQ, exp.GT, exp.LT)]
    if not any(found):
        return tree, []
    tree = tree.copy()
    done = []
    for node, new in zip(list(tree.find_all(exp.EQ, exp.GT, exp.LT)), found):
        if new is not None:
            column, literal = _sides(node)
            made = new(this=column.copy(), expression=literal.copy())
            done.append(
                {"column": column.sql(dialect="postgres"), "from": node.sql(dialect="postgres"),
                 "to": made.sql(dialect="postgres"), "method": "question", "score": None}
            )  # fmt: skip
            node.replace(made)
    return tree, done


def _bounded(question: str | None, pattern: re.Pattern) -> set[Decimal]:
    """The numbers ``pattern`` finds bounded in ``question`` that it says once."""
    if not question:
        return set()
    said = [Decimal(n) for n in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", question)]
    found = {Decimal(g) for m in pattern.finditer(question) for g in m.groups() if g}
    return {n for n in found if said.count(n) == 1}


def _sides(node: exp.Expression) -> tuple[exp.Expression, exp.Literal]:
    """``(the compared expression, the number literal)`` of a comparison with one."""
    return (
        (node.this, node.expression) if _number(node.expression) else (node.expression, node.this)
    )


def _inclusive(node: exp.Expression, lower: set, upper: set) -> type | None:
    """``exp.GTE`` or ``exp.LTE`` where ``node`` compares with a number bounded so, else None."""
    if (_number(node.this) is None) == (_number(node.expression) is None):
        return None  # no number, or two
    column, literal = _sides(node)
    op = type(node) if literal is node.expression else _MIRROR[type(node)]
    value = _number(literal)
    if value in lower and value not in upper and op in (exp.EQ, exp.GT):
        return exp.GTE
    if value in upper and value not in lower and op in (exp.EQ, exp.LT):
        return exp.LTE
    return None


def _number(e: exp.Expression) -> Decimal | None:
    """The value of a number literal, else None."""
    if not isinstance(e, exp.Literal) or e.is_string:
        return None
    try:
        return Decimal(e.this)
    except InvalidOperation:
        return None
