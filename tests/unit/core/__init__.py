"""Unit tests of nl2sql.core."""
