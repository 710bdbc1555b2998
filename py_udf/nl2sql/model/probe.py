"""Whether each configured model's endpoint answers: one ``GET /models`` per model (no text is
sent, so nothing passes the gate), all in parallel threads under one overall time limit; for
``nl2sql.doctor()`` (docs/install.md "doctor()")."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import wait
from dataclasses import dataclass

from ..core.errors import DeadlineExceeded
from ..core.redaction import redact, secret, url_secrets
from ..core.types import ModelConfig
from ..net import deadline as net_deadline

__all__ = ["Reach", "list_models", "probe_all"]

PER_MODEL_S = 5.0  # the most one endpoint's answer is awaited
TOTAL_S = 10.0  # the most all of them together are awaited
SLICE_S = 0.2  # the wait is sliced so that a cancel lands (``tick``)


@dataclass
class Reach:
    """One endpoint's answer to the probe."""

    model: str  # ``ModelConfig.name``
    key_set: bool | None  # the key variable is set (None: the model names none)
    outcome: str  # 'ok', 'http', 'auth', 'timeout', 'unreachable', 'error', 'skipped'
    detail: str  # what happened, with the key redacted
    status_code: int | None = None  # the HTTP status, when one came back
    ms: float | None = None  # the request's wall time
    listed: tuple[str, ...] | None = None  # the model ids GET /models listed (None: not read)


def list_models(cfg: ModelConfig, key: str | None, timeout_s: float) -> Reach:
    """Ask one endpoint for its model list with the openai client (no retries), under an overall
    deadline (``openai_call.get_here``).

    Args:
        cfg: the model's configuration (``base_url``, ``name``).
        key: the API key from the server's environment, or None.
        timeout_s: the request's time limit in seconds.

    Returns:
        A ``Reach``: ``ok`` when the list came back; ``auth`` on HTTP 401/403; ``http`` on
        another status (the server answered: reachable, but no model list); ``timeout``;
        ``unreachable`` (connection refused, DNS, TLS); ``error`` for anything else.
    """
    import openai  # heavy; only the doctor probes (a question's backend relays its calls)

    from . import openai_call  # the same kept clients and overall deadline as a model call

    t0 = time.perf_counter()

    def done(outcome: str, detail: str, code: int | None = None, listed=None) -> Reach:
        ms = (time.perf_counter() - t0) * 1000
        secrets = [key, *url_secrets(cfg.base_url)]
        return Reach(cfg.name, None, outcome, redact(detail, secrets)[:300], code, ms, listed)

    try:
        listed = openai_call.get_here(cfg, "/models", timeout_s)
        data = listed.get("data") if isinstance(listed, dict) else None
        ids = tuple(str(m.get("id"))[:200] for m in data or [] if isinstance(m, dict))[:100]
        detail = f"{cfg.endpoint} answered GET /models ({', '.join(ids[:5]) or 'empty'})"
        return done("ok", detail, listed=ids)
    except (openai.APITimeoutError, DeadlineExceeded):
        return done("timeout", f"{cfg.endpoint}: no answer within {timeout_s:g} s")
    except openai.APIConnectionError as e:
        return done("unreachable", f"cannot reach {cfg.endpoint} ({e.__cause__ or e})")
    except openai.APIStatusError as e:
        kind = "auth" if e.status_code in (401, 403) else "http"
        return done(kind, f"{cfg.endpoint} answered HTTP {e.status_code}: {e}", e.status_code)
    except Exception as e:  # noqa: BLE001 - any failure is the probe's answer
        return done("error", f"{cfg.endpoint}: {type(e).__name__}: {e}")


def probe_all(
    models: list[ModelConfig],
    tick: Callable[[], None] = lambda: None,
    per_model_s: float = PER_MODEL_S,
    total_s: float = TOTAL_S,
    ask: Callable[[ModelConfig, str | None, float], Reach] = list_models,
) -> list[Reach]:
    """Probe every model's endpoint at once (one thread each); a model whose key variable is
    named but unset is not asked.

    Args:
        models: the enabled models.
        tick: called between slices of the wait on the main thread (``spi.cancel_point``).
        per_model_s: each request's time limit in seconds (at most the model's ``timeout_s``).
        total_s: the most the whole probe waits, in seconds.
        ask: the request (``list_models``; tests pass their own).

    Returns:
        One ``Reach`` per model, in the order given; ``timeout`` for one still out after
        ``total_s``, ``skipped`` for one whose key is not set.
    """
    out: dict[int, Reach] = {}
    pending = {}
    deadline = time.monotonic() + total_s
    group = net_deadline.Group()  # the requests' deadlines: ended at once when the wait ends
    try:
        for i, cfg in enumerate(models):
            key = secret(cfg.api_key_env)
            if cfg.api_key_env and not key:
                out[i] = Reach(cfg.name, False, "skipped", f"{cfg.api_key_env} is not set")
                continue
            limit = min(per_model_s, cfg.timeout_s, total_s)
            f = net_deadline.spawn(ask, cfg, key, limit, name="nl2sql-doctor", group=group)
            pending[f] = i
        while pending and time.monotonic() < deadline:
            finished, _ = wait(list(pending), timeout=min(SLICE_S, deadline - time.monotonic()))
            for f in finished:
                out[pending.pop(f)] = f.result()
            tick()
        for i in pending.values():
            out[i] = Reach(models[i].name, None, "timeout", f"no answer within {total_s:g} s")
    finally:
        group.expire()
    for i, cfg in enumerate(models):
        if out[i].key_set is None and cfg.api_key_env:
            out[i].key_set = True
    return [out[i] for i in range(len(models))]
