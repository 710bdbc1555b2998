"""Curated knowledge added in SQL beside the database (sql/beside/002-curated.sql): stored
pending by PL/pgSQL, embedded by the client process, then in the prompts (docs/install.md)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

import nl2sql

if not (Path(__file__).parent / "conftest.py").exists():  # the install branch's fixtures
    pytest.skip("tests/beside/conftest.py is missing", allow_module_level=True)

from .test_client_beside import READER, demo  # noqa: F401  (the fixture)

RULE = "Always list singers by their name, never by their id."


def _prompts(llm) -> str:
    return "\n".join(m.get("content") or "" for r in llm.requests for m in r["messages"])


def test_add_instruction_beside_reaches_the_prompt(demo, llm):  # noqa: F811
    with psycopg.connect(demo.dsn, autocommit=True) as c:
        iid = c.execute("SELECT nl2sql.add_instruction(%s)", (f"  {RULE}\v\n",)).fetchone()[0]
        row = c.execute(
            "SELECT instruction, embedding IS NULL FROM nl2sql.instruction WHERE id = %s", (iid,)
        ).fetchone()
        assert row == (RULE, True)  # trimmed, pending
        listed = c.execute("SELECT instruction FROM nl2sql.instructions").fetchall()
        assert listed == [(RULE,)]
        with pytest.raises(
            psycopg.errors.RaiseException, match="^nl2sql: the instruction is empty"
        ):
            c.execute("SELECT nl2sql.add_instruction(' ')")
        # the same text again: kept once
        assert c.execute("SELECT nl2sql.add_instruction(%s)", (RULE,)).fetchone()[0] == iid
    llm.clear()
    llm.set_default("SELECT name FROM singer ORDER BY name")
    with nl2sql.connect(demo.dsn) as client:
        client.ask("Which singers are there?")
    assert RULE in _prompts(llm)
    with psycopg.connect(demo.dsn) as c:
        assert c.execute(
            "SELECT embedding IS NOT NULL FROM nl2sql.instruction WHERE id = %s", (iid,)
        ).fetchone() == (True,)


def test_pending_instruction_is_skipped_until_reindex(cluster, demo, llm):  # noqa: F811

    with psycopg.connect(demo.dsn, autocommit=True) as c:
        c.execute("SELECT nl2sql.add_instruction(%s)", (RULE,))
    llm.clear()
    llm.set_default("SELECT name FROM singer ORDER BY name")
    # a role that may not update nl2sql's tables leaves it pending: not in its prompt
    with nl2sql.connect(cluster.dsn(demo.name, READER)) as client:
        client.ask("Which singers are there?")
    assert RULE not in _prompts(llm)
    with psycopg.connect(demo.dsn) as c:
        pending = "SELECT count(*) FROM nl2sql.instruction WHERE embedding IS NULL"
        assert c.execute(pending).fetchone() == (1,)
        with nl2sql.connect(demo.dsn) as client:
            client.reindex()
        assert c.execute(pending).fetchone() == (0,)
    llm.clear()
    with nl2sql.connect(cluster.dsn(demo.name, READER)) as client:
        client.ask("Which singers are there?")
    assert RULE in _prompts(llm)


TERM, DEFINITION = "veteran singer", "a singer aged 40 or more: filter on singer.age >= 40"


def test_add_term_beside_reaches_the_prompt(demo, llm):  # noqa: F811
    with psycopg.connect(demo.dsn, autocommit=True) as c:
        tid = c.execute("SELECT nl2sql.add_term(%s, %s)", (f" {TERM}\v", "old")).fetchone()[0]
        # upserted on the lower-cased term, as in the extension
        again = c.execute("SELECT nl2sql.add_term(%s, %s)", (TERM.upper(), DEFINITION)).fetchone()
        assert again == (tid,)
        listed = c.execute("SELECT term, definition FROM nl2sql.terms").fetchall()
        assert listed == [(TERM.upper(), DEFINITION)]
        with pytest.raises(psycopg.errors.RaiseException, match="^nl2sql: term and definition"):
            c.execute("SELECT nl2sql.add_term('x', ' ')")
        # with an sql_expression: a deferred call (tests/beside/test_deferred_beside.py)
        assert c.execute("SELECT nl2sql.add_term('adult', 'over 18', 'age >= 18')").fetchone() == (
            None,
        )
    llm.clear()
    llm.set_default("SELECT name FROM singer WHERE age >= 40")
    with nl2sql.connect(demo.dsn) as client:
        client.ask("Which veteran singers are there?")
    assert DEFINITION in _prompts(llm)
