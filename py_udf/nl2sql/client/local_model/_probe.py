"""What the running ``llama-server`` says of itself: ``GET /health``, ``/props`` (the model, the
context, the slots) and ``/metrics`` (tokens per second), each under a short overall timeout
(llama.cpp's server documentation, tools/server/README.md)."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx

__all__ = ["PROBE_TIMEOUT_S", "health", "metrics", "props"]

PROBE_TIMEOUT_S = 5.0


def _get(s, path: str, key: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    url = f"http://127.0.0.1:{s.port}{path}"
    return httpx.get(url, headers=headers, timeout=PROBE_TIMEOUT_S)


def health(s, key: str | None) -> str:
    """Whether the server answers.

    Args:
        s: the service (its ``port``). key: the API key.

    Returns:
        ``ok``, ``loading`` (503 while the model loads), or why not (``unreachable: …``,
        ``HTTP 401``).
    """
    try:
        r = _get(s, "/health", key)
    except httpx.HTTPError as e:
        return f"unreachable: {type(e).__name__}"
    if r.status_code == 200:
        return "ok"
    return "loading" if r.status_code == 503 else f"HTTP {r.status_code}"


def props(s, key: str | None) -> dict[str, Any]:
    """The served model, the context per slot and the slot count.

    Args:
        s: the service (its ``port``). key: the API key.

    Returns:
        ``{"model", "n_ctx", "total_slots"}`` from ``/props`` ({} when it cannot be read).
    """
    try:
        body = _get(s, "/props", key).json()
    except (httpx.HTTPError, ValueError):
        return {}
    settings = body.get("default_generation_settings") or {}
    return {
        "model": body.get("model_alias") or body.get("model_path"),
        "n_ctx": settings.get("n_ctx"),
        "total_slots": body.get("total_slots"),
    }


def metrics(s, key: str | None) -> dict[str, float]:
    """The server's Prometheus counters and gauges.

    Args:
        s: the service (its ``port``). key: the API key.

    Returns:
        Name (``llamacpp:`` dropped) to value, {} on error: ``prompt_tokens_seconds`` and
        ``predicted_tokens_seconds`` are the recent tokens/s, ``requests_processing`` and
        ``requests_deferred`` the requests in slots and waiting for one.
    """
    try:
        r = _get(s, "/metrics", key)
    except httpx.HTTPError:
        return {}
    if r.status_code != 200:
        return {}
    out = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#") and " " in line:
            name, value = line.rsplit(" ", 1)
            try:
                out[name.removeprefix("llamacpp:")] = float(value)
            except ValueError:
                continue
    return out
