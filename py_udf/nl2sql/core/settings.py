"""Settings: declared once in ``SETTINGS``, read typed (docs/internals/core.md); light imports."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterable, Mapping

from . import spi
from ._setting_declaration import GENERATION, Setting, shown
from ._setting_declaration import enum_setting as _enum
from ._setting_declaration import unit_setting as _unit
from .errors import ConfigError

__all__ = ["BY_NAME", "SETTINGS", "Settings", "default_settings", "get_settings", "lookup"]
__all__ += ["settings_from_texts", "validate_setting"]


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "k_examples",
        "int",
        9,
        "examples retrieved by masked-question similarity (PET-SQL uses 9)",
        minimum=0,
    ),
    _enum(
        "examples_when",
        ("auto", "always", "on_failure"),
        "`always`: the retrieved examples are in the first prompt; `on_failure`: the first "
        "prompt holds none (a local server's prompt cache then keeps all of it but the "
        "question) and the repair of a failed candidate adds them; `auto`: `on_failure` when "
        "every model is served by llama.cpp or Ollama (their window read from the server), "
        "else `always` (docs/models.md)",
    ),
    Setting(
        "candidate_timeout_ms",
        "int",
        5000,
        "wall-clock limit per candidate execution (ms)",
        minimum=1,
    ),
    Setting("max_rows", "int", 10000, "rows fetched per candidate for voting", minimum=1),
    Setting(
        "max_result_bytes",
        "int",
        50_000_000,
        "bytes of row_to_json text fetched per candidate (and by `nl2sql.ask`); a larger "
        'result is abandoned in the database and the candidate refused ("Safety")',
        minimum=1,
    ),
    Setting(
        "max_plan_cost",
        "float",
        100_000_000.0,
        "a candidate whose planner estimate (EXPLAIN total cost) is higher is refused before "
        "it runs; 0: no limit (docs/guardrails.md)",
        minimum=0,
    ),
    Setting(
        "max_plan_rows",
        "float",
        1_000_000_000.0,
        "a candidate whose planner estimate of its rows is higher is refused before it runs; "
        "0: no limit (docs/guardrails.md)",
        minimum=0,
    ),
    Setting("schemas", "list", ("public",), "comma-separated schemas `reindex()` covers"),
    Setting("sample_values", "int", 3, "cell values per column shown in the prompt", minimum=0),
    Setting(
        "presql_votes",
        "bool",
        False,
        'the PreSQL is a candidate too (no gain in the replay: "Generation and selection")',
    ),
    Setting("question_max_chars", "int", 4000, "longer questions are refused", minimum=1),
    Setting("request_expire_s", "int", 600, "seconds an unanswered request lives", minimum=1),
    Setting("request_time_limit_s", "int", 120, "seconds the worker gives one request", minimum=1),
    Setting("request_rows", "int", 1000, "rows of an answer kept for `nl2sql.answer()`", minimum=0),
    Setting(
        "values_per_column",
        "int",
        100_000,
        "distinct string values indexed per column; a column with more is partially "
        'indexed: its most frequent values (see "Indexing")',
        minimum=0,
    ),
    Setting(
        "value_sample_rows",
        "int",
        1_000_000,
        "a table with more rows (statistics estimate) reads a string column with more "
        "distinct values than `values_per_column` (or no statistics) from a block sample "
        'of about this many rows, plus its pg_stats most common values ("Indexing")',
        minimum=1000,
    ),
    Setting("value_max_chars", "int", 200, "longer strings are not indexed", minimum=0),
    Setting(
        "reindex_part_rows",
        "int",
        100_000,
        "`--jobs N` queues a table of at least this many rows (estimate) as N parts, each "
        'worker embedding a share of its values (docs/indexing.md "Several workers")',
        minimum=1,
    ),
    Setting(
        "llm_timeout_s",
        "float",
        60,  # not 60.0: the stored default text stays '60' (parsed as the float 60.0)
        "model call timeout (seconds) when the model has no `timeout_s`",
        minimum=0,
        minimum_exclusive=True,
    ),
    Setting(
        "llm_max_retries",
        "int",
        2,
        "retries (exponential backoff, Retry-After honoured) on HTTP 408/409/429/5xx and "
        "connection errors, by the openai client",
        minimum=0,
        maximum=10,
    ),
    Setting(
        "llm_reasoning_max_tokens",
        "int",
        8192,
        "output cap of a model that thinks before answering (known from its name, given a "
        "`reasoning_effort`, or learned from a reply cut while thinking) when `add_model` sets "
        "none; the thinking and the SQL share it (docs/models.md)",
        minimum=256,
    ),
    Setting(
        "llm_max_output_tokens",
        "int",
        32768,
        "the most the output cap is raised to when a reply is cut by it (`finish_reason` "
        "length) before any answer: one retry per call, remembered for the model",
        minimum=256,
    ),
    Setting(
        "send_values",
        "bool",
        True,
        "`off`: no cell value (sample values, indexed values) reaches any prompt",
    ),
    _enum(
        "agent_values",
        ("gated", "role"),
        "what nl2sql-mcp and `connect(for_model=True)` hand an agent: `gated`: prompts' value "
        "rules apply (docs/mcp.md); `role`: all the role may read",
    ),
    # embeddings (docs/operations.md "The shared embedder")
    _enum(
        "embedder",
        ("shared", "local"),
        "`shared`: backends ask the server's one embedding process (started by the first "
        "backend that needs it; in-process ONNX Runtime when it is unavailable); `local`: "
        "each backend loads the model itself",
    ),
    Setting("embedding_model", "str", "local", "`local` or a row of nl2sql.embedding_model"),
    _enum(
        "embedding_precision",
        ("fp32", "int8"),
        "`int8`: the embedding model quantized per channel, 2x faster, its vectors close to "
        "`fp32`'s (docs/benchmarks.md); a change needs `nl2sql.reindex(force => true)`",
    ),
    _enum(
        "value_embedding",
        ("model", "static"),
        "cell values' vectors: `model` or `static` (its tokens distilled: 30x faster to index, "
        "misses abbreviations; docs/embedding-models.md); a change needs a forced reindex",
    ),
    *GENERATION,  # generation and selection (docs/pipeline.md "Generation and selection")
    # retrieval and schema linking (docs/pipeline.md "Retrieval and schema linking")
    Setting(
        "value_top_k",
        "int",
        10,
        "cell values retrieved per question (shown in the prompts, used for masking and linking)",
        minimum=0,
    ),
    _unit(
        "value_trgm_min",
        0.5,
        "pg_trgm `similarity(value, phrase)` a value needs to match a question phrase",
    ),
    _unit(
        "value_vector_min",
        0.8,
        "cosine similarity of value and phrase embeddings a value needs to match (1 turns "
        "vector matching off)",
    ),
    Setting(
        "value_vector_phrases",
        "int",
        8,
        "at most this many question phrases get an embedding lookup: those no value "
        "matched exactly or by trigram, not made only of schema or stop words (0 turns it "
        "off)",
        minimum=0,
    ),
    _unit(
        "link_value_min",
        0.9,
        "score a non-exact value match needs to link its column (exact matches always link)",
    ),
    _unit(
        "link_column_min",
        0.7,
        "question/column embedding similarity that links a column and its table",
    ),
    _unit(
        "dail_tau",
        0.6,
        "DAIL selection: Jaccard similarity of an example's SQL skeleton with PreSQL's that "
        "keeps it",
    ),
    Setting(
        "dail_candidates",
        "int",
        50,
        "examples (nearest by masked question) that DAIL selection re-ranks",
        minimum=0,
    ),
    Setting(
        "prompt_token_budget",
        "int",
        3000,
        "when the PreSQL prompt with the whole schema would exceed this many estimated "
        "tokens, it gets a pruned schema",
        minimum=500,
    ),
    # curated knowledge (docs/curated.md)
    _unit(
        "verified_min_similarity",
        0.93,
        "masked-question similarity a verified query or template needs to answer a question "
        "without a model call (its values must also bind); 1 answers only identical masked "
        "questions",
    ),
    Setting(
        "verified_examples",
        "int",
        3,
        "verified queries nearest to the question shown first among the few-shot examples",
        minimum=0,
    ),
    Setting(
        "term_top_k",
        "int",
        5,
        "business terms per question: those it names, then the most similar ones",
        minimum=0,
    ),
    _unit(
        "term_min_similarity",
        0.55,
        "question/term embedding similarity a term the question does not name needs",
    ),
    Setting(
        "instruction_top_k",
        "int",
        5,
        "database-wide instructions per question, the most similar first",
        minimum=0,
    ),
    # the semantic model (docs/semantic-model.md)
    Setting(
        "semantic_model_max_bytes",
        "int",
        1_048_576,
        "largest semantic model text nl2sql.import_semantic_model reads (bytes, UTF-8); a "
        "larger one is refused before it is parsed",
        minimum=1024,
    ),
    Setting(  # docs/operations.md "The query log"
        "query_log_retention_days",
        "int",
        30,
        "days a `nl2sql.query_log` row is kept; `reindex()` and `nl2sql.prune_query_log()` "
        "delete older ones; 0 keeps every row",
        minimum=0,
    ),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
if len(BY_NAME) != len(SETTINGS):
    raise ConfigError("nl2sql.settings: a setting is declared twice")

Settings = dataclasses.make_dataclass(
    "Settings", [(s.name, s.python_type) for s in SETTINGS], frozen=True
)
Settings.__module__ = __name__
Settings.__doc__ = "Every setting's effective value, typed: the stored one or the default."


def lookup(key: str) -> Setting:
    """Look up the declaration of one setting.

    Args:
        key: a setting name, e.g. ``'k_examples'``.

    Returns:
        Its ``Setting``.

    Raises:
        ConfigError: for an unknown name, listing the close names (if any) and every setting.
    """
    if key in BY_NAME:
        return BY_NAME[key]
    close = difflib.get_close_matches(str(key)[:200], list(BY_NAME), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise ConfigError(
        f"unknown setting {shown(key)}{hint} (known settings: {', '.join(sorted(BY_NAME))})"
    )


def settings_from_texts(texts: Mapping[str, str] | Iterable[tuple[str, str]]) -> Settings:
    """Build the typed settings from stored texts; a setting without text has its default.

    Args:
        texts: ``{name: text}`` (or (name, text) pairs), e.g. the rows of ``nl2sql.setting``.
            Names that are not declared settings are ignored.

    Returns:
        A ``Settings``.

    Raises:
        ConfigError: when a stored text does not parse, naming the setting and the value.
    """
    given = dict(texts.items() if isinstance(texts, Mapping) else texts)
    values = {}
    for s in SETTINGS:
        text = s.default_text if given.get(s.name) is None else given[s.name]
        try:
            values[s.name] = s.parse(text)
        except ConfigError as e:
            raise ConfigError(
                f"{e} (stored in nl2sql.setting; fix it with "
                f"SELECT nl2sql.set_setting('{s.name}', '...'))"
            ) from None
    return Settings(**values)


def default_settings() -> Settings:
    """Return every setting at its declared default.

    Returns:
        A ``Settings``.
    """
    return settings_from_texts({})


def get_settings(plpy) -> Settings:
    """Read the effective settings: a row of ``nl2sql.setting`` where a user set one, else the default.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        A ``Settings`` (typed attributes, e.g. ``st.k_examples`` is an int).

    Raises:
        ConfigError: when a stored value does not parse.
    """
    rows = spi.query(plpy, "SELECT key, value FROM nl2sql.setting")
    return settings_from_texts((r["key"], r["value"]) for r in rows)


def validate_setting(key: str, value: str) -> str:
    """Check one setting's value for ``nl2sql.set_setting``.

    Args:
        key: the setting's name.
        value: the text given.

    Returns:
        The value in its stored form (e.g. ``' 2 '`` → ``'2'``, ``'False'`` → ``'off'``).

    Raises:
        ConfigError: an unknown key (close names listed), a value that does not parse or fit.
    """
    return lookup(key).normalize(value)
