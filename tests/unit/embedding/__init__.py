"""Unit tests of nl2sql.embedding."""
