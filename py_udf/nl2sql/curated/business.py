"""Business context: glossary terms and instructions (docs/internals/curated.md "Business
context"). Source: ReBoost (Sui et al. 2023) §3.2; PET-SQL (Li et al. 2024) §3.2."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sqlglot import exp
from sqlglot.optimizer.scope import build_scope

from ..core import spi
from ..core.catalog import caller_schema
from ..core.errors import CandidateRefused, ConfigError
from ..core.sqlcheck import parse_single, to_sql
from ..core.types import Schema, Table
from ..embedding.encode import embed, to_pgvector
from ..generation.db_checks import check_candidate_in_db, relation_targets
from ..model import prompts
from ..model.masking import inflections, tokenize


@dataclass
class TermUse:
    """A business term used for one question; ``score``: cosine similarity with the question,
    1.0 when ``how`` is ``named`` (by ``phrase``) rather than ``similar``."""

    id: int
    term: str
    definition: str
    sql_expression: str | None
    score: float
    how: str
    phrase: str | None = None


@dataclass
class InstructionUse:
    """A database-wide instruction used for one question: its ``id``, its text and its cosine
    ``score`` with the question (4 places).
    """

    id: int
    instruction: str
    score: float


@dataclass
class BusinessContext:
    """The business context of one question: ``terms`` (named first), ``instructions`` (most
    similar first), ``known_terms``: ``(id, term)`` of every term the role may see."""

    terms: list[TermUse] = field(default_factory=list)
    instructions: list[InstructionUse] = field(default_factory=list)
    known_terms: list[tuple[int, str]] = field(default_factory=list)

    @property
    def mask_phrases(self) -> list[str]:
        """The question's phrases that name a term (masked like schema names)."""
        return [t.phrase for t in self.terms if t.phrase]

    def prompt_text(self, gate, stage: str) -> str:
        """Render the terms and instructions for the prompts (``prompts.render_business``), each
        term's SQL expression through the gate (``Gate.expression``).

        Args:
            gate: the call's ``model.gate.Gate``.
            stage: the asking stage (``presql``, ``finsql``).

        Returns:
            The text block; ``""`` when nothing is used.
        """
        return prompts.render_business(
            [(t.term, t.definition, gate.expression(stage, t.sql_expression)) for t in self.terms],
            [i.instruction for i in self.instructions],
        )

    def to_json(self) -> dict[str, Any]:
        """The trace's ``business_context``.

        Returns:
            ``{"terms": [TermUse as dict], "instructions": [InstructionUse as dict]}``.
        """
        return {
            "terms": [asdict(t) for t in self.terms],
            "instructions": [asdict(i) for i in self.instructions],
        }


def named_terms(question: str, terms: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Find the terms a question names: the term's words in order, case-insensitively, the last
    one singular or plural ("active customers" names "active customer").

    Args:
        question: the question.
        terms: ``(id, term)`` pairs.

    Returns:
        ``(id, phrase)`` per named term, in ``terms`` order; the phrase is the question's tokens
        that name it, joined by spaces.
    """
    toks = tokenize(question)
    low = [t.lower() for t in toks]
    out: list[tuple[int, str]] = []
    for tid, term in terms:
        tt = [t.lower() for t in tokenize(term)]
        if not tt:
            continue
        n, last = len(tt), inflections(tt[-1])
        for i in range(len(low) - n + 1):
            if low[i : i + n - 1] == tt[:-1] and low[i + n - 1] in last:
                out.append((tid, " ".join(toks[i : i + n])))
                break
    return out


def _terms_used(plpy, vec: str, named: dict[int, str], st) -> list[TermUse]:
    """``retrieve_business``'s terms: those the question names (``named``: id → the words that
    name it), then the most similar to the question's embedding ``vec`` above
    ``term_min_similarity``, at most ``term_top_k`` of those."""
    terms: list[TermUse] = []
    rows = spi.query(
        plpy,
        "SELECT id, term, definition, sql_expression, "
        "1 - (embedding <=> $1::vector) AS sim FROM nl2sql.visible_term "
        "ORDER BY id = ANY($2) DESC, embedding <=> $1::vector LIMIT $3",
        [vec, list(named), st.term_top_k + len(named)],
        ["text", "int8[]", "int4"],
    )
    for r in rows:
        sim = round(float(r["sim"]), 4)
        if r["id"] in named:
            terms.append(
                TermUse(
                    r["id"],
                    r["term"],
                    r["definition"],
                    r["sql_expression"],
                    1.0,
                    "named",
                    named[r["id"]],
                )
            )
        elif sim >= st.term_min_similarity and len(terms) < st.term_top_k:
            terms.append(
                TermUse(r["id"], r["term"], r["definition"], r["sql_expression"], sim, "similar")
            )
    return terms


def retrieve_business(plpy, question: str, st) -> BusinessContext:
    """Retrieve the terms and instructions for a question, as the calling role may see them.

    Args:
        question: the question (as the prompts show it).
        st: the settings (``term_top_k``, ``term_min_similarity``, ``instruction_top_k``).

    Returns:
        The ``BusinessContext``.

    Raises:
        EmbeddingError: the embedding model is missing (only when there is something to rank).
    """
    known = [
        (r["id"], r["term"])
        for r in spi.query(plpy, "SELECT id, term FROM nl2sql.visible_term ORDER BY id")
    ]
    n_instr = spi.query(plpy, "SELECT count(*) AS n FROM nl2sql.visible_instruction")[0]["n"]
    bc = BusinessContext(known_terms=known)
    if not (known and st.term_top_k) and not (n_instr and st.instruction_top_k):
        return bc
    vec = to_pgvector(embed([question])[0])
    named = dict(named_terms(question, known))
    if known and st.term_top_k:
        bc.terms = _terms_used(plpy, vec, named, st)
    if n_instr and st.instruction_top_k:
        rows = spi.query(
            plpy,
            "SELECT id, instruction, 1 - (embedding <=> $1::vector) AS sim "
            "FROM nl2sql.visible_instruction ORDER BY embedding <=> $1::vector "
            "LIMIT $2",
            [vec, st.instruction_top_k],
            ["text", "int4"],
        )
        bc.instructions = [
            InstructionUse(r["id"], r["instruction"], round(float(r["sim"]), 4)) for r in rows
        ]
    return bc


def _table_of(schema: Schema, name: str) -> Table | None:
    low = name.lower()
    for t in schema.tables:
        if low in (t.name.lower(), f"{t.schema}.{t.table}".lower()):
            return t
    return None


def _expression_tables(tree: exp.Expression, schema: Schema) -> list[Table]:
    """The tables a term's expression (``tree``, not a query) refers to by its free columns,
    each once in order; an unqualified column belongs to the one table that has it. CandidateRefused
    names an unknown qualifier or column, or an ambiguous one.
    """
    root = build_scope(exp.select(tree.copy()))
    out: dict[tuple[str, str], Table] = {}
    for col in root.columns if root else []:
        name = col.name.lower()
        if col.table:
            t = _table_of(schema, ".".join(p.name for p in col.parts[:-1]))
            if t is None:
                raise CandidateRefused(f"{col.table} is not an indexed table this role may read")
            if not any(c.name.lower() == name for c in t.columns):
                raise CandidateRefused(f"table {t.name} has no column {col.name}")
        else:
            hits = [t for t in schema.tables if any(c.name.lower() == name for c in t.columns)]
            if not hits:
                raise CandidateRefused(f"no indexed table has a column {col.name}")
            if len(hits) > 1:
                raise CandidateRefused(
                    f"column {col.name} is in several tables ({', '.join(t.name for t in hits)}):"
                    f" qualify it, e.g. {hits[0].name}.{col.name}"
                )
            t = hits[0]
        out.setdefault((t.schema, t.table), t)
    return list(out.values())


def _check_expression(plpy, expression: str, schema: Schema) -> list[tuple[str, str]]:
    """``(schema, table)`` of every relation a term's SQL expression reads, each once; ``SELECT
    <expression> FROM <its tables>`` must pass the candidate check (never executed)."""
    tree = parse_single(expression)
    statement = isinstance(tree, (exp.Query, exp.DDL, exp.DML, exp.Command)) and not isinstance(
        tree, exp.Subquery
    )  # a parenthesised scalar subquery is an expression
    if statement or tree.find(exp.Placeholder):
        raise CandidateRefused(
            f"expected an SQL expression (e.g. a condition or a metric), not "
            f"a {type(tree).__name__} statement"
        )
    tables = _expression_tables(tree, schema)
    query = exp.select(tree.copy())
    if tables:
        query = query.from_(exp.to_table(tables[0].name))
        for t in tables[1:]:
            query = query.join(exp.to_table(t.name))
    checked = check_candidate_in_db(plpy, to_sql(query), schema)
    targets = [(t.schema, t.table) for t in tables] + relation_targets(checked, schema)
    return list(dict.fromkeys(targets))


def add_term(plpy, term: str, definition: str, sql_expression: str | None) -> int:
    """Add or update a business term (``nl2sql.add_term``): upsert on the lower-cased term.

    Args:
        term: the term, e.g. ``active customer``.
        definition: what it means, in words.
        sql_expression: what it means in SQL (an expression over indexed tables), or None.

    Returns:
        The term's id.

    Raises:
        CandidateRefused: ``sql_expression`` is not a read-only expression over indexed tables the
            caller may read.
        ConfigError: ``term`` or ``definition`` is empty.
        NotIndexedError: ``sql_expression`` is given and nothing is indexed.
        EmbeddingError: the embedding model is missing.
    """
    term, definition = (term or "").strip(), (definition or "").strip()
    if not term or not definition:
        raise ConfigError(
            "term and definition are required, e.g. SELECT nl2sql.add_term("
            "'active customer', 'ordered in the last 90 days', "
            "'last_order_at > now() - interval ''90 days''')"
        )
    expr = (sql_expression or "").strip() or None
    targets: list[tuple[str, str]] = []
    if expr:
        targets = _check_expression(plpy, expr, caller_schema(plpy))
    vec = to_pgvector(embed([f"{term}: {definition}"])[0])
    tid = spi.query(
        plpy,
        "INSERT INTO nl2sql.term AS t (term, definition, sql_expression, "
        "embedding) VALUES ($1, $2, $3, $4::vector) ON CONFLICT (lower(term)) "
        "DO UPDATE SET term = EXCLUDED.term, definition = EXCLUDED.definition, "
        "sql_expression = EXCLUDED.sql_expression, embedding = EXCLUDED.embedding, "
        "added_at = now() RETURNING t.id",
        [term, definition, expr, vec],
        ["text", "text", "text", "text"],
    )[0]["id"]
    spi.query(plpy, "DELETE FROM nl2sql.term_relation WHERE term_id = $1", [tid], ["int8"])
    for s, t in targets:
        spi.query(
            plpy,
            "INSERT INTO nl2sql.term_relation (term_id, schema_name, table_name) "
            "VALUES ($1, $2, $3)",
            [tid, s, t],
            ["int8", "name", "name"],
        )
    return tid


def add_instruction(plpy, text: str) -> int:
    """Add a database-wide instruction (``nl2sql.add_instruction``); the same text is kept once.

    Args:
        text: the instruction, e.g. ``Amounts are in euros; round them to 2 decimals.``

    Returns:
        The instruction's id.

    Raises:
        ConfigError: ``text`` is empty.
        EmbeddingError: the embedding model is missing.
    """
    text = (text or "").strip()
    if not text:
        raise ConfigError(
            "the instruction is empty, e.g. SELECT nl2sql.add_instruction("
            "'Amounts are in euros; round them to 2 decimals.')"
        )
    vec = to_pgvector(embed([text])[0])
    return spi.query(
        plpy,
        "INSERT INTO nl2sql.instruction AS i (instruction, embedding) "
        "VALUES ($1, $2::vector) ON CONFLICT (instruction) DO UPDATE SET "
        "embedding = EXCLUDED.embedding RETURNING i.id",
        [text, vec],
        ["text", "text"],
    )[0]["id"]


def embed_pending(plpy) -> int:
    """Embed the instructions and terms added beside the database (``sql/beside/002-curated.sql``
    stores them with no embedding; retrieval skips them until then).

    Args:
        plpy: the database seam (the server's plpy, or the client's over psycopg).

    Returns:
        How many rows were embedded (0 when the role may not update them: an asking role that
        does not administer nl2sql leaves them for ``nl2sql reindex``).

    Raises:
        EmbeddingError: the embedding model is missing.
    """
    done = 0
    for table, text_sql in (("instruction", "instruction"), ("term", "term || ': ' || definition")):
        may = f"SELECT pg_catalog.has_table_privilege('nl2sql.{table}', 'UPDATE') AS ok"
        if not spi.query(plpy, may)[0]["ok"]:
            continue
        rows = spi.query(
            plpy, f"SELECT id, {text_sql} AS text FROM nl2sql.{table} WHERE embedding IS NULL"
        )
        vecs = embed([r["text"] for r in rows]) if rows else []
        for r, v in zip(rows, vecs, strict=True):
            spi.query(
                plpy,
                f"UPDATE nl2sql.{table} SET embedding = $2::vector WHERE id = $1",
                [r["id"], to_pgvector(v)],
                ["bigint", "text"],
            )
        done += len(rows)
    return done
