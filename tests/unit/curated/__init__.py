"""Unit tests of nl2sql.curated."""
