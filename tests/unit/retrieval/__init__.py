"""Unit tests of nl2sql.retrieval."""
