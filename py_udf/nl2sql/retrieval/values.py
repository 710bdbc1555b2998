"""Cell values the question names, from the value index as the calling role sees them
(docs/internals/retrieval.md "Value lookup"). Source: OpenSearch-SQL (Xie et al. 2024) §3.4."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from ..core import spi
from ..core.types import Schema
from ..model.masking import STOP_WORDS, inflections

MAX_NGRAM = 4
# Longest question n-gram (in words) looked up by trigram similarity (fuzzy_phrases).
MAX_FUZZY_WORDS = 3
# Trigram similarity at which a match resolves its phrase like an exact one (fuzzy_phrases): a
# one-letter slip in a value of two or three words scores about 0.6-0.85 against it.
STRONG_TRIGRAM = 0.7
# Words that never name a value on their own (question words, SQL-ish words of BIRD evidence).
VALUE_STOP_WORDS = STOP_WORDS | {
    "refer to",
    *(
        "do does did has have had their there that this these those from than then as it its not "
        "no yes more most less least please refers refer between where when average total sum max "
        "min over under above below percentage times ratio calculate state indicate among whose "
        "them they his her he she we our you your i me my if but so any also only other same both "
        "one two three first second into out up down about per tell provide describe mention name "
        "names value values select count distinct null"
    ).split(),
}
_JOINERS = {"", "-", ".", "&", "/", "'", "’"}
_SPAN_WORD = re.compile(r"[^\W_]+(?:['’][^\W\d_]+)?")  # letters or digits of any script


@dataclass
class Phrase:
    """A candidate value phrase (≤ 200 characters) and its ``source``: ``quoted``,
    ``question``, ``evidence`` or ``evidence_ngram``."""

    text: str
    source: str


@dataclass
class ValueMatch:
    """One retrieved cell value: ``score`` in 0..1 (1 exact, else trigram or cosine), ``how``
    and the matching ``phrase`` with its ``source``."""

    schema: str
    table: str
    column: str
    value: str
    score: float
    how: str
    phrase: str
    source: str

    def to_json(self) -> dict:
        """Convert the match for the trace.

        Returns:
            JSON-able dict of the attributes.
        """
        return asdict(self)


def quoted_spans(text: str) -> list[str]:
    """Find the spans of a text between matching quotes (", ', “…”, ‘…’).

    Args:
        text: a question or its evidence.

    Returns:
        The spans' texts, stripped, non-empty and distinct, in order of appearance.
    """
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
                span = text[i + 1 : j].strip()
                if span and span not in out:
                    out.append(span)
                i = j + 1
                continue
        i += 1
    return out


def ngram_phrases(text: str, max_n: int = MAX_NGRAM) -> list[str]:
    """List the word n-grams of a text that might name a cell value, as written.

    Args:
        text: a question or its evidence.
        max_n: longest n-gram, in words.

    Returns:
        The n-grams, longest first and then in text order, distinct case-insensitively.
    """
    words = [(m.start(), m.end()) for m in _SPAN_WORD.finditer(text)]
    out: list[str] = []
    seen: set[str] = set()
    for n in range(max_n, 0, -1):
        for i in range(len(words) - n + 1):
            s, e = words[i][0], words[i + n - 1][1]
            span = text[s:e]
            gaps = [text[words[j][1] : words[j + 1][0]] for j in range(i, i + n - 1)]
            if any(g.strip() not in _JOINERS or len(g) > 3 for g in gaps):
                continue  # words joined by an operator, a quote or a sentence mark
            toks = [text[a:b].lower() for a, b in words[i : i + n]]
            if all(t in VALUE_STOP_WORDS or len(t) < 2 for t in toks):
                continue
            if toks[0] in VALUE_STOP_WORDS and n > 1 or toks[-1] in VALUE_STOP_WORDS and n > 1:
                continue  # "of Marvel" adds nothing over "Marvel"
            key = span.lower()
            if key not in seen:
                seen.add(key)
                out.append(span)
    return out


def candidate_phrases(
    question: str, evidence: str | None = None, max_n: int = MAX_NGRAM
) -> list[Phrase]:
    """Collect the phrases to look up in the value index, most specific first: the
    evidence's quoted spans, the question's, the question's n-grams, the evidence's.

    Args:
        question: the question (natural language).
        evidence: BIRD-style external knowledge for the question, or None.
        max_n: longest n-gram, in words.

    Returns:
        ``Phrase`` list, distinct case-insensitively, at most 200 characters each.
    """
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


def visible_matches(schema: Schema, matches: list[ValueMatch]) -> list[ValueMatch]:
    """Drop the matches of row-security tables that no row the role may read holds
    (``catalog.RowCheck``; a no-op when no such table is opted in).

    Args:
        schema: the role's schema (``catalog.load_schema``; its ``row_check``).
        matches: the index's matches.

    Returns:
        The matches the role's own rows hold, in order.
    """
    check = schema.row_check
    if check is None:
        return matches
    return [m for m in matches if check.visible(m.schema, m.table, m.column, [m.value])]


def merge_matches(matches: list[ValueMatch], top_k: int) -> list[ValueMatch]:
    """Merge and rank value matches, one per cell value.

    Args:
        matches: matches from ``match_values``, possibly several per value.
        top_k: most entries to return.

    Returns:
        At most ``top_k`` ``ValueMatch``, one per (schema, table, column, value), best first.
    """

    def key(m: ValueMatch):
        exact = m.how == "exact"
        return (
            0 if exact else 1,
            _SOURCE_RANK.get(m.source, 3) if exact else 0,
            -round(m.score, 4),
            -len(m.phrase),
            _HOW_RANK.get(m.how, 3),
            m.value,
        )

    best: dict[tuple[str, str, str, str], ValueMatch] = {}
    for m in sorted(matches, key=key):
        best.setdefault((m.schema, m.table, m.column, m.value), m)
    return sorted(best.values(), key=key)[:top_k]


def _rows_to_matches(rows, phrases: list[Phrase]) -> list[ValueMatch]:
    return [
        ValueMatch(
            schema=r["schema_name"],
            table=r["table_name"],
            column=r["column_name"],
            value=r["value"],
            score=round(float(r["score"]), 4),
            how=r["how"],
            phrase=phrases[r["i"] - 1].text,
            source=phrases[r["i"] - 1].source,
        )
        for r in rows
    ]


def match_values(
    plpy,
    phrases: list[Phrase],
    *,
    fuzzy: list[int] = (),
    exact: bool = True,
    vectors: dict[int, str] | None = None,
    trgm_min: float = 0.5,
    vector_min: float = 0.8,
    per_phrase: int = 3,
) -> list[ValueMatch]:
    """Look phrases up in the value index as the calling role may see it (OpenSearch-SQL §3.4).

    One statement of ``nl2sql._match_values`` (SECURITY DEFINER, filtered for ``current_user``).

    Args:
        phrases: the candidate phrases (``candidate_phrases``).
        fuzzy: 0-based positions in ``phrases`` to look up by pg_trgm similarity.
        exact: when True, every phrase is looked up by case-insensitive equality (score 1).
        vectors: position -> pgvector text of the phrase's embedding (384 floats); None for none.
        trgm_min: minimum pg_trgm similarity, 0..1.
        vector_min: minimum cosine similarity, 0..1.
        per_phrase: most values per phrase and lookup kind (trigram, vector), best first.

    Returns:
        List of ``ValueMatch``, unmerged; empty when there are no phrases or no lookup.
    """
    vectors = vectors or {}
    if not phrases or not (exact or fuzzy or vectors):
        return []
    texts = [p.text for p in phrases] if exact else None
    fz = set(fuzzy)
    trgm = [p.text if i in fz else None for i, p in enumerate(phrases)] if fz else None
    vecs = (
        (
            "{"
            + ",".join(f'"{vectors[i]}"' if i in vectors else "NULL" for i in range(len(phrases)))
            + "}"
        )
        if vectors
        else None
    )
    rows = spi.query(
        plpy,
        "SELECT how, i, schema_name, table_name, column_name, value, score "
        "FROM nl2sql._match_values(current_user, $1, $2, $3::vector[], $4, $5, $6)",
        [texts, trgm, vecs, float(trgm_min), float(vector_min), int(per_phrase)],
        ["text[]", "text[]", "text", "float8", "float8", "int4"],
    )
    return _rows_to_matches(rows, phrases)


def fuzzy_phrases(
    phrases: list[Phrase], found: list[ValueMatch] = (), schema_words: frozenset[str] = frozenset()
) -> list[int]:
    """Choose the phrases worth a trigram lookup (10-45 ms each at 1,000,000 strings).

    Args:
        phrases: the candidate phrases.
        found: the matches already found for these phrases (``match_values``); empty for none.
        schema_words: lower-cased words of the table and column names (``linking.schema_words``):
            a question n-gram of such words only (and stop words, numbers) names the schema, not
            a value, and is not looked up ("orchestras" scores 0.5 against 'Kirov Orchestra');
            empty: no such rule.

    Returns:
        0-based positions in ``phrases`` of those with 3+ characters that are not evidence n-grams
        and are not left out.
    """
    hit = {
        tuple(_SPAN_WORD.findall(m.phrase.lower()))
        for m in found
        if m.how == "exact" or m.how == "trigram" and m.score >= STRONG_TRIGRAM
    }
    out = []
    for i, p in enumerate(phrases):
        words = tuple(_SPAN_WORD.findall(p.text.lower()))
        if len(p.text) < 3 or p.source == "evidence_ngram":
            continue
        if p.source == "question" and (
            len(words) > MAX_FUZZY_WORDS or schema_words and names_only(words, schema_words)
        ):
            continue
        if words and any(_inside(words, h) for h in hit):
            continue
        if p.source == "question" and any(_straddles(words, h) for h in hit if len(h) > 1):
            continue
        out.append(i)
    return out


def names_only(words: tuple[str, ...] | list[str], schema_words: frozenset[str]) -> bool:
    """Whether a phrase names the schema, not a cell value.

    Args:
        words: the phrase's words, lower-cased.
        schema_words: lower-cased words of the table and column names (``linking.schema_words``).

    Returns:
        True when every word is a schema word (in any inflection), a stop word or a number.
    """
    return all(inflections(w) & schema_words or w in VALUE_STOP_WORDS or w.isdigit() for w in words)


def _straddles(words: tuple, span: tuple) -> bool:
    """Whether ``words`` overlaps ``span`` in part: a head of one is a tail of the other and
    neither lies inside the other (both tuples of words)."""
    if _inside(span, words) or _inside(words, span):
        return False
    n = min(len(words), len(span))
    return any(words[-k:] == span[:k] or words[:k] == span[-k:] for k in range(1, n))


def _inside(words: tuple, outer: tuple) -> bool:
    """Whether ``words`` is a contiguous run of ``outer`` (both tuples of words)."""
    n = len(words)
    return any(outer[j : j + n] == words for j in range(len(outer) - n + 1))


def string_matches(
    plpy, phrases: list[Phrase], trgm_min: float, schema_words: frozenset[str] = frozenset()
) -> list[ValueMatch]:
    """Exact and trigram matches of the phrases, as the calling role may see them.

    Args:
        phrases: the candidate phrases (``candidate_phrases``).
        trgm_min: minimum pg_trgm similarity, 0..1 (setting ``value_trgm_min``).
        schema_words: the schema's name words (``fuzzy_phrases``): question n-grams of these
            only get no trigram lookup; empty: every phrase may.

    Returns:
        List of ``ValueMatch``, unmerged (``merge_matches``).
    """
    found = match_values(plpy, phrases)
    if trgm_min > 1:
        return found
    done: set[int] = set()
    for in_round in (_longest_content, _longest, lambda p: True):
        batch = [
            i
            for i in fuzzy_phrases(phrases, found, schema_words)
            if i not in done and in_round(phrases[i])
        ]
        found = found + _trigram_matches(plpy, phrases, batch, trgm_min)
        done.update(batch)
    return found


def _trigram_matches(
    plpy, phrases: list[Phrase], fuzzy: list[int], trgm_min: float
) -> list[ValueMatch]:
    """``match_values`` by trigrams only, for the phrases at positions ``fuzzy``; no query
    when there are none."""
    if not fuzzy:
        return []
    return match_values(plpy, phrases, fuzzy=fuzzy, exact=False, trgm_min=trgm_min)


def _longest(p: Phrase) -> bool:
    """Whether ``p`` is a quoted or evidence span, or a question n-gram of ``MAX_FUZZY_WORDS``
    words."""
    return p.source != "question" or len(_SPAN_WORD.findall(p.text)) >= MAX_FUZZY_WORDS


def _longest_content(p: Phrase) -> bool:
    """Whether ``p`` is ``_longest`` and, if a question n-gram, has no stop word."""
    return _longest(p) and (
        p.source != "question"
        or not any(w.lower() in VALUE_STOP_WORDS for w in _SPAN_WORD.findall(p.text))
    )


def vector_phrases(
    phrases: list[Phrase], found: list[ValueMatch], schema_words: frozenset[str], limit: int
) -> list[int]:
    """Choose the phrases that get an embedding lookup (paraphrases: "USA" → 'United States').

    Args:
        phrases: the candidate phrases.
        found: the matches already found (exact and trigram).
        schema_words: lower-cased words of the table and column names (``linking.schema_words``).
        limit: most phrases to choose; 0 or less chooses none.

    Returns:
        0-based positions in ``phrases``, at most ``limit``.
    """
    if limit <= 0:
        return []
    hit = {m.phrase.lower() for m in found}
    out: list[int] = []
    for i in sorted(
        fuzzy_phrases(phrases, found), key=lambda i: (_SOURCE_RANK.get(phrases[i].source, 3), i)
    ):
        text = phrases[i].text
        words = [w.lower() for w in _SPAN_WORD.findall(text)]
        if not words or len(words) > 3 or text.lower() in hit:
            continue
        if any(text.lower() in h for h in hit):
            continue  # "Marvel" inside the matched "Marvel Comics"
        if names_only(words, schema_words):
            continue
        out.append(i)
        if len(out) >= limit:
            break
    return out
