"""One setting's declaration (``Setting``): kind, default, bounds, parsing and formatting; and
the settings of generation and selection (``GENERATION``, part of ``settings.SETTINGS``).
Standard library and ``errors`` only: the build script imports it through ``settings``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

__all__ = [
    "HARDNESS_LEVELS",
    "TYPES",
    "MAX_VALUE_CHARS",
    "Setting",
    "enum_setting",
    "parse_hardness_voters",
    "shown",
    "unit_setting",
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

MAX_VALUE_CHARS = 10_000
"""Longest setting value accepted (a ``hardness_voters`` object naming every model of a large
configuration fits many times over); checked before the value is parsed."""

_TRUE = {"on", "true"}
_FALSE = {"off", "false"}


def parse_hardness_voters(value: str) -> dict[str, list[str]]:
    """Parse the ``hardness_voters`` setting: which models vote at each hardness level. Source:
    PET-SQL (Li et al. 2024) §3.4, fine-grained voting.

    Args:
        value: JSON ``{"easy": ["a"], "extra": ["a", "b", "c"]}``; empty or ``off``: no routing.

    Returns:
        ``{level: [model names]}`` (duplicates removed, order kept); ``{}`` for no routing.

    Raises:
        ConfigError: naming the bad key or value.
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
    except RecursionError:
        raise ConfigError("JSON nested too deeply; expected {level: [model names]}") from None
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


def shown(value: object) -> str:
    """A value as error messages quote it: its ``repr``, at most 200 characters.

    Args:
        value: the value given.

    Returns:
        ``repr(value)``, cut to 200 characters with ``…`` and its length when longer.
    """
    r = repr(value)
    return r if len(r) <= 200 else f"{r[:200]}… ({len(r):,} characters)"


def _num(x: float) -> str:
    """A bound as text: 1 rather than 1.0."""
    return f"{x:g}"


@dataclass(frozen=True)
class Setting:
    """One setting's declaration: its name, kind, typed default, meaning and bounds.

    Raises:
        ConfigError: (on construction) an unknown ``type``; ``choices`` without type enum or
            type enum without ``choices``.
    """

    name: str  # the key in ``nl2sql.setting``
    type: str  # a key of ``TYPES``
    default: Any  # typed
    meaning: str  # what it does, in words (the docs' table)
    minimum_exclusive: bool = False  # ``minimum`` itself not allowed
    minimum: float | None = None  # int/float lower bound, inclusive unless minimum_exclusive
    maximum: float | None = None  # int/float upper bound, inclusive
    choices: tuple[str, ...] | None = None  # an enum's values, lower case

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
        """Describe the values this setting accepts, in words (errors, docs/settings.md).

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
        return ConfigError(f"setting {self.name!r} must be {self.allowed()}, got {shown(value)}")

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
            text: the setting's text, as ``nl2sql.set_setting`` receives it or the table stores it.

        Returns:
            int, float, bool, str (enums lower-cased), dict (hardness_voters) or tuple of str.

        Raises:
            ConfigError: naming the setting, the bad value (its start when long) and what is
                allowed; a value longer than ``MAX_VALUE_CHARS``.
        """
        if len(text or "") > MAX_VALUE_CHARS:
            raise ConfigError(
                f"setting {self.name!r}: the value has {len(text):,} characters, more than "
                f"{MAX_VALUE_CHARS:,}"
            )
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
                raise ConfigError(f"setting {self.name!r}: {e} (got {shown(text)})") from None
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


def unit_setting(name: str, default: float, meaning: str) -> Setting:
    """A similarity/threshold setting in 0..1.

    Args:
        name, default, meaning: as ``Setting``'s.

    Returns:
        The Setting (type float, bounds 0 and 1).
    """
    return Setting(name, "float", default, meaning, minimum=0, maximum=1)


def enum_setting(name: str, choices: tuple[str, ...], meaning: str) -> Setting:
    """A setting of named choices; the first is its default.

    Args:
        name, meaning: as ``Setting``'s.
        choices: the values it may take, the default first.

    Returns:
        The Setting (type enum).
    """
    return Setting(name, "enum", choices[0], meaning, choices=choices)


# The settings of generation and selection (docs/pipeline.md "Generation and selection"):
# part of ``settings.SETTINGS``, declared here to keep that module short.
GENERATION: tuple[Setting, ...] = (
    # generation and selection (docs/pipeline.md "Generation and selection")
    Setting(
        "model_rounds",
        "enum",
        "auto",
        "`two`: the first model writes the PreSQL, then every model a FinSQL from the linked "
        "schema; `one`: every model writes once from the PreSQL prompt (no linking round); "
        "`auto`: one round when the PreSQL prompt holds the whole schema, two when it was "
        'pruned (see "One model round or two")',
        choices=("two", "one", "auto"),
    ),
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
        "rules_off",
        "str",
        "",
        "comma-separated names of repair's rules (`nl2sql.rules.RULES`, docs/internals/"
        'generation.md "Repair") that repair skips, for ablation (bench/live.py); empty: none',
    ),
    Setting(
        "value_alignment",
        "bool",
        True,
        "string literals compared with a column are snapped to its indexed cell values",
    ),
    unit_setting("align_min_trigram", 0.4, "minimum pg_trgm similarity for value alignment"),
    unit_setting(
        "align_min_cosine",
        0.8,
        "minimum embedding cosine similarity for value alignment (tried after trigrams)",
    ),
    unit_setting(
        "confidence_threshold",
        0.2,
        "result groups with a smaller share of the executed candidates are dropped (MCS-SQL)",
    ),
    enum_setting(
        "tie_break",
        ("fastest", "priority"),
        "equal-size groups: `fastest` execution (times within max(0.5 ms, 10 %) of the "
        "fastest count as equal, and priority decides among those, so that the same "
        "candidates always give the same answer), or `priority` (group holding the "
        "highest-priority model)",
    ),
    enum_setting(
        "selection",
        ("majority", "multiple_choice", "judge"),
        '`majority`, `multiple_choice` (a model picks a group) or `judge` (see "The judge")',
    ),
    Setting(
        "selection_model",
        "str",
        "",
        "model for multiple-choice selection and the judge; empty = the PreSQL writer",
    ),
    unit_setting(
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
        "explain_sql_in_trace",
        "bool",
        False,
        "`nl2sql.explain` adds `sql_explanation`: the chosen SQL explained in words by the model "
        "of `narrate_model`, as `nl2sql.explain_sql` does (one more model call)",
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
)
