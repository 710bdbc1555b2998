"""Masked question: schema names and cell values replaced by ``<mask>``. Source: PET-SQL (Li
et al. 2024) §3.2; DAIL-SQL (Gao et al. 2023) §3.3."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

MASK = "<mask>"

# A word is a run of letters or digits in any script ("Sängerinnen", "Zürich" stay whole), else
# one other visible character; ASCII-only classes split German words (bench/multilingual.py).
_WORD = re.compile(r"[^\W_]+(?:'[^\W\d_]+)?|\S")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# Words that are no content on their own: left out of a name's single-word phrases here, of a
# literal's words (example_pool), of value phrases (values) and of schema words (curated).
STOP_WORDS = frozenset(
    "a an the of in on at to for by with and or is are was were be id name names number what "
    "which who how many much all each list show give find count year type".split()
)


def name_words(identifier: str) -> list[str]:
    """Split an identifier into lower-cased words (on ``_``, ``.``, whitespace, camelCase).

    Args:
        identifier: a table or column name, unquoted (``songReleaseYear``).

    Returns:
        The words in order, without empty parts (``["song", "release", "year"]``).
    """
    parts = re.split(r"[_.\s]+", _CAMEL.sub(" ", identifier))
    return [p.lower() for p in parts if p]


def inflections(word: str) -> set[str]:
    """Give a word with its simple English singular/plural variants (rules, no dictionary).

    Args:
        word: one word, any case.

    Returns:
        Set of lower-cased forms, the word itself included (city -> city, cities).
    """
    w = word.lower()
    forms = {w}
    if w.endswith("ies") and len(w) > 4:
        forms.add(w[:-3] + "y")
    elif w.endswith("es") and len(w) > 3 and w[-3] in "sxz":
        forms.add(w[:-2])
    elif w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        forms.add(w[:-1])
    if w.endswith("y") and len(w) > 2 and w[-2] not in "aeiou":
        forms.add(w[:-1] + "ies")
    elif w.endswith(("s", "x", "z", "ch", "sh")):
        forms.add(w + "es")
    else:
        forms.add(w + "s")
    return forms


@lru_cache(maxsize=65536)
def _phrases_for(identifier: str) -> frozenset[tuple[str, ...]]:
    words = name_words(identifier)
    if not words:
        return frozenset()
    out: set[tuple[str, ...]] = set()
    # the whole name, last word inflected ("song release years")
    for form in inflections(words[-1]):
        out.add(tuple(words[:-1] + [form]))
    # every single content word of the name ("release", "song")
    for w in words:
        if w not in STOP_WORDS and len(w) > 2:
            out.update((f,) for f in inflections(w))
    return frozenset(out)


@lru_cache(maxsize=16)
def _name_phrases(names: tuple[str, ...]) -> frozenset[tuple[str, ...]]:
    """Every phrase of every name (cached: a backend asks about the same schema again)."""
    out: set[tuple[str, ...]] = set()
    for n in names:
        out |= _phrases_for(n)
    return frozenset(out)


def tokenize(text: str) -> list[str]:
    """Split a question into words and punctuation marks.

    Args:
        text: the question (natural language).

    Returns:
        Tokens in order: words of letters or digits in any script (``'s`` suffix kept;
        ``Sängerinnen`` is one word) and single non-space, non-alphanumeric characters.
    """
    return _WORD.findall(text)


def mask_question(question: str, names: Iterable[str] = (), values: Iterable[str] = ()) -> str:
    """Mask a question: schema names and cell values replaced by ``<mask>`` (DAIL-SQL §3.3).

    Args:
        question: the question (natural language).
        names: table and column identifiers; each matches as its whole word sequence (last word
            singular or plural) or by any content word of 3+ letters (not a ``STOP_WORDS`` word).
        values: cell values known to occur in the question, or the phrases that matched them.

    Returns:
        The masked question as space-joined tokens, e.g. ``How many <mask> are from <mask> ?``.
    """
    tokens = tokenize(question)
    lower = [t.lower() for t in tokens]
    masked = [False] * len(tokens)

    value_phrases: set[tuple[str, ...]] = set()
    for v in values:
        vt = tuple(t.lower() for t in tokenize(str(v)))
        if vt:
            value_phrases.add(vt)
    name_phrases = _name_phrases(tuple(names))

    for phrases in (value_phrases, name_phrases):
        # longest phrases first; one set lookup per position and length (a schema of thousands
        # of columns has tens of thousands of name phrases)
        for n in range(min(len(tokens), 8), 0, -1):  # names and values of up to 8 words
            for i in range(len(tokens) - n + 1):
                if not any(masked[i : i + n]) and tuple(lower[i : i + n]) in phrases:
                    for j in range(i, i + n):
                        masked[j] = True
    # quoted spans and numbers are values too
    out: list[str] = []
    in_quote = False
    for tok, m in zip(tokens, masked):
        if tok in {'"', "'"}:
            in_quote = not in_quote
            continue
        if m or in_quote or tok.isdigit():
            if not out or out[-1] != MASK:
                out.append(MASK)
        else:
            out.append(tok)
    return " ".join(out)


def masked_question(
    question: str, schema, values, value_min: float, extra: Iterable[str] = ()
) -> str:
    """The masked question the pipeline retrieves with: schema names, the question's matched
    value phrases (embedding matches only at ≥ ``value_min``) and ``extra`` phrases masked.

    Args:
        question: the question (natural language).
        schema: the ``types.Schema`` the role may read.
        values: ``values.ValueMatch`` list.
        value_min: the least score of an embedding match that masks its phrase.
        extra: further phrases to mask (business terms as they occur in the question).

    Returns:
        The masked question (``mask_question``'s form).
    """
    names = [tb.table for tb in schema.tables] + [
        c.name for tb in schema.tables for c in tb.columns
    ]
    strong = [
        v.phrase
        for v in values
        if v.source in ("question", "quoted")
        and (v.how in ("exact", "trigram") or v.score >= value_min)
    ]
    return mask_question(question, names=names, values=[*strong, *extra])


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
