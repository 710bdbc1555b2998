"""Where ``nl2sql model`` keeps its files: the cache (the built server, the GGUF files), the
state (the supervisor's configuration, the server's log, what is installed) and the secrets
folder (the generated API key). As root the system's folders, otherwise the user's own
(docs/models.md, "A private local model")."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar, Self

__all__ = ["Paths", "Record", "paths"]


def _home(*parts: str) -> Path:
    return Path.home().joinpath(*parts)


@dataclass(frozen=True)
class Paths:
    """The three folders.

    Attributes:
        cache: ``NL2SQL_CACHE``; as root ``/var/cache/nl2sql``, else ``~/.cache/nl2sql``.
        state: ``NL2SQL_MODEL_HOME``; as root ``/var/lib/nl2sql/model``, else
            ``~/.local/share/nl2sql/model``.
        secrets: ``NL2SQL_SECRETS_DIR``; as root ``/etc/nl2sql/secrets``, else
            ``~/.config/nl2sql/secrets`` (``core.redaction.secret`` reads keys from there).
    """

    cache: Path
    state: Path
    secrets: Path

    @property
    def models(self) -> Path:
        """The assembled GGUF files."""
        return self.cache / "models"

    @property
    def wheels(self) -> Path:
        """Built and downloaded wheels (shared with scripts/llama_server.sh)."""
        return self.cache / "wheels"


def paths() -> Paths:
    """The folders for this user and environment.

    Returns:
        The :class:`Paths` (nothing is created).
    """
    root = os.geteuid() == 0
    cache = os.environ.get("NL2SQL_CACHE") or (
        "/var/cache/nl2sql" if root else str(_home(".cache", "nl2sql"))
    )
    state = os.environ.get("NL2SQL_MODEL_HOME") or (
        "/var/lib/nl2sql/model" if root else str(_home(".local", "share", "nl2sql", "model"))
    )
    secrets = os.environ.get("NL2SQL_SECRETS_DIR") or (
        "/etc/nl2sql/secrets" if root else str(_home(".config", "nl2sql", "secrets"))
    )
    return Paths(Path(cache), Path(state), Path(secrets))


class Record:
    """A dataclass kept as one JSON file of the state folder (``installed.json``,
    ``service.json``): the subclass names its file in ``FILE``."""

    FILE: ClassVar[str]

    @classmethod
    def load(cls, state: Path) -> Self | None:
        """The record in a state folder.

        Args:
            state: the state folder.

        Returns:
            The record, or None (no file, unreadable, written by another version).
        """
        try:
            data = json.loads((state / cls.FILE).read_text())
            return cls(**data) if isinstance(data, dict) else None
        except (OSError, ValueError, TypeError):
            return None

    def save(self, state: Path) -> None:
        """Write the record whole (beside it, then renamed: a reader never sees half of one).

        Args:
            state: the state folder (made when missing).
        """
        state.mkdir(parents=True, exist_ok=True)
        tmp = state / (self.FILE + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, state / self.FILE)
