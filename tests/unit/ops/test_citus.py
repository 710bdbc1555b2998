"""Citus rules without a database: without Citus the indexer's SQL names no Citus object (and
every statement parses), and an unchanged distributed table is skipped without reading its
data (a scripted coordinator answers the indexer's statements). tests/db/test_citus.py runs the
SQL against stand-ins of Citus's objects."""

from __future__ import annotations

import contextlib

import pytest
import sqlglot

from nl2sql.ops import _citus as citus


def test_without_citus_the_plan_names_no_citus_object():
    sql = citus.plan_query(False)
    assert "citus" not in sql.lower() and "shard" not in sql.lower()
    assert "relation_is_a_known_shard" in citus.plan_query(True)
    for text in (citus.plan_query(False), citus.plan_query(True), citus.shard_stats_query()):
        sqlglot.parse_one(text.replace("$1", "NULL"), read="postgres")  # one valid statement


class _FakePlpy:
    """Answers the indexer's statements as a Citus coordinator would, from canned rows, and
    records every statement; ``spi.run`` statements (the per-table reads) stop the test."""

    class Read(Exception):
        pass

    class SPIError(Exception):
        pass

    @staticmethod
    def subtransaction():
        return contextlib.nullcontext()

    def __init__(self, stored_signature: str | None):
        self.stored = stored_signature
        self.seen: list[str] = []

    @staticmethod
    def quote_ident(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def prepare(self, sql, types=None):
        return sql

    def execute(self, sql, args=None):
        self.seen.append(sql)
        if "FROM nl2sql.setting" in sql:
            return []
        if "pg_extension WHERE extname = 'citus'" in sql or "pg_dist_partition" in sql:
            return [{"?column?": 1}]
        if "run_command_on_shards" in sql:
            return [{"n_rows": 40, "changes": 44, "shards": "102044,102045", "ok": True}]
        if "SELECT fingerprint, shard_signature" in sql:
            return [{"fingerprint": "f", "shard_signature": self.stored}]
        raise self.Read(sql)


def test_unchanged_distributed_table_is_skipped_without_reading_its_data():
    from nl2sql.core import spi
    from nl2sql.ops import table_index

    spi._PLANS.clear()
    signature = "citus:44:102044,102045:True"  # counters, shards, every shard answered

    def state(stored: str) -> dict:  # a table_states row: the coordinator's counters say nothing
        return {
            "schema": "public",
            "table": "concert",
            "kind": "r",
            "fingerprint": "f",
            "data_state": "coordinator",
            "rows_est": 0.0,
            "old_fingerprint": "f",
            "old_data_state": stored,
        }

    plpy = _FakePlpy(signature)
    assert (
        table_index.write_table(plpy, "public", "concert", False, state(signature))["skipped"]
        is True
    )
    assert not any("count(*)" in s or "GROUP BY" in s for s in plpy.seen)
    # counters moved: the table is read (the first read stops the fake), and forced too
    for stored, force in (("citus:43:102044,102045:True", False), (signature, True)):
        spi._PLANS.clear()
        with pytest.raises(_FakePlpy.Read):
            table_index.write_table(_FakePlpy(stored), "public", "concert", force, state(stored))
    spi._PLANS.clear()
