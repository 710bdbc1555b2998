"""Unit tests of nl2sql.ops."""
