"""The configured models: the enabled rows of ``nl2sql.model`` as ``ModelConfig``."""

from __future__ import annotations

from collections.abc import Callable

from ..core import spi
from ..core.errors import ConfigError
from ..core.settings import Settings, get_settings
from ..core.types import ModelConfig

__all__ = ["RELAYS", "get_models"]

# The shared embedding process's relays (``chat``: one model call; ``quota``: the ledger of
# questions in flight), registered by ``nl2sql.embedding.client`` when it loads: that floor sits
# above this one. Until then, as when the process is not in use, everything is done here.
RELAYS: dict[str, Callable[..., dict | None] | None] = {"chat": None, "quota": None}


def get_models(plpy, st: Settings | None = None) -> list[ModelConfig]:
    """Read the enabled models of ``nl2sql.model``, in position order (then name).

    Args:
        st: the settings (read when not given): ``llm_timeout_s`` is the timeout of a model
            without its own ``timeout_s``, ``llm_max_retries`` every model's retries,
            ``llm_reasoning_max_tokens`` and ``llm_max_output_tokens`` the output caps of
            models that think.

    Returns:
        One ``ModelConfig`` per enabled model (dialect ``postgres`` when unset).

    Raises:
        ConfigError: when none is enabled, saying how to add one with ``nl2sql.add_model``,
            or when a stored setting is invalid.
    """
    st = st or get_settings(plpy)
    rows = spi.query(
        plpy,
        "SELECT name, base_url, model, api_key_env, temperature, timeout_s, max_tokens, dialect, "
        "price_in_per_mtok::float8 AS price_in, price_out_per_mtok::float8 AS price_out, "
        "cap_parameter, send_temperature, send_n, reasoning_effort, context_window, "
        "xmin::text AS revision "
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
            max_tokens=r["max_tokens"],
            max_retries=st.llm_max_retries,
            dialect=r["dialect"] or "postgres",
            price_in_per_mtok=r["price_in"],
            price_out_per_mtok=r["price_out"],
            cap_parameter=r["cap_parameter"],
            send_temperature=r["send_temperature"],
            send_n=r["send_n"],
            reasoning_effort=r["reasoning_effort"],
            context_window=r["context_window"],
            reasoning_max_tokens=st.llm_reasoning_max_tokens,
            max_output_tokens=st.llm_max_output_tokens,
            revision=r["revision"],
        )
        for r in rows
    ]
