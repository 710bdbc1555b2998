"""SQLite's semantics carried over to PostgreSQL (``rules``: one rule per behaviour; the bare
columns of aggregate queries in ``aggregates``; where a column comes from in ``scope``), and the
errors of SQL that SQLite runs and PostgreSQL refuses read for their one reading
(``rules.fix_by_sqlstate``, repair's round 0). docs/internals/generation.md "SQLite rules"."""

__all__ = ["aggregates", "rules", "scope"]
