"""Unit tests of nl2sql.generation."""
