"""model/probe.py: every model probed at once under one time limit, a model whose key variable
is unset not asked, and a real GET /models against the loopback server (reachable, closed port,
wrong path). nl2sql.doctor()'s rows from these: tests/unit/ops/test_doctor_rows.py."""

from __future__ import annotations

import threading
import time

from nl2sql.core.types import ModelConfig
from nl2sql.model import probe


def _cfg(name, env=None, url="http://127.0.0.1:9/v1", timeout_s=60.0):
    return ModelConfig(name=name, model=name, base_url=url, api_key_env=env, timeout_s=timeout_s)


def test_parallel_under_one_limit_and_unset_keys_skipped(monkeypatch):
    monkeypatch.setenv("DOCTOR_KEY_SET", "sk-doctor-abcdefghijklmnop")
    monkeypatch.delenv("DOCTOR_KEY_UNSET", raising=False)
    seen = {}
    release = threading.Event()

    def ask(cfg, key, limit):
        seen[cfg.name] = (key, limit)
        if cfg.name == "slow":
            release.wait(5)
        return probe.Reach(cfg.name, None, "ok", "fine")

    models = [
        _cfg("a", "DOCTOR_KEY_SET", timeout_s=2.0),
        _cfg("nokey", "DOCTOR_KEY_UNSET"),
        _cfg("slow"),
    ]
    ticks = []
    got = probe.probe_all(models, tick=lambda: ticks.append(1), total_s=0.5, ask=ask)
    release.set()
    assert [r.model for r in got] == ["a", "nokey", "slow"]
    assert got[0].outcome == "ok" and got[0].key_set is True
    assert seen["a"] == ("sk-doctor-abcdefghijklmnop", 0.5)  # min(per model, timeout_s, total)
    assert got[1].outcome == "skipped" and got[1].key_set is False and "nokey" not in seen
    assert got[2].outcome == "timeout" and "0.5 s" in got[2].detail
    assert got[2].key_set is None  # it names no key variable
    assert ticks  # the wait was sliced


def test_list_models_against_the_loopback_server():
    from nl2sql_indexer.dev.loopback import LoopbackLLM

    server = LoopbackLLM().start()
    try:
        ok = probe.list_models(_cfg("m", url=server.base_url), "sk-secret-0123456789abcd", 3.0)
        assert ok.outcome == "ok" and "answered GET /models" in ok.detail and ok.ms is not None
        wrong = probe.list_models(_cfg("m", url=server.base_url + "/nothing"), None, 3.0)
        assert wrong.outcome == "http" and wrong.status_code == 404
    finally:
        server.stop()
    t0 = time.monotonic()
    closed = probe.list_models(_cfg("m"), None, 2.0)
    assert closed.outcome == "unreachable" and "cannot reach http://127.0.0.1:9/v1" in closed.detail
    assert time.monotonic() - t0 < 10  # no retries
