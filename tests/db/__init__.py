"""Tests inside a real PostgreSQL cluster the session starts and removes (the ``cluster``,
``demo_conn`` and ``db`` fixtures of tests/conftest.py): the SQL functions, roles and privileges,
the pipeline end to end. A test that needs no server goes to tests/unit/."""
