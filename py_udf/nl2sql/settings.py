"""Settings (table ``nl2sql.setting``) and model configuration (table ``nl2sql.model``)."""
from __future__ import annotations

from . import spi
from .types import ModelConfig

DEFAULTS: dict[str, str] = {
    "k_examples": "9",
    "candidate_timeout_ms": "5000",
    "max_rows": "10000",
    "schemas": "public",
    "sample_values": "3",
    "presql_votes": "off",
    "question_max_chars": "4000",
    "values_per_column": "1000",
    "value_max_chars": "200",
    "llm_timeout_s": "60",
    "llm_max_retries": "2",
    "send_values": "on",
    # generation and selection (issue 5; see README "Generation and selection")
    "prompt_variants": "1",
    "samples_per_model": "1",
    "sample_temperature": "1.0",
    "repair_rounds": "3",
    "value_alignment": "on",
    "align_min_trigram": "0.4",
    "align_min_cosine": "0.8",
    "confidence_threshold": "0.2",
    "tie_break": "fastest",
    "selection": "majority",
    "selection_model": "",
    "hardness_voters": "",
    "rewrite_time": "on",
    "value_top_k": "10",
    "value_trgm_min": "0.5",
    "value_vector_min": "0.8",
    "value_vector_phrases": "8",
    "link_value_min": "0.9",
    "link_column_min": "0.6",
    "dail_tau": "0.6",
    "dail_candidates": "50",
    "prompt_token_budget": "3000",
}

# Settings that are similarities/thresholds in 0..1 (issue 3: retrieval and schema linking).
UNIT_INTERVAL = {"value_trgm_min", "value_vector_min", "link_value_min", "link_column_min",
                 "dail_tau"}


from .errors import ConfigError  # noqa: E402  (re-exported)


def get_settings(plpy) -> dict[str, str]:
    """All settings, defaults filled in for keys missing from ``nl2sql.setting``."""
    out = dict(DEFAULTS)
    for r in spi.query(plpy, "SELECT key, value FROM nl2sql.setting"):
        out[r["key"]] = r["value"]
    return out


def _as_int(key: str, v: str, value: str) -> int:
    """``v`` as an int; raises ConfigError naming the setting and the value given."""
    try:
        return int(v)
    except ValueError:
        raise ConfigError(f"setting {key!r} must be an integer, got {value!r}") from None


def validate_setting(key: str, value: str) -> str:
    """Check one setting's value; returns it normalized. Raises ConfigError naming the key, the
    allowed values and the current problem."""
    if key not in DEFAULTS:
        raise ConfigError(f"unknown setting {key!r}; known settings: {', '.join(sorted(DEFAULTS))}")
    v = (value or "").strip()
    if key in {"k_examples", "candidate_timeout_ms", "max_rows", "sample_values",
               "question_max_chars", "values_per_column", "value_max_chars",
               "value_vector_phrases"}:
        n = _as_int(key, v, value)
        if n < 0 or (key in {"candidate_timeout_ms", "max_rows", "question_max_chars"} and n < 1):
            raise ConfigError(f"setting {key!r} must be positive, got {n}")
        return str(n)
    if key in UNIT_INTERVAL:
        try:
            f = float(v)
        except ValueError:
            raise ConfigError(f"setting {key!r} must be a number between 0 and 1, got {value!r}") from None
        if not 0 <= f <= 1:
            raise ConfigError(f"setting {key!r} must be between 0 and 1 (a similarity), got {f}")
        return str(f)
    if key in {"value_top_k", "dail_candidates", "prompt_token_budget"}:
        n = _as_int(key, v, value)
        if n < 0 or (key == "prompt_token_budget" and n < 500):
            raise ConfigError(f"setting {key!r} must be >= {500 if key == 'prompt_token_budget' else 0}, got {n}")
        return str(n)
    if key == "llm_timeout_s":
        try:
            f = float(v)
        except ValueError:
            raise ConfigError(f"setting 'llm_timeout_s' must be a number of seconds, got {value!r}") from None
        if f <= 0:
            raise ConfigError("setting 'llm_timeout_s' must be > 0")
        return str(f)
    if key == "llm_max_retries":
        n = _as_int(key, v, value)
        if not 0 <= n <= 10:
            raise ConfigError(f"setting 'llm_max_retries' must be between 0 and 10, got {n}")
        return str(n)
    if key == "send_values":
        if v.lower() not in {"on", "off", "true", "false"}:
            raise ConfigError("setting 'send_values' must be on or off")
        return "on" if v.lower() in {"on", "true"} else "off"
    if key in GENERATION_KEYS:
        return validate_generation_setting(key, v)
    if key == "presql_votes":
        if v.lower() not in {"on", "off", "true", "false"}:
            raise ConfigError("setting 'presql_votes' must be on or off")
        return "on" if v.lower() in {"on", "true"} else "off"
    if key == "schemas" and not v:
        raise ConfigError("setting 'schemas' must name at least one schema (comma-separated)")
    return v


def get_models(plpy, st: dict[str, str] | None = None) -> list[ModelConfig]:
    """Enabled models in position order (``st``: the settings, read when not given). Raises
    ConfigError when none is configured, saying how to add one with ``nl2sql.add_model``."""
    st = st or get_settings(plpy)
    rows = spi.query(
        plpy, "SELECT name, base_url, model, api_key_env, temperature, timeout_s, max_tokens, dialect "
        "FROM nl2sql.model WHERE enabled ORDER BY position, name")
    if not rows:
        raise ConfigError(
            "nl2sql: no model is configured. Add an OpenAI-compatible endpoint, e.g. "
            "SELECT nl2sql.add_model('gpt', base_url => 'https://api.example.com/v1', "
            "model => 'gpt-4o', api_key_env => 'OPENAI_API_KEY'); "
            "the key is read from that environment variable of the PostgreSQL server")
    return [ModelConfig(name=r["name"], model=r["model"], base_url=r["base_url"],
                        api_key_env=r["api_key_env"], temperature=float(r["temperature"]),
                        timeout_s=float(r["timeout_s"] or st["llm_timeout_s"]),
                        max_tokens=int(r["max_tokens"]),
                        max_retries=int(st["llm_max_retries"]),
                        dialect=r["dialect"] or "postgres")
            for r in rows]


GENERATION_KEYS = {"prompt_variants", "samples_per_model", "sample_temperature", "repair_rounds",
                   "value_alignment", "align_min_trigram", "align_min_cosine",
                   "confidence_threshold", "tie_break", "selection", "selection_model",
                   "hardness_voters", "rewrite_time"}


def validate_generation_setting(key: str, v: str) -> str:
    """Validate one generation/selection setting (issue 5); returns it normalized. Raises
    ConfigError naming the key, the allowed values and what was given."""
    def integer(lo: int, hi: int) -> str:
        try:
            n = int(v)
        except ValueError:
            raise ConfigError(f"setting {key!r} must be an integer from {lo} to {hi}, got {v!r}") from None
        if not lo <= n <= hi:
            raise ConfigError(f"setting {key!r} must be from {lo} to {hi}, got {n}")
        return str(n)

    def number(lo: float, hi: float) -> str:
        try:
            f = float(v)
        except ValueError:
            raise ConfigError(f"setting {key!r} must be a number from {lo:g} to {hi:g}, got {v!r}") from None
        if not lo <= f <= hi:
            raise ConfigError(f"setting {key!r} must be from {lo:g} to {hi:g}, got {f:g}")
        return str(f)

    def onoff() -> str:
        if v.lower() not in {"on", "off", "true", "false"}:
            raise ConfigError(f"setting {key!r} must be on or off, got {v!r}")
        return "on" if v.lower() in {"on", "true"} else "off"

    if key == "prompt_variants":
        return integer(1, 8)
    if key == "samples_per_model":
        return integer(1, 16)
    if key == "sample_temperature":
        return number(0.0, 2.0)
    if key == "repair_rounds":
        return integer(0, 3)
    if key in {"value_alignment", "rewrite_time"}:
        return onoff()
    if key in {"align_min_trigram", "align_min_cosine", "confidence_threshold"}:
        return number(0.0, 1.0)
    if key == "tie_break":
        if v.lower() not in {"fastest", "priority"}:
            raise ConfigError(f"setting 'tie_break' must be fastest or priority, got {v!r}")
        return v.lower()
    if key == "selection":
        if v.lower() not in {"majority", "multiple_choice"}:
            raise ConfigError(f"setting 'selection' must be majority or multiple_choice, got {v!r}")
        return v.lower()
    if key == "selection_model":
        return v  # a model name, or empty for the PreSQL writer; checked when used
    if key == "hardness_voters":
        from .hardness import parse_voters

        try:
            parsed = parse_voters(v)
        except ValueError as e:
            raise ConfigError(f"setting 'hardness_voters': {e}") from None
        import json

        return json.dumps(parsed) if parsed else ""
    raise ConfigError(f"unknown setting {key!r}")
