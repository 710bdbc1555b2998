"""Redaction of secrets (configured API keys, ``sk-…``, ``Bearer …``, ``api_key=…``) from
every error text stored, raised or returned (docs/internals/core.md "Redaction"); and the
secrets themselves by name (``secret``): a model's key is the environment variable
``add_model``'s ``api_key_env`` names, else a file of that name in a secrets folder — where
``nl2sql model start`` keeps the local model's key, readable by the server's OS user and root
only (docs/models.md, "A private local model"). A key is never stored in a table."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from . import spi

#: the folder a DBA's ``nl2sql model start`` (as root) writes its key into
SYSTEM_SECRETS_DIR = "/etc/nl2sql/secrets"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # an environment variable's name, as add_model checks
_MAX_BYTES = 4096  # a key is short: a larger file is not read


def secret_dirs() -> list[Path]:
    """The folders a key file is looked for in, in order: ``NL2SQL_SECRETS_DIR``, then
    ``/etc/nl2sql/secrets``, then ``~/.config/nl2sql/secrets`` (a user's own ``nl2sql model``).

    Returns:
        The folders (they may not exist).
    """
    out = [os.environ.get("NL2SQL_SECRETS_DIR"), SYSTEM_SECRETS_DIR]
    try:
        out.append(str(Path.home() / ".config" / "nl2sql" / "secrets"))
    except (RuntimeError, KeyError):  # no home directory for this user
        pass
    return [Path(d) for d in dict.fromkeys(d for d in out if d)]


def secret(name: str | None) -> str | None:
    """The value of secret ``name``: the environment variable, else the first readable file.

    Args:
        name: an environment variable's name (``api_key_env``); None or empty gives None.

    Returns:
        The value without surrounding whitespace, or None where neither holds it.
    """
    if not name:
        return None
    if value := os.environ.get(name):
        return value
    if not _NAME.fullmatch(name):
        return None  # never a path: add_model refuses such names, an older row may not
    for d in secret_dirs():
        try:
            with open(d / name, "rb") as f:
                value = f.read(_MAX_BYTES + 1).decode("utf-8", "replace").strip()
        except OSError:
            continue
        if value and len(value) <= _MAX_BYTES:
            return value
    return None


MASK = "[REDACTED]"
# a configured value shorter than this is not searched for (it would mask ordinary words);
# key-like tokens are still masked by pattern
MIN_SECRET_LEN = 8

_KEY_CHARS = r"[A-Za-z0-9_\-*]"
_PATTERNS = (
    # OpenAI / Anthropic / most OpenAI-compatible keys: sk-..., sk-proj-..., sk-ant-...
    re.compile(r"\bsk-" + _KEY_CHARS + r"{16,}"),
    # an Authorization header's credentials (the header's spelling: ordinary prose such as
    # "bearer bonds" is left alone)
    re.compile(
        r"\b(Bearer|BEARER|bearer)\s+(?=[A-Za-z0-9._~+/=\-*]*[0-9])[A-Za-z0-9._~+/=\-*]{8,}"
    ),
    # api_key=..., api-key: "...", access_token=..., client_secret: ...
    re.compile(
        r"(?i)\b((?:x-)?api[_-]?key|access[_-]?token|(?:client[_-])?secret)(\s*[=:]\s*)"
        r"[\"']?[A-Za-z0-9._~+/=\-*]{8,}[\"']?"
    ),
    # credentials in a URL: scheme://user:password@host
    re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/@\s:]*:[^/@\s]*@"),
)


# what every pattern above needs somewhere in a text: a text without any of it is left as is
# after one search instead of four substitutions (a trace has thousands of short strings)
_ANY_PATTERN = re.compile(r"sk-|://|(?i:bearer|api[_-]?key|access[_-]?token|secret)")


def _sub(m: re.Match) -> str:
    # keep the label ("Bearer", "api_key=") so the message still says what was there
    if m.re is _PATTERNS[0]:
        return MASK
    if m.re is _PATTERNS[1]:
        return f"{m.group(1)} {MASK}"
    if m.re is _PATTERNS[3]:
        return f"{m.group(1)}{MASK}@"
    return f"{m.group(1)}{m.group(2)}{MASK}"


def redact(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    """Mask secrets in one text.

    Args:
        text: an error message (or any text); None passes through.
        secrets: exact values to mask (the configured API keys); None, empty and values shorter
            than ``MIN_SECRET_LEN`` are skipped.

    Returns:
        ``text`` with every secret and key-like token as ``[REDACTED]`` (a ``Bearer``/``api_key=``
        label kept); None for None.
    """
    if text is None:
        return None
    return _masked(text if isinstance(text, str) else str(text), _longest_first(secrets))


def _longest_first(secrets: Iterable[str | None]) -> list[str]:
    """The secrets worth searching for, longest first (a key that contains another is masked
    whole)."""
    return sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LEN}, key=len, reverse=True)


def _masked(text: str, secrets: list[str]) -> str:
    """``redact`` of one string with ``secrets`` already ordered by ``_longest_first``."""
    for s in secrets:
        if s in text:
            text = text.replace(s, MASK)
    if _ANY_PATTERN.search(text) is None:
        return text
    for p in _PATTERNS:
        text = p.sub(_sub, text)
    return text


def redact_obj(obj: Any, secrets: Iterable[str | None] = ()) -> Any:
    """Mask secrets in every string of a JSON-like value (a trace), keys included.

    Args:
        obj: dicts, lists, tuples, strings and scalars, nested.
        secrets: as for ``redact``.

    Returns:
        A copy of ``obj`` with ``redact`` applied to every string.
    """
    return _masked_obj(obj, _longest_first(secrets))


def _masked_obj(obj: Any, secrets: list[str]) -> Any:
    """``redact_obj`` with ``secrets`` already ordered by ``_longest_first``."""
    if isinstance(obj, str):
        return _masked(obj, secrets)
    if isinstance(obj, dict):
        return {
            (_masked(k, secrets) if isinstance(k, str) else k): _masked_obj(v, secrets)
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [_masked_obj(v, secrets) for v in obj]
    return obj


def env_secrets(names: Iterable[str | None]) -> list[str]:
    """The values of the named secrets: the environment variables of this process (the
    server's), else their files in the secrets folder (``secret``).

    Args:
        names: environment variable names (a model's ``api_key_env``); None and empty skipped.

    Returns:
        The non-empty values, in order, without duplicates.
    """
    out: list[str] = []
    for n in names:
        v = secret(n)
        if v and v not in out:
            out.append(v)
    return out


def url_secrets(url: str | None) -> list[str]:
    """The credentials a URL carries, in the forms an endpoint may echo them.

    Args:
        url: a ``base_url`` (None: none).

    Returns:
        ``[password, "user:password", its base64 (HTTP Basic)]`` when the URL has a password,
        else ``[]``.
    """
    try:
        parts = urlsplit(url or "")
        user, password = parts.username or "", parts.password
    except ValueError:
        return []
    if not password:
        return []
    pair = f"{user}:{password}"
    return [password, pair, base64.b64encode(pair.encode()).decode("ascii")]


def configured_secrets(plpy) -> list[str]:
    """The API keys of every model of ``nl2sql.model``, read from the server's environment, and
    the credentials a ``base_url`` of an earlier release may carry (``url_secrets``).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Returns:
        The secrets' values; empty when none is set or the model table cannot be read.
    """
    try:
        rows = spi.query(plpy, "SELECT DISTINCT api_key_env, base_url FROM nl2sql.model")
    except Exception:  # noqa: BLE001 - redaction must never be why a call fails
        return []
    out = env_secrets(r["api_key_env"] for r in rows)
    for r in rows:
        out += [s for s in url_secrets(r["base_url"]) if s not in out]
    return out
