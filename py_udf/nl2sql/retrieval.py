"""Value retrieval: cell values of the database that the question (and its evidence) mentions,
found in the value index (read through ``nl2sql.visible_cell_value``: only values of columns the
calling role may SELECT and the value policy lets reach a model) by exact match, by pg_trgm similarity (misspelt
or partly typed values) and by embedding similarity (paraphrased values).

Source: OpenSearch-SQL (Xie et al. 2024) §3.4 — entity extraction from the question, then
retrieval of database values by string and vector similarity, the matched values given to the
model and used for column filtering. Candidate phrases here are the question's word n-grams,
its quoted spans and (BIRD's external knowledge) the evidence's quoted spans and n-grams.

All database functions take ``plpy`` and run on the backend's main thread.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from .masking import _STOP

MAX_NGRAM = 4
# Words that never name a value on their own (question words, SQL-ish words of BIRD evidence).
STOP_WORDS = _STOP | {
    "do", "does", "did", "has", "have", "had", "their", "there", "that", "this", "these",
    "those", "from", "than", "then", "as", "it", "its", "not", "no", "yes", "more", "most",
    "less", "least", "please", "refers", "refer", "refer to", "between", "where", "when",
    "average", "total", "sum", "max", "min", "over", "under", "above", "below", "percentage",
    "times", "ratio", "calculate", "state", "indicate", "among", "whose", "them", "they", "his",
    "her", "he", "she", "we", "our", "you", "your", "i", "me", "my", "if", "but", "so", "any",
    "also", "only", "other", "same", "both", "one", "two", "three", "first", "second", "into",
    "out", "up", "down", "about", "per", "than", "tell", "provide", "describe", "mention",
    "name", "names", "value", "values", "select", "count", "distinct", "null",
}
_JOINERS = {"", "-", ".", "&", "/", "'", "’"}
_SPAN_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")


@dataclass
class Phrase:
    """A candidate value phrase: its text and where it came from (``question``,
    ``quoted`` = a quoted span of the question, ``evidence`` = a quoted span of the evidence,
    ``evidence_ngram``)."""

    text: str
    source: str


@dataclass
class ValueMatch:
    """One retrieved cell value: (table, column, value) with its score in 0..1, how it was
    found (``exact``, ``trigram``, ``vector``) and the phrase of the question/evidence that
    matched it."""

    schema: str
    table: str
    column: str
    value: str
    score: float
    how: str
    phrase: str
    source: str

    def to_json(self) -> dict:
        """JSON-able dict for the trace."""
        return asdict(self)


def quoted_spans(text: str) -> list[str]:
    """Spans of ``text`` between matching single or double quotes (a quote opens only at the
    start or after a non-alphanumeric character, so apostrophes in words do not count):
    ``'power of "Super Strength" refers to power_name = 'Super Strength''`` → both spans."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'“‘" and (i == 0 or not text[i - 1].isalnum()):
            close = {"“": "”", "‘": "’"}.get(ch, ch)
            j = i + 1
            while j < n:
                if text[j] == close and (j + 1 == n or not text[j + 1].isalnum()):
                    break
                j += 1
            if j < n:
                span = text[i + 1:j].strip()
                if span and span not in out:
                    out.append(span)
                i = j + 1
                continue
        i += 1
    return out


def ngram_phrases(text: str, max_n: int = MAX_NGRAM) -> list[str]:
    """Word n-grams (1..``max_n``) of ``text`` as they are written (the original characters
    between the first and last word, so ``3-D Man`` stays ``3-D Man``), skipping n-grams that
    hold only stop words or single characters, start or end with a stop word, or whose words
    are joined by anything but spaces and ``- . & /`` (an operator, a quote, a comma)."""
    words = [(m.start(), m.end()) for m in _SPAN_WORD.finditer(text)]
    out: list[str] = []
    seen: set[str] = set()
    for n in range(max_n, 0, -1):
        for i in range(len(words) - n + 1):
            s, e = words[i][0], words[i + n - 1][1]
            span = text[s:e]
            gaps = [text[words[j][1]:words[j + 1][0]] for j in range(i, i + n - 1)]
            if any(g.strip() not in _JOINERS or len(g) > 3 for g in gaps):
                continue  # words joined by an operator, a quote or a sentence mark
            toks = [text[a:b].lower() for a, b in words[i:i + n]]
            if all(t in STOP_WORDS or len(t) < 2 for t in toks):
                continue
            if toks[0] in STOP_WORDS and n > 1 or toks[-1] in STOP_WORDS and n > 1:
                continue  # "of Marvel" adds nothing over "Marvel"
            key = span.lower()
            if key not in seen:
                seen.add(key)
                out.append(span)
    return out


def candidate_phrases(question: str, evidence: str | None = None,
                      max_n: int = MAX_NGRAM) -> list[Phrase]:
    """The phrases to look up in the value index, most specific first: quoted spans of the
    evidence and of the question, then the question's n-grams, then the evidence's n-grams
    (OpenSearch-SQL §3.4 extracts entities with a model; here every n-gram is a candidate and
    the index decides)."""
    out: list[Phrase] = []
    seen: set[str] = set()

    def add(text: str, source: str) -> None:
        t = text.strip()
        if t and t.lower() not in seen and len(t) <= 200:
            seen.add(t.lower())
            out.append(Phrase(t, source))

    for s in quoted_spans(evidence or ""):
        add(s, "evidence")
    for s in quoted_spans(question):
        add(s, "quoted")
    for s in ngram_phrases(question, max_n):
        add(s, "question")
    for s in ngram_phrases(evidence or "", max_n):
        add(s, "evidence_ngram")
    return out


_SOURCE_RANK = {"evidence": 0, "quoted": 0, "question": 1, "evidence_ngram": 2}
_HOW_RANK = {"exact": 0, "trigram": 1, "vector": 2}


def merge_matches(matches: list[ValueMatch], top_k: int) -> list[ValueMatch]:
    """One entry per (schema, table, column, value), keeping its best match; ranked exact
    matches first (quoted/evidence spans before n-grams), then by score, longer phrases first.
    Returns at most ``top_k``."""
    def key(m: ValueMatch):
        exact = m.how == "exact"
        return (0 if exact else 1, _SOURCE_RANK.get(m.source, 3) if exact else 0,
                -round(m.score, 4), -len(m.phrase), _HOW_RANK.get(m.how, 3), m.value)

    best: dict[tuple[str, str, str, str], ValueMatch] = {}
    for m in sorted(matches, key=key):
        best.setdefault((m.schema, m.table, m.column, m.value), m)
    return sorted(best.values(), key=key)[:top_k]


def _rows_to_matches(rows, phrases: list[Phrase], how: str) -> list[ValueMatch]:
    return [ValueMatch(schema=r["schema_name"], table=r["table_name"], column=r["column_name"],
                       value=r["value"], score=round(float(r["score"]), 4), how=how,
                       phrase=phrases[r["i"] - 1].text, source=phrases[r["i"] - 1].source)
            for r in rows]


def retrieve_values(plpy, question: str, evidence: str | None = None, *, top_k: int = 10,
                    trgm_min: float = 0.5, vector_min: float = 0.8, per_phrase: int = 3,
                    max_vector_phrases: int = 48, relation: str = "nl2sql.visible_cell_value"
                    ) -> list[ValueMatch]:
    """Cell values the question mentions, best first, at most ``top_k``.

    Three lookups against ``relation`` (the value index as the calling role may see it), in one
    statement: exact, case-insensitive equality with any phrase (score 1); pg_trgm
    ``similarity(value, phrase) >= trgm_min`` (``per_phrase`` best values per phrase); cosine
    similarity of the phrase's all-MiniLM-L6-v2 embedding with the value's ``>= vector_min``
    (``per_phrase`` nearest per phrase, for at most ``max_vector_phrases`` phrases of up to 3
    words). The fuzzy lookups skip the evidence's loose n-grams (its quoted spans are used).
    Cost: every visible value is compared with every phrase (see the comment on the
    statement), linear in values × phrases. Thresholds are in 0..1 (settings
    ``value_trgm_min``, ``value_vector_min``). Returns [] when the question yields no phrase. Raises embed.EmbeddingError when the
    embedding model is missing.
    """
    phrases = candidate_phrases(question, evidence)
    if not phrases:
        return []
    texts = [p.text for p in phrases]
    fuzzy = [i for i, p in enumerate(phrases) if len(p.text) >= 3 and p.source != "evidence_ngram"]
    trgm_idx = fuzzy if trgm_min <= 1 else []
    vec_idx = [i for i in fuzzy if len(_SPAN_WORD.findall(phrases[i].text)) <= 3] \
        [:max_vector_phrases] if vector_min <= 1 else []
    fuzzy_set, vec_pos = set(trgm_idx), {i: n for n, i in enumerate(vec_idx)}
    vecs: list[str] = []
    if vec_idx:
        from .embed import embed, to_pgvector

        vecs = [to_pgvector(v) for v in embed([phrases[i].text for i in vec_idx])]
    # One statement, one pass over the visible values: the privilege-filtered view is a security
    # barrier, so pg_trgm's similarity and pgvector's '<=>' (not leakproof) cannot use the base
    # table's gin/hnsw indexes through it, and a per-phrase lookup would re-run the view. Every
    # (value, phrase) pair is scored once; only pairs over a threshold are ranked per phrase.
    # Cost: linear in visible values × phrases (about 0.3 s for 2,700 values × 40 phrases).
    rows = plpy.execute(plpy.prepare(
        f"WITH q AS MATERIALIZED (SELECT $1::text[] AS xs, $2::text[] AS ts, "
        f"                               $3::vector[] AS es, $4::int[] AS ids), "
        f"hits AS (SELECT p.i, v.schema_name, v.table_name, v.column_name, v.value, "
        f"  lower(v.value) = lower(p.x) AS exact, "
        f"  CASE WHEN p.t IS NULL THEN NULL ELSE similarity(v.value, p.t)::float8 END AS trg, "
        f"  CASE WHEN p.e IS NULL THEN NULL ELSE (1 - (v.embedding <=> p.e))::float8 END AS cos "
        f"  FROM {relation} v CROSS JOIN q "
        f"  CROSS JOIN LATERAL unnest(q.xs, q.ts, q.es, q.ids) AS p(x, t, e, i)), "
        f"ranked AS (SELECT *, "
        f"  row_number() OVER (PARTITION BY i ORDER BY trg DESC NULLS LAST, value) AS rt, "
        f"  row_number() OVER (PARTITION BY i ORDER BY cos DESC NULLS LAST, value) AS rv "
        f"  FROM hits WHERE exact OR trg >= $5 OR cos >= $6) "
        f"SELECT 'exact' AS how, i, schema_name, table_name, column_name, value, 1.0::float8 AS score "
        f"  FROM ranked WHERE exact "
        f"UNION ALL SELECT 'trigram', i, schema_name, table_name, column_name, value, trg "
        f"  FROM ranked WHERE trg >= $5 AND rt <= $7 "
        f"UNION ALL SELECT 'vector', i, schema_name, table_name, column_name, value, cos "
        f"  FROM ranked WHERE cos >= $6 AND rv <= $7",
        ["text[]", "text[]", "text", "int[]", "float8", "float8", "int4"]),
        [texts, [t if i in fuzzy_set else None for i, t in enumerate(texts)],
         "{" + ",".join(f'"{vecs[vec_pos[i]]}"' if i in vec_pos else "NULL"
                        for i in range(len(texts))) + "}",
         list(range(1, len(texts) + 1)), float(trgm_min), float(vector_min), per_phrase])
    matches: list[ValueMatch] = []
    for how in ("exact", "trigram", "vector"):
        matches += _rows_to_matches([r for r in rows if r["how"] == how], phrases, how)
    return merge_matches(matches, top_k)
