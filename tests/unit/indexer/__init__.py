"""Unit tests of the indexer package (nl2sql_indexer): the cluster helper before PostgreSQL
runs, and the scripted loopback server."""
