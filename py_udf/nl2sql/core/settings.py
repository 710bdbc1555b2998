"""Settings (table ``nl2sql.setting``) and model configuration (table ``nl2sql.model``).

Every setting is declared once, in ``SETTINGS``: its name, type, default, bounds and meaning.
From that declaration come the typed ``Settings`` object the pipeline reads
(``get_settings(plpy).k_examples`` is an int), the validation of ``nl2sql.set_setting``, the
settings table of docs/settings.md (``python -m nl2sql.core.settings --markdown``) and the
``VALUES`` list the build script turns into the ``nl2sql.settings`` view (``sql_values()``).

The table ``nl2sql.setting`` holds only the values a user set; a setting without a row has its
declared default.

This module imports only the standard library and the package's light modules (errors, spi,
types): the build script imports it to generate SQL.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import spi
from .errors import ConfigError
from .types import ModelConfig

__all__ = [
    "ConfigError",
    "HARDNESS_LEVELS",
    "SETTINGS",
    "Setting",
    "Settings",
    "TYPES",
    "default_settings",
    "get_models",
    "get_settings",
    "lookup",
    "markdown_table",
    "parse_hardness_voters",
    "settings_from_texts",
    "sql_values",
    "validate_setting",
]

# The kinds a setting can have; the Python type of its value in ``Settings``.
TYPES: dict[str, type] = {
    "int": int,
    "float": float,
    "bool": bool,  # text 'on'/'off' ('true'/'false' accepted on input)
    "str": str,
    "enum": str,  # one of ``choices``
    "json": dict,  # hardness_voters: {level: [model names]}
    "list": tuple,  # comma-separated names, e.g. schemas
}

HARDNESS_LEVELS = ("easy", "medium", "hard", "extra")

_TRUE = {"on", "true"}
_FALSE = {"off", "false"}


def parse_hardness_voters(value: str) -> dict[str, list[str]]:
    """Parse the ``hardness_voters`` setting: which models vote at each hardness level.

    Source: PET-SQL (Li et al. 2024) §3.4, fine-grained voting by question hardness.

    Args:
        value: a JSON object mapping hardness levels to lists of model names, e.g.
            ``{"easy": ["a"], "extra": ["a", "b", "c"]}``; empty or ``off`` means no routing.

    Returns:
        ``{level: [model names]}`` (duplicates removed, order kept); ``{}`` for no routing.

    Raises:
        ConfigError: naming the bad key or value (not JSON, not an object, unknown level, a level
            without a non-empty list of names).
    """
    v = (value or "").strip()
    if not v or v.lower() == "off":
        return {}
    try:
        obj = json.loads(v)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f'not JSON ({e.msg}); expected e.g. {{"easy": ["m1"], "hard": ["m1", "m2", "m3"]}}'
        ) from None
    if not isinstance(obj, dict):
        raise ConfigError("expected a JSON object mapping easy/medium/hard/extra to model names")
    out: dict[str, list[str]] = {}
    for k, names in obj.items():
        if k not in HARDNESS_LEVELS:
            raise ConfigError(
                f"unknown hardness level {k!r}; levels are {', '.join(HARDNESS_LEVELS)}"
            )
        if (
            not isinstance(names, list)
            or not names
            or not all(isinstance(n, str) and n for n in names)
        ):
            raise ConfigError(f"hardness level {k!r} must map to a non-empty list of model names")
        out[k] = list(dict.fromkeys(names))
    return out


def _num(x: float) -> str:
    """A bound as text: 1 rather than 1.0."""
    return f"{x:g}"


@dataclass(frozen=True)
class Setting:
    """One setting's declaration: its name, kind, typed default, meaning and bounds.

    Attributes:
        name: the setting's key in ``nl2sql.setting``.
        type: its kind, a key of ``TYPES`` (``int``, ``float``, ``bool``, ``str``, ``enum``,
            ``json``, ``list``).
        default: the typed default value.
        meaning: what it does, in words (the docs/settings.md table's column).
        minimum: lower bound of an int or float setting (inclusive unless
            ``minimum_exclusive``), or None.
        maximum: upper bound of an int or float setting (inclusive), or None.
        choices: the values of an enum setting (lower case), or None.
        minimum_exclusive: True when ``minimum`` itself is not allowed.

    Raises:
        ConfigError: (on construction) an unknown ``type``, or ``choices`` without type enum
            or type enum without ``choices``.
    """

    name: str
    type: str
    default: Any
    meaning: str
    minimum_exclusive: bool = False
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ConfigError(f"setting {self.name!r}: unknown type {self.type!r}")
        if (self.type == "enum") != bool(self.choices):
            raise ConfigError(f"setting {self.name!r}: choices go with type enum only")

    @property
    def default_text(self) -> str:
        """Return the default as the text ``nl2sql.setting`` stores (``'9'``, ``'off'``, ``''``)."""
        return self.format(self.default)

    @property
    def python_type(self) -> type:
        """Return the Python type of this setting's value in ``Settings`` (``TYPES[type]``)."""
        return TYPES[self.type]

    def allowed(self) -> str:
        """Describe the values this setting accepts, in words (errors, the docs/settings.md table).

        Returns:
            e.g. ``'an integer from 0 to 3'``, ``'a number > 0'``, ``'on or off'``.
        """
        if self.type in ("int", "float"):
            what = "an integer" if self.type == "int" else "a number"
            lo, hi = self.minimum, self.maximum
            if lo is not None and hi is not None:
                return f"{what} from {_num(lo)} to {_num(hi)}"
            if lo is not None:
                return f"{what} {'>' if self.minimum_exclusive else '>='} {_num(lo)}"
            if hi is not None:
                return f"{what} <= {_num(hi)}"
            return what
        if self.type == "bool":
            return "on or off"
        if self.type == "enum":
            return " or ".join(self.choices or ())
        if self.type == "json":
            return (
                "a JSON object mapping "
                + "/".join(HARDNESS_LEVELS)
                + " to lists of model names, or empty"
            )
        if self.type == "list":
            return "comma-separated names, at least one"
        return "any text"

    def _bad(self, value: object) -> ConfigError:
        """A ConfigError naming this setting, the bad value and what is allowed."""
        return ConfigError(f"setting {self.name!r} must be {self.allowed()}, got {value!r}")

    def _check_bounds(self, n: float, given: str) -> None:
        """Raise ConfigError when ``n`` is outside this setting's bounds."""
        lo, hi = self.minimum, self.maximum
        if (
            n != n
            or (lo is not None and (n <= lo if self.minimum_exclusive else n < lo))
            or (hi is not None and n > hi)
        ):
            raise self._bad(given)

    def parse(self, text: str | None) -> Any:
        """Parse a setting's text into its typed value (surrounding whitespace ignored).

        Args:
            text: the setting's text, as ``nl2sql.set_setting`` receives it or the table
                stores it.

        Returns:
            int, float, bool, str (str and enum settings; enums lower-cased), dict
            (hardness_voters) or tuple of str (schemas).

        Raises:
            ConfigError: naming the setting, the bad value and the allowed values or range.
        """
        v = (text or "").strip()
        if self.type in ("int", "float"):
            try:
                number = (int if self.type == "int" else float)(v)
            except ValueError:
                raise self._bad(text) from None
            self._check_bounds(number, v)
            return number
        if self.type == "bool":
            if v.lower() in _TRUE:
                return True
            if v.lower() in _FALSE:
                return False
            raise self._bad(text)
        if self.type == "enum":
            if v.lower() not in (self.choices or ()):
                raise self._bad(text)
            return v.lower()
        if self.type == "json":
            try:
                return parse_hardness_voters(v)
            except ValueError as e:
                raise ConfigError(f"setting {self.name!r}: {e} (got {text!r})") from None
        if self.type == "list":
            names = tuple(p.strip() for p in v.split(",") if p.strip())
            if not names:
                raise self._bad(text)
            return names
        return v

    def format(self, value: Any) -> str:
        """Format a typed value as the text ``nl2sql.setting`` stores (``parse``'s inverse).

        Args:
            value: a value of this setting's type.

        Returns:
            e.g. ``'9'``, ``'0.7'``, ``'on'``, ``'a,b'``, ``'{"easy": ["m"]}'`` (``''`` for no
            hardness routing).
        """
        if self.type == "bool":
            return "on" if value else "off"
        if self.type == "json":
            return json.dumps(value) if value else ""
        if self.type == "list":
            return ",".join(value)
        return str(value)

    def normalize(self, text: str | None) -> str:
        """Check a text and return it in its stored form (``format(parse(text))``).

        Args:
            text: a value as a user gives it, e.g. ``' 2 '`` or ``'False'``.

        Returns:
            The normalized text, e.g. ``'2'`` or ``'off'``.

        Raises:
            ConfigError: as ``parse``.
        """
        return self.format(self.parse(text))


def _unit(name: str, default: float, meaning: str) -> Setting:
    """A similarity/threshold setting in 0..1."""
    return Setting(name, "float", default, meaning, minimum=0, maximum=1)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "k_examples",
        "int",
        9,
        "examples retrieved by masked-question similarity (PET-SQL uses 9)",
        minimum=0,
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
        "schemas", "list", ("public",), "comma-separated schemas `reindex()` covers by default"
    ),
    Setting("sample_values", "int", 3, "cell values per column shown in the prompt", minimum=0),
    Setting(
        "presql_votes",
        "bool",
        False,
        "the PreSQL is a candidate too (it then counts twice for the first model; no gain "
        'in the replay, see "Generation and selection")',
    ),
    Setting("question_max_chars", "int", 4000, "longer questions are refused", minimum=1),
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
    # 60, not 60.0: the stored default text stays '60' (parsed as the float 60.0)
    Setting(
        "llm_timeout_s",
        "float",
        60,
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
        "send_values",
        "bool",
        True,
        "`off`: no cell value (sample values, indexed values) reaches any prompt",
    ),
    # embeddings (README "Shared embedder")
    Setting(
        "embedder",
        "enum",
        "shared",
        "`shared`: backends ask the server's one embedding process (started by the first "
        "backend that needs it; in-process ONNX Runtime when it is unavailable); `local`: "
        "each backend loads the model itself",
        choices=("shared", "local"),
    ),
    # generation and selection (README "Generation and selection")
    Setting(
        "prompt_variants",
        "int",
        1,
        'FinSQL prompts per model (MCS-SQL multiple prompts); see "Generation and selection"',
        minimum=1,
        maximum=8,
    ),
    Setting(
        "samples_per_model",
        "int",
        1,
        "samples per prompt and model, one request with `n` (self-consistency)",
        minimum=1,
        maximum=16,
    ),
    Setting(
        "sample_temperature",
        "float",
        1.0,
        "temperature of those samples for a model configured at temperature 0",
        minimum=0,
        maximum=2,
    ),
    Setting(
        "repair_rounds",
        "int",
        3,
        "repair rounds for failing or empty candidates (ReBoost)",
        minimum=0,
        maximum=3,
    ),
    Setting(
        "value_alignment",
        "bool",
        True,
        "string literals compared with a column are snapped to its indexed cell values",
    ),
    _unit("align_min_trigram", 0.4, "minimum pg_trgm similarity for value alignment"),
    _unit(
        "align_min_cosine",
        0.8,
        "minimum embedding cosine similarity for value alignment (tried after trigrams)",
    ),
    _unit(
        "confidence_threshold",
        0.2,
        "result groups with a smaller share of the executed candidates are dropped (MCS-SQL)",
    ),
    Setting(
        "tie_break",
        "enum",
        "fastest",
        "equal-size groups: `fastest` execution (times within max(0.5 ms, 10 %) of the "
        "fastest count as equal, and priority decides among those, so that the same "
        "candidates always give the same answer), or `priority` (group holding the "
        "highest-priority model)",
        choices=("fastest", "priority"),
    ),
    Setting(
        "selection",
        "enum",
        "majority",
        "`majority`, or `multiple_choice` (a model picks among the remaining groups)",
        choices=("majority", "multiple_choice"),
    ),
    Setting(
        "selection_model",
        "str",
        "",
        "model for multiple-choice selection; empty = the PreSQL writer",
    ),
    _unit(
        "abstain_below",
        0,
        "clarify or abstain: when the chosen group's confidence is below this, `nl2sql()` "
        "raises a message listing the competing readings instead of answering (0 = off)",
    ),
    Setting(
        "abstain_readings",
        "int",
        3,
        "readings (top result groups) an abstention lists, each with its SQL and first rows",
        minimum=1,
        maximum=10,
    ),
    Setting(
        "conversation_turns",
        "int",
        5,
        "earlier turns of a conversation (their questions and chosen SQL) shown in the "
        "prompts of a follow-up question",
        minimum=0,
        maximum=50,
    ),
    Setting(
        "narrate_model",
        "str",
        "",
        "model that writes `nl2sql.narrate` answers; empty = the first configured model "
        "(the PreSQL writer)",
    ),
    Setting(
        "narrate_rows",
        "int",
        20,
        "first rows of the chosen SQL that `nl2sql.narrate` shows the model",
        minimum=1,
        maximum=1000,
    ),
    Setting(
        "hardness_voters",
        "json",
        {},
        'PET-SQL fine-grained voting: JSON `{"easy": [models], "medium": …, "hard": …, '
        '"extra": …}`; empty = every model votes',
    ),
    Setting(
        "reliability_vote",
        "bool",
        True,
        "the vote weights each model by the reliability `nl2sql.calibrate()` learned from "
        "judged answers (and, when `hardness_voters` is empty, lets the learned voter sets "
        "vote); nothing calibrated, or `off`: plain majority",
    ),
    Setting(
        "rewrite_time",
        "bool",
        True,
        'relative time in the question ("this month", "today", "currently") made '
        "explicit from the database's `now()`",
    ),
    # retrieval and schema linking (README "Retrieval and schema linking")
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
    # curated knowledge (README "Verified queries, templates and business context")
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
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
if len(BY_NAME) != len(SETTINGS):
    raise ConfigError("nl2sql.settings: a setting is declared twice")

# The typed settings: one attribute per declared setting, in declaration order.
Settings = dataclasses.make_dataclass(
    "Settings", [(s.name, s.python_type) for s in SETTINGS], frozen=True
)
Settings.__module__ = __name__
Settings.__doc__ = (
    "Every setting's effective value, typed (built from ``SETTINGS``): the "
    "user's value from ``nl2sql.setting`` or the declared default."
)


def lookup(key: str) -> Setting:
    """Look up the declaration of one setting.

    Args:
        key: a setting name, e.g. ``'k_examples'``.

    Returns:
        Its ``Setting``.

    Raises:
        ConfigError: for an unknown name, listing the close names (if any) and every setting.
    """
    s = BY_NAME.get(key)
    if s is not None:
        return s
    close = difflib.get_close_matches(str(key), list(BY_NAME), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise ConfigError(
        f"unknown setting {key!r}{hint} (known settings: {', '.join(sorted(BY_NAME))})"
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
        text = given.get(s.name)
        if text is None:
            text = s.default_text
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
    """Read the effective settings from ``nl2sql.setting``.

    A setting takes the value of its row where a user set one, else its declared default.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        A ``Settings`` (typed attributes, e.g. ``st.k_examples`` is an int).

    Raises:
        ConfigError: when a stored value does not parse.
    """
    return settings_from_texts(
        (r["key"], r["value"]) for r in spi.query(plpy, "SELECT key, value FROM nl2sql.setting")
    )


def validate_setting(key: str, value: str) -> str:
    """Check one setting's value for ``nl2sql.set_setting``.

    Args:
        key: the setting's name.
        value: the text given.

    Returns:
        The value in its stored form (e.g. ``' 2 '`` → ``'2'``, ``'False'`` → ``'off'``).

    Raises:
        ConfigError: for an unknown key (listing close names) or a value that does not parse
            or is out of range (naming the key, the value and what is allowed).
    """
    return lookup(key).normalize(value)


def get_models(plpy, st: Settings | None = None) -> list[ModelConfig]:
    """Read the enabled models of ``nl2sql.model``, in position order (then name).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).
        st: the settings (read when not given): ``llm_timeout_s`` is the timeout of a model
            without its own ``timeout_s``, ``llm_max_retries`` every model's retries.

    Returns:
        One ``ModelConfig`` per enabled model (dialect ``postgres`` when unset).

    Raises:
        ConfigError: when none is enabled, saying how to add one with ``nl2sql.add_model``,
            or when a stored setting is invalid.
    """
    st = st or get_settings(plpy)
    rows = spi.query(
        plpy,
        "SELECT name, base_url, model, api_key_env, temperature, timeout_s, max_tokens, dialect "
        "FROM nl2sql.model WHERE enabled ORDER BY position, name",
    )
    if not rows:
        raise ConfigError(
            "nl2sql: no model is configured. Add an OpenAI-compatible endpoint, e.g. "
            "SELECT nl2sql.add_model('gpt', base_url => 'https://api.example.com/v1', "
            "model => 'gpt-4o', api_key_env => 'OPENAI_API_KEY'); "
            "the key is read from that environment variable of the PostgreSQL server"
        )
    return [
        ModelConfig(
            name=r["name"],
            model=r["model"],
            base_url=r["base_url"],
            api_key_env=r["api_key_env"],
            temperature=float(r["temperature"]),
            timeout_s=float(r["timeout_s"] or st.llm_timeout_s),
            max_tokens=int(r["max_tokens"]),
            max_retries=st.llm_max_retries,
            dialect=r["dialect"] or "postgres",
        )
        for r in rows
    ]


def _md(text: str) -> str:
    """``text`` safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table() -> str:
    """Generate docs/settings.md's settings table from ``SETTINGS``.

    Returns:
        Markdown text (header, separator, one row per setting; ends with a newline).
    """
    lines = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    for s in SETTINGS:
        default = s.default_text or "(empty)"
        lines.append(f"| `{s.name}` | {_md(default)} | {_md(s.allowed())} | {_md(s.meaning)} |")
    return "\n".join(lines) + "\n"


def _sql_literal(text: str) -> str:
    """A PostgreSQL string literal for ``text`` (single quotes doubled; standard strings)."""
    if "\x00" in text:
        raise ConfigError("PostgreSQL text cannot hold NUL")
    return "'" + text.replace("'", "''") + "'"


def sql_values() -> str:
    """Render the settings as a SQL ``VALUES`` list for the ``nl2sql.settings`` view.

    One ``(name, type, default_text, meaning)`` row per setting; the build script puts the
    list into the view.

    Returns:
        Text such as ``VALUES\\n    ('k_examples', 'int', '9', 'examples …'),\\n    …``: every
        literal a PostgreSQL standard string literal with single quotes doubled (no trailing
        semicolon).

    Raises:
        ConfigError: a declared text holds a NUL character.
    """
    rows = [
        f"    ({_sql_literal(s.name)}, {_sql_literal(s.type)}, "
        f"{_sql_literal(s.default_text)}, {_sql_literal(s.meaning)})"
        for s in SETTINGS
    ]
    return "VALUES\n" + ",\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    """Print the docs/settings.md table or the SQL ``VALUES`` list (``python -m nl2sql.core.settings``).

    Args:
        argv: the arguments, ``--markdown`` or ``--sql`` (default ``sys.argv[1:]``).

    Raises:
        SystemExit: (argparse) neither or both options given.
    """
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m nl2sql.core.settings", description="print the settings declaration"
    )
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--markdown", action="store_true", help="docs/settings.md's settings table")
    g.add_argument("--sql", action="store_true", help="SQL VALUES list of the settings")
    args = ap.parse_args(argv)
    print(markdown_table() if args.markdown else sql_values(), end="" if args.markdown else "\n")


if __name__ == "__main__":
    main()
