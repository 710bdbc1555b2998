"""Unit tests of nl2sql.model."""
