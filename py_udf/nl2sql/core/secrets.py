"""A model's API key by the name ``add_model``'s ``api_key_env`` gives: the environment variable
of that name in this process (the PostgreSQL server's, or the client's beside it), else a file
of that name in a secrets folder — where ``nl2sql model start`` keeps the key it generates for
the local model, readable by the server's OS user and root only (docs/models.md, "A private
local model"). The key itself is never stored in a table. Imports nothing from the package."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["SYSTEM_SECRETS_DIR", "secret", "secret_dirs"]

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
