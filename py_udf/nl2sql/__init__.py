"""nl2sql: text-to-SQL inside PostgreSQL."""

__version__ = "0.3.0"
