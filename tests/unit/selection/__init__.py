"""Unit tests of nl2sql.selection."""
