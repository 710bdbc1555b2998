"""Tests that need no server: pure Python, run by ``bash scripts/test.sh --unit`` without
PostgreSQL. Grouped like py_udf/nl2sql/ (core, embedding, retrieval, model, generation, selection,
curated, ops), plus the indexer package (indexer/) and project-wide checks (this folder). A test
that needs the cluster goes to tests/db/ (conftest.py refuses it here)."""
