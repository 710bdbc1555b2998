"""Unit tests of nl2sql.stages."""
