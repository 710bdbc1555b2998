"""The installed extension's version against the package's (docs/internals/ops.md "Version
check"); stays at ``nl2sql.version``: every released ``_boot()`` imports it."""

from __future__ import annotations

from . import __version__
from .core import spi
from .core.errors import VersionMismatch

_CHECKED: set[str] = set()


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in str(version).split("."))


def mismatch(installed: str | None, package: str = __version__) -> tuple[str, str] | None:
    """Compare the installed extension's version with the package's.

    Args:
        installed: ``extversion`` of nl2sql in this database (None when not installed).
        package: the importable package's version (default ``nl2sql.__version__``).

    Returns:
        None when they agree, else ``(message, hint)``: the message says what differs, the
        hint what to run (``CREATE EXTENSION``, ``ALTER EXTENSION nl2sql UPDATE``, or install
        the matching package).
    """
    if installed == package:
        return None
    if installed is None:
        return (
            "nl2sql: the extension is not installed in this database",
            "CREATE EXTENSION nl2sql CASCADE",
        )
    msg = (
        f"nl2sql: this database has extension nl2sql {installed}, but the Python package "
        f"the server imports is {package}"
    )
    if _key(package) > _key(installed):
        return msg, "run ALTER EXTENSION nl2sql UPDATE in this database (once per database)"
    return msg, (
        f"install the nl2sql {installed} Python package into the server's venv (setting "
        f"nl2sql.venv), or install the {package} extension files and run "
        "ALTER EXTENSION nl2sql UPDATE"
    )


def check(plpy) -> None:
    """Check that this database's nl2sql extension is the package's version.

    Args:
        plpy: the PL/Python module of the calling backend (SPI access).

    Raises:
        VersionMismatch: the versions differ or the extension is not installed; its ``hint``
            attribute says what to run.
    """
    if __version__ in _CHECKED:
        return
    rows = spi.query(
        plpy, "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'nl2sql'"
    )
    problem = mismatch(rows[0]["extversion"] if rows else None)
    if problem:
        err = VersionMismatch(problem[0])
        err.hint = problem[1]
        raise err
    _CHECKED.add(__version__)
