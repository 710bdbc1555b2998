"""The rows of nl2sql.doctor() from what was read (ops/_doctor_rows.py, ops/doctor.py's path
check): each check's ok, warn and fail paths, without a server. The checks in a cluster:
tests/db/test_doctor.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nl2sql.model.probe import Reach
from nl2sql.ops import _doctor_rows as rows
from nl2sql.ops import doctor


def test_version_key_and_least_versions():
    assert rows.version_key("0.8.1") > rows.version_key("0.8.0")
    assert rows.version_key("1.4-1") == (1, 4)
    assert rows.version_key(None) == ()
    assert rows.least_version("vector", 15) == "0.8.0"
    assert rows.least_version("vector", 18) == "0.8.1"
    assert rows.least_version("pg_cron", 18) == "1.6.6"
    assert rows.least_version("pg_trgm", 18) is None


def test_version_row():
    assert rows.version_row("0.3.0", "0.3.0", "0.3.0")[1] == "ok"
    older = rows.version_row("0.2.0", "0.3.0", "0.3.0")
    assert older[1] == "fail" and older[3] == "ALTER EXTENSION nl2sql UPDATE"
    newer = rows.version_row("0.3.0", "0.3.0", "0.2.0")
    assert newer[1] == "fail" and "0.3.0 Python package" in newer[3]
    waiting = rows.version_row("0.3.0", "0.4.0", "0.3.0")
    assert waiting[1] == "warn" and "ALTER EXTENSION nl2sql UPDATE" in waiting[3]


def test_server_row():
    ok = rows.server_row(170004, "17.4", (3, 13, 1))
    assert ok[1] == "ok" and "major 17" in ok[2] and "Python 3.13.1" in ok[2]
    assert rows.server_row(140010, "14.10", (3, 11, 2))[1] == "warn"


def test_venv_row():
    sp = "/v/lib/python3.11/site-packages"
    ok = rows.venv_row("/v", sp, sp + "/nl2sql", "postgres", [])
    assert ok[1] == "ok"
    bad = rows.venv_row("/v", sp, sp + "/nl2sql", "postgres", [sp + "/nl2sql/udf"])
    assert bad[1] == "fail" and "not readable by postgres" in bad[2] and "chmod" in bad[3]
    other = rows.venv_row("/v", sp, "/usr/lib/python3/dist-packages/nl2sql", "postgres", [])
    assert other[1] == "warn" and "imported from /usr/lib" in other[2]
    unset = rows.venv_row(None, sp, sp + "/nl2sql", "postgres", [])
    assert unset[1] == "ok" and "unset (default /opt/nl2sql/venv)" in unset[2]


def test_unreadable_names_what_this_process_may_not_read(tmp_path, monkeypatch):
    pkg = tmp_path / "nl2sql"
    (pkg / "udf").mkdir(parents=True)
    (pkg / "udf" / "a.py").write_text("")
    assert doctor.unreadable([tmp_path], pkg) == []
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: real(p, m) and Path(p).name != "a.py")
    assert doctor.unreadable([tmp_path], pkg) == [os.fspath(pkg / "udf" / "a.py")]


def test_onnx_row():
    assert rows.onnx_row("/m.onnx", None, 90_000_000, False)[1] == "ok"
    torch = rows.onnx_row("/m.onnx", None, None, True)
    assert torch[1] == "warn" and "does not exist" in torch[2] and "--export-onnx" in torch[3]
    none = rows.onnx_row("/m.onnx", None, None, False)
    assert none[1] == "fail" and "nothing embeds" in none[2]
    unreadable = rows.onnx_row("/m.onnx", "/m.onnx is not readable", None, False)
    assert unreadable[1] == "fail" and "not readable" in unreadable[2]


def test_embedder_row():
    assert rows.embedder_row("local", {})[1] == "ok"
    up = {"answers": True, "pid": 7, "started": True, "error": None, "fallback": None}
    ok = rows.embedder_row("shared", up)
    assert ok[1] == "ok" and "pid 7" in ok[2] and "started by this call" in ok[2]
    assert rows.embedder_row("shared", {**up, "fallback": "it hung"})[1] == "warn"
    down = rows.embedder_row("shared", {"answers": False, "error": "did not start within 30 s"})
    assert down[1] == "fail" and "did not start" in down[2] and "embedder.log" in down[3]
    lost = rows.embedder_row("shared", {**up, "log_not_kept": "the shared process's insert failed"})
    assert lost[1] == "warn" and "insert failed" in lost[2] and "rolled back" in lost[2]
    assert "embedder.log" in lost[3]
    assert rows.embedder_row("local", {"log_not_kept": "not in use"})[1] == "ok"


@pytest.mark.parametrize(
    "args, status, says",
    [
        (("vector", "0.8.0", "0.8.0", 17), "ok", "vector 0.8.0"),
        (("vector", "0.8.0", "0.8.0", 18), "fail", "needs 0.8.1"),
        (("vector", None, None, 17), "fail", "not created"),
        (("pg_trgm", "1.6", "1.6", 15), "ok", "pg_trgm 1.6"),
        (("pg_trgm", None, "1.6", 15), "fail", "not created"),
        (("pg_cron", None, "1.6.5", 18, True), "fail", "needs 1.6.6"),
        # pg_cron's control file names 1.6 for every 1.6.x: not refused on 18 (PostgreSQL 18.6
        # with pg_cron 1.6.7 in scripts/majors_test.sh), 1.5 still is
        (("pg_cron", "1.6", "1.6", 18, True), "ok", "pg_cron 1.6"),
        (("pg_cron", "1.5", "1.5", 18, True), "fail", "needs 1.6.6"),
        (("pg_cron", None, "1.4-1", 15, False), "warn", "shared_preload_libraries"),
        (("pg_cron", None, "1.4-1", 15, True, "postgres"), "ok", "database postgres"),
        (("pg_cron", None, "1.4-1", 15, True), "warn", "not created here"),
        (("pg_stat_statements", "1.10", "1.10", 15, True), "ok", "1.10"),
        (("pg_stat_statements", None, "1.10", 15, False), "warn", "mine_queries"),
    ],
)
def test_extension_row(args, status, says):
    got = rows.extension_row(*args)
    assert got[0] == f"extension {args[0]}"
    assert got[1] == status, got
    assert says in got[2], got


@pytest.mark.parametrize(
    "listed, status",
    [
        (("qwen2.5-coder-1.5b-instruct",), "ok"),
        (("llama3", "mistral"), "warn"),  # a server of several models: another name asked
        ((), None),  # nothing listed: no row
        (None, None),  # not read
    ],
)
def test_served_row(listed, status):
    row = rows.served_row("local", "qwen2.5-coder-1.5b-instruct", listed)
    assert (row[1] if row else None) == status
    if status == "warn":
        assert "llama3" in row[2] and "add_model('local', 'llama3'" in row[3]


@pytest.mark.parametrize(
    "window, status",
    [(8192, "ok"), (3512, "ok"), (3511, "warn"), (2048, "warn"), (None, None)],
)
def test_context_row_against_the_prompt_budget(window, status):
    row = rows.context_row("local", window, 3000, 512)
    assert (row[1] if row else None) == status
    if status == "warn":
        assert "--ctx-size" in row[3] and "context_window" in row[3]


def test_key_place():
    assert rows.key_place("17/main", 17) == "/etc/postgresql/17/main/environment"
    assert "systemd" in rows.key_place("", 18) and "PostgreSQL 18" in rows.key_place(None, 18)


def _reach(outcome, key_set=True, detail="x", ms=3.0):
    return Reach("gpt", key_set, outcome, detail, None, ms)


def test_model_rows():
    place = "/etc/postgresql/17/main/environment"
    key, end = rows.model_rows("OPENAI_API_KEY", _reach("ok", detail="e answered"), place)
    assert key[1] == "ok" and "OPENAI_API_KEY is set" in key[2]
    assert end[0] == "model gpt endpoint" and end[1] == "ok"
    key, end = rows.model_rows("OPENAI_API_KEY", _reach("skipped", key_set=False), place)
    assert key[1] == "fail" and place in key[3] and end[1] == "warn"
    for outcome in ("auth", "timeout", "unreachable", "error"):
        _, end = rows.model_rows("OPENAI_API_KEY", _reach(outcome), place)
        assert end[1] == "fail" and end[3], outcome
    _, end = rows.model_rows(None, _reach("http"), place)
    assert end[1] == "warn"
    key, _ = rows.model_rows(None, _reach("ok", key_set=None), place)
    assert key[1] == "ok" and "api_key_env is NULL" in key[2]


def test_index_row():
    assert rows.index_row(0, 0, 0, 0, None)[1] == "warn"
    never = rows.index_row(3, 3, 0, 0, None)
    assert never[1] == "fail" and "nl2sql.reindex()" in never[3]
    assert rows.index_row(3, 0, 0, 0, "2026-11-25")[1] == "ok"
    stale = rows.index_row(3, 1, 1, 2, "2026-11-25")
    assert stale[1] == "warn" and "1 changed" in stale[2] and "2 queued" in stale[2]


def test_settings_row():
    assert rows.settings_row([]) == ("settings", "ok", "all at their defaults", "")
    assert rows.settings_row([("k_examples", "9")])[2] == "all at their defaults"
    changed = rows.settings_row([("k_examples", "4")])
    assert changed[1] == "ok" and "k_examples = 4 (default 9)" in changed[2]
    assert rows.settings_row([("k_exampels", "4")])[1] == "warn"
    bad = rows.settings_row([("k_examples", "many")])
    assert bad[1] == "fail" and "'many'" in bad[2]


def test_roles_row():
    assert "every role" in rows.roles_row(True, [])[2]
    none = rows.roles_row(False, [])
    assert none[1] == "warn" and "GRANT EXECUTE" in none[3]
    some = rows.roles_row(False, [f"r{i}" for i in range(25)])
    assert some[1] == "ok" and "25 roles" in some[2] and "and 5 more" in some[2]
