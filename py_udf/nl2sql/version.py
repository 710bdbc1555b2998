"""The installed extension's version against the package's (docs/internals/ops.md "Version
check"); stays at ``nl2sql.version``: every released ``_boot()`` imports it."""

from __future__ import annotations

from . import __version__
from .core import spi
from .core.errors import VersionMismatch

_CHECKED: set[tuple[str, int]] = set()


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


# the extension's version, and the comment of schema nl2sql: beside the database (no extension,
# the schema from ``nl2sql install``) it names the version of the last install or upgrade,
# "nl2sql 0.3.0, installed beside the database (nl2sql install)", readable by every role
_INSTALLED_SQL = (
    "SELECT (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'nl2sql') AS ext, "
    "pg_catalog.obj_description(pg_catalog.to_regnamespace('nl2sql'), 'pg_namespace') AS note"
)
_BESIDE_MARK = "installed beside the database"


def beside_version(note: str | None) -> str | None:
    """The version the comment of schema nl2sql names when ``nl2sql install`` wrote it.

    Args:
        note: the schema's comment, or None.

    Returns:
        The version text, or None when the comment is not the install's.
    """
    if not note or not note.startswith("nl2sql ") or _BESIDE_MARK not in note:
        return None
    return note.removeprefix("nl2sql ").split(",", 1)[0].strip()


def beside_mismatch(installed: str | None, package: str = __version__) -> tuple[str, str] | None:
    """Compare the version of nl2sql installed beside the database with the package's.

    Args:
        installed: the version ``nl2sql install``/``upgrade`` last recorded (None: unknown).
        package: the importing package's version.

    Returns:
        None when they agree, else ``(message, hint)``.
    """
    if installed == package:
        return None
    msg = (
        f"nl2sql: this database's schema nl2sql is version {installed or 'unknown'} "
        f"(installed without PL/Python), but this Python package is {package}"
    )
    if installed is None or _key(package) > _key(installed):
        return msg, f"run nl2sql upgrade --dsn … with the {package} package (docs/install.md)"
    return msg, f"install the nl2sql {installed} Python package here, or upgrade the database"


def check(plpy) -> None:
    """Check that this database's nl2sql (the extension, or the schema installed beside the
    database) is the package's version; once per ``plpy`` (a backend, or a client's seam).

    Args:
        plpy: the PL/Python module of the calling backend (SPI access), or its stand-in.

    Raises:
        VersionMismatch: the versions differ or nl2sql is not installed; its ``hint``
            attribute says what to run.
    """
    if (__version__, id(plpy)) in _CHECKED:
        return
    row = spi.query(plpy, _INSTALLED_SQL)[0]
    beside = beside_version(row["note"]) if row["ext"] is None else None
    problem = beside_mismatch(beside) if beside else mismatch(row["ext"])
    if problem:
        err = VersionMismatch(problem[0])
        err.hint = problem[1]
        raise err
    _CHECKED.add((__version__, id(plpy)))
