"""Unit tests of nl2sql.client (beside the database)."""
