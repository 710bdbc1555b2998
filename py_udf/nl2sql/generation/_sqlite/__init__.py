"""SQLite's semantics carried over to PostgreSQL (``rules``: one rule per behaviour; the bare
columns of aggregate queries in ``aggregates``; where a column comes from in ``scope``). The
errors of SQL that SQLite runs and PostgreSQL refuses, read for their one reading in repair's
round 0, are the repair rule ``nl2sql.rules.shape.fix_by_sqlstate``. docs/internals/generation.md
"SQLite rules"."""

__all__ = ["aggregates", "rules", "scope"]
