"""What a question names that its masked embedding weighs little (docs/internals/curated.md,
"When a verified query answers")."""

from __future__ import annotations

import re

from ..core.types import Schema
from ..linking.schema_linking import linking_values, schema_words
from ..model.masking import STOP_WORDS, inflections, tokenize

# Words that change what a question asks but weigh little in the embedding of its masked form;
# a question and a verified question must use the same ones ("not" is also found in "n't").
MEANING_WORDS = frozenset(
    (
        "not no never without except excluding exclude outside none neither nor more less fewer "
        "greater smaller higher lower larger bigger older younger newer earlier later before "
        "after above below over under between most least highest lowest largest smallest "
        "biggest oldest youngest newest latest earliest first last top bottom max min maximum "
        "minimum average avg mean median total sum count distinct unique different each per "
        "every ascending descending percentage percent ratio proportion share"
    ).split()
)
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")
# Words that relate a table's rows to a cell value without changing what is asked: "live in",
# "are there in", "come from", "based in" (docs/internals/curated.md, "Other words"). Words of
# direction (to, into, by, for), of question form (how many, which, list) and every other verb
# are not among them.
LIGHT_WORDS = frozenset(
    (
        "a an the of in on at from is are was were be been being am do does did there here we "
        "you i our us have has had live lives living lived reside resides residing resided come "
        "comes coming came located based situated exist exists existing currently please"
    ).split()
)


def strong_values(values: list, schema: Schema, value_min: float) -> dict[str, list]:
    """The question's cell values that bind: those that would link their column
    (``linking.linking_values``), of the question only (not the evidence).

    Args:
        values: ``values.ValueMatch`` list of the question.
        schema: the schema the role may read.
        value_min: setting ``link_value_min``.

    Returns:
        phrase -> its matches (best first), phrases in the order of ``values``.
    """
    out: dict[str, list] = {}
    for v in linking_values(schema, values, value_min):
        if v.source in ("question", "quoted"):
            out.setdefault(v.phrase, []).append(v)
    return out


def _without(text: str, phrases: list[str]) -> str:
    for p in sorted(phrases, key=len, reverse=True):
        if p:
            text = re.sub(re.escape(p), " ", text, flags=re.IGNORECASE)
    return text


def question_numbers(question: str, skip: list[str]) -> list[str]:
    """The numbers a question writes, in order, outside the phrases ``skip``.

    Args:
        question: the question (template markers already replaced).
        skip: phrases to leave out (cell values and terms, which may hold digits).

    Returns:
        Number texts (``40``, ``4.5``), in order.
    """
    return NUMBER.findall(_without(question, skip))


def name_words(question: str, schema: Schema, skip: list[str]) -> set[str]:
    """The schema words a question names outside ``skip``, each as its shortest form.

    Args:
        question: the question.
        schema: the schema the role may read.
        skip: phrases to leave out (cell values, terms, template markers).

    Returns:
        Lower-cased words of table or column names (any singular/plural form), stop words
        excluded.
    """
    words = schema_words(schema)
    out: set[str] = set()
    for t in tokenize(_without(question, skip)):
        low = t.lower()
        if not low[0].isalnum() or low in STOP_WORDS:
            continue
        forms = inflections(low) & words
        if forms:
            out.add(min(forms, key=lambda f: (len(f), f)))
    return out


def meaning_words(question: str) -> set[str]:
    """The words of ``MEANING_WORDS`` a question uses (``n't`` counts as ``not``).

    Args:
        question: the question.

    Returns:
        The words, lower-cased.
    """
    out = set()
    for t in tokenize(question):
        low = t.lower()
        if low.endswith("n't"):
            out.add("not")
        elif low in MEANING_WORDS:
            out.add(low)
    return out


def phrase_position(question: str, phrase: str) -> int:
    """Where ``phrase`` first occurs in ``question``, case-insensitively.

    Args:
        question: the question.
        phrase: a phrase of it.

    Returns:
        The character offset; ``len(question)`` when it does not occur.
    """
    i = question.lower().find(phrase.lower())
    return i if i >= 0 else len(question)


def other_words(question: str, schema: Schema, skip: list[str]) -> set[str]:
    """The words of a question that no other fast-path rule compares: not a schema word, a
    ``skip`` phrase, a number, a word of ``MEANING_WORDS`` or of ``LIGHT_WORDS``.

    Args:
        question: the question (template markers already replaced).
        schema: the schema the role may read.
        skip: phrases to leave out (cell values and terms).

    Returns:
        Lower-cased words, each as its shortest singular/plural form (``n't`` dropped: the
        negation is a meaning word).
    """
    words = schema_words(schema)
    out: set[str] = set()
    for t in tokenize(_without(question, skip)):
        low = t.lower()
        low = low[:-3] if low.endswith("n't") else low
        if not low or not low[0].isalpha() or low in LIGHT_WORDS or low in MEANING_WORDS:
            continue
        forms = inflections(low)
        if not forms & words:
            out.add(min(forms, key=lambda f: (len(f), f)))
    return out
