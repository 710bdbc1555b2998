"""The settings declaration rendered as the docs' markdown table and the view's ``VALUES``
list: ``python -m nl2sql.core.settings_export --markdown`` (or ``--sql``)."""

from __future__ import annotations

import argparse

from .errors import ConfigError
from .settings import SETTINGS

__all__ = [
    "main",
    "markdown_table",
    "sql_rules",
    "sql_values",
]


def _md(text: str) -> str:
    """``text`` safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table() -> str:
    """Generate the docs' settings table from ``SETTINGS``.

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
    """Render the settings as the SQL ``VALUES`` list of the ``nl2sql.settings`` view.

    Returns:
        ``VALUES\\n    ('k_examples', 'int', '9', 'examples …'),\\n    …``: one
        ``(name, type, default_text, meaning)`` row per setting, standard string literals, no
        trailing semicolon.

    Raises:
        ConfigError: a declared text holds a NUL character.
    """
    rows = [
        f"    ({_sql_literal(s.name)}, {_sql_literal(s.type)}, "
        f"{_sql_literal(s.default_text)}, {_sql_literal(s.meaning)})"
        for s in SETTINGS
    ]
    return "VALUES\n" + ",\n".join(rows)


def _sql_number(x: float | None) -> str:
    """A bound as a SQL float8 literal, or NULL."""
    return "NULL::float8" if x is None else f"{float(x)!r}::float8"


def sql_rules() -> str:
    """Render the settings' checks as a SQL ``VALUES`` list, for the PL/pgSQL ``set_setting`` of
    the install without PL/Python (``sql/beside/``).

    Returns:
        ``VALUES\n    ('k_examples', 'int', 1.0::float8, false, NULL, NULL),\n    …``: one
        ``(name, type, minimum, minimum_exclusive, maximum, choices)`` row per setting.

    Raises:
        ConfigError: a declared text holds a NUL character.
    """
    rows = []
    for s in SETTINGS:
        choices = (
            "ARRAY[" + ", ".join(_sql_literal(c) for c in s.choices) + "]::text[]"
            if s.choices
            else "NULL::text[]"
        )
        rows.append(
            f"    ({_sql_literal(s.name)}, {_sql_literal(s.type)}, {_sql_number(s.minimum)}, "
            f"{'true' if s.minimum_exclusive else 'false'}, {_sql_number(s.maximum)}, {choices})"
        )
    return "VALUES\n" + ",\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    """Print the settings table or the ``VALUES`` list (``python -m nl2sql.core.settings_export``).

    Args:
        argv: the arguments, ``--markdown`` or ``--sql`` (default ``sys.argv[1:]``).

    Raises:
        SystemExit: (argparse) neither or both options given.
    """
    ap = argparse.ArgumentParser(
        prog="python -m nl2sql.core.settings_export", description="print the settings declaration"
    )
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--markdown", action="store_true", help="docs/settings.md's table")
    g.add_argument("--sql", action="store_true", help="SQL VALUES list of the settings")
    args = ap.parse_args(argv)
    print(markdown_table() if args.markdown else sql_values(), end="" if args.markdown else "\n")


if __name__ == "__main__":
    main()
