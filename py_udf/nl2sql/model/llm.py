"""Model calls to OpenAI-compatible endpoints: ``call_model``, ``call_models``,
``call_models_during``; relayed or made here (docs/internals/model.md "Model calls")."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import asdict, dataclass
from typing import NamedTuple

from ..core.errors import ConfigError, EmbedderUnavailable, GateError
from ..core.redaction import env_secrets, redact, url_secrets
from ..core.types import LLMReply, ModelConfig
from ..net import deadline
from . import capability, tokens
from .config import RELAYS
from .gate import Gated

WAIT_SLICE_S = 0.2
MIN_PROMPT_BUDGET = 500  # tokens: the setting prompt_token_budget's own minimum


def pick_model(models: list[ModelConfig], setting: str, name: str) -> ModelConfig:
    """Pick the model a setting names, or the first (PreSQL-writing) model when it is empty.

    Args:
        models: the enabled models, PreSQL writer first (non-empty).
        setting: the setting's key (``selection_model``, ``narrate_model``), for the message.
        name: the setting's value ('' for the first model).

    Returns:
        The model.

    Raises:
        ConfigError: the named model is not enabled.
    """
    if not name:
        return models[0]
    for m in models:
        if m.name == name:
            return m
    raise ConfigError(
        f"nl2sql: setting {setting!r} names {name!r}, which is not an "
        f"enabled model ({', '.join(m.name for m in models)}); fix it with "
        f"SELECT nl2sql.set_setting('{setting}', '<name>') or '' for the "
        f"first model (the PreSQL writer)"
    )


def fitted_budget(cfg: ModelConfig, budget: int) -> tuple[int, str | None]:
    """The prompt's token budget for a model whose server states a context window: the window
    less the model's output cap and a sixth for another tokenizer's counts, at most ``budget``.

    Args:
        cfg: the model the prompt is for.
        budget: the setting ``prompt_token_budget`` (tokens).

    Returns:
        ``(tokens, why)``: ``why`` names the window when it lowered the budget, else None.
    """
    window, how = capability.window_of(cfg)
    if not window:
        return budget, None
    room = int((window - capability.decide(cfg).max_output) * 5 / 6)
    if room >= budget:
        return budget, None
    fitted = max(room, MIN_PROMPT_BUDGET)
    return fitted, f"context window {window} tokens ({how}) less the output cap"


def _spawn(fn: Callable, *args, group: deadline.Group | None = None) -> Future:
    """Run a call in a daemon thread (``net.deadline.spawn``: an idle one of an earlier call,
    else a new one), named ``nl2sql-llm`` while it runs; its deadlines join ``group``."""
    return deadline.spawn(fn, *args, name="nl2sql-llm", group=group)


def call_model(
    cfg: ModelConfig,
    messages: Gated,
    timeout_s: float | None = None,
    n: int = 1,
    temperature: float | None = None,
) -> LLMReply:
    """Make one chat-completions call to a model's OpenAI-compatible endpoint.

    Relayed or made here; a model failure comes back in ``LLMReply.error``, keys masked.

    Args:
        cfg: the model's configuration.
        messages: the chat messages as the gate sealed them (``gate.Gate.seal``).
        timeout_s: the call's hard deadline in seconds, retries and a trickling reply included;
            None or 0 uses ``cfg.timeout_s``.
        n: number of samples asked for in one request (self-consistency); at least 1.
        temperature: sampling temperature overriding ``cfg.temperature``; None keeps it.

    Returns:
        ``LLMReply``: ``text`` (the first sample; None on failure), ``choices`` (every
        non-empty sample), ``error``, ``latency_ms`` (ms), ``prompt_tokens``,
        ``completion_tokens`` (the endpoint's ``usage``, else counted: ``tokens_source``),
        ``cost_usd`` (None without prices; ``tokens.account``).

    Raises:
        GateError: ``messages`` did not come from the gate (a bug, not a model failure).
    """
    if not isinstance(messages, Gated):
        raise GateError(
            f"nl2sql: model {cfg.name!r} was asked with messages that did not pass "
            f"the gate ({type(messages).__name__}); build them with gate.Gate.seal"
        )
    timeout_s = timeout_s or cfg.timeout_s
    sent = messages.as_list()
    reply = _relayed(cfg, sent, timeout_s, n, temperature)
    if reply is None:
        from . import openai_call  # heavy (openai): only a backend that makes its own call loads it

        reply = openai_call.call_here(cfg, sent, timeout_s, n, temperature)
    return tokens.account(cfg, sent, reply)


def _relayed(
    cfg: ModelConfig, messages: list[dict], timeout_s: float, n: int, temperature: float | None
) -> LLMReply | None:
    """The call made by the shared process (``embedding.client.relay_chat``, through ``config.RELAYS``), or None to make it
    here (the process is not in use, not running, or too old to relay)."""
    t0 = time.perf_counter()
    payload = {
        "config": asdict(cfg),
        "messages": messages,
        "timeout_s": timeout_s,
        "n": n,
        "temperature": temperature,
    }
    try:
        relay = RELAYS["chat"]
        got = relay(payload, timeout_s) if relay else None
    except EmbedderUnavailable as e:
        secrets = env_secrets([cfg.api_key_env]) + url_secrets(cfg.base_url)
        return LLMReply(
            model=cfg.name,
            text=None,
            latency_ms=(time.perf_counter() - t0) * 1000,
            error=redact(f"model {cfg.name!r}: {e}", secrets),
        )
    if got is None:
        return None
    secrets = env_secrets([cfg.api_key_env]) + url_secrets(
        cfg.base_url
    )  # the process redacted too; so does the backend
    err = got.get("error")
    return LLMReply(
        model=cfg.name,
        text=got.get("text"),
        error=redact(err, secrets) if err else None,
        latency_ms=(time.perf_counter() - t0) * 1000,
        prompt_tokens=int(got.get("prompt_tokens") or 0),
        completion_tokens=int(got.get("completion_tokens") or 0),
        choices=list(got.get("choices") or []),
        reasoning_tokens=int(got.get("reasoning_tokens") or 0),
        request=dict(got.get("request") or {}),
        learned=[redact(str(x), secrets) for x in got.get("learned") or []],
        context_window=got.get("context_window"),
    )


@dataclass
class ModelRound:
    """The outcome of one round of concurrent model calls (``call_models_during``)."""

    replies: list[LLMReply]  # in the order of the calls
    wait_ms: float  # submission → the last reply in (or abandoned), ms: model time
    work_ms: float = 0.0  # the overlapped work's time on the calling thread, ms


def call_models(
    calls: list[tuple], on_wait: Callable[[], None] | None = None, budget_s: float | None = None
) -> list[LLMReply]:
    """Run several model calls concurrently, each in its own thread.

    Args:
        calls: each ``(cfg, messages)`` or ``(cfg, messages, n, temperature)``, as the
            arguments of ``call_model``.
        on_wait: called on the calling thread every ``WAIT_SLICE_S`` seconds while waiting; it
            may raise to cancel (outstanding calls are abandoned). None for none.
        budget_s: seconds left before the caller's statement_timeout, or None.

    Returns:
        One ``LLMReply`` per call, in the order of ``calls``.

    Raises:
        GateError: a call's messages did not come from the gate.
    """
    return call_models_during(calls, None, on_wait, budget_s).replies


def call_models_during(
    calls: list[tuple],
    work: Callable[[], None] | None,
    on_wait: Callable[[], None] | None = None,
    budget_s: float | None = None,
    on_reply: Callable[[int, LLMReply, int], None] | None = None,
) -> ModelRound:
    """Run model calls as ``call_models`` does, doing other work on the calling thread meanwhile.

    Args:
        calls: as ``call_models``.
        work: work that needs no reply of this round, run once right after the calls are
            submitted (its exceptions propagate; the calls are then abandoned). None for none.
        on_wait: as ``call_models``.
        budget_s: as ``call_models``.
        on_reply: ``on_reply(i, reply, still_out)``, called on the calling thread for each reply
            as it arrives (not for abandoned calls). None for none.

    Returns:
        ``ModelRound``: the replies in the order of ``calls``, ``wait_ms`` (the models' time,
        until the last reply arrived or was abandoned) and ``work_ms`` (``work``'s time), in ms.

    Raises:
        GateError: a call's messages did not come from the gate.
    """
    t0 = time.monotonic()
    rnd = _Round(_round_calls(calls, budget_s), t0, budget_s)
    rnd.submit()
    work_ms = 0.0
    if work is not None:
        tw = time.monotonic()
        work()
        work_ms = (time.monotonic() - tw) * 1000
    rnd.wait(on_wait, on_reply)
    return rnd.outcome(work_ms)


class _Call(NamedTuple):
    """One call of a round: ``call_model``'s arguments and its time limit in seconds."""

    cfg: ModelConfig
    messages: Gated
    n: int
    temperature: float | None
    limit_s: float


def _round_calls(calls: list[tuple], budget_s: float | None) -> list[_Call]:
    """The calls with defaults filled in and their limits (``min(cfg.timeout_s, budget_s)``, at
    least 0.05 s); refused unless every call's messages passed the gate."""
    calls = [(c[0], c[1], c[2] if len(c) > 2 else 1, c[3] if len(c) > 3 else None) for c in calls]
    for cfg, msgs, *_ in calls:
        if not isinstance(msgs, Gated):
            raise GateError(
                f"nl2sql: model {cfg.name!r} was asked with messages that did not "
                f"pass the gate; build them with gate.Gate.seal"
            )
    limits = [
        min(cfg.timeout_s, budget_s) if budget_s is not None else cfg.timeout_s for cfg, *_ in calls
    ]
    return [_Call(*c, max(lim, 0.05)) for c, lim in zip(calls, limits)]


class _Round:
    """One round of concurrent calls while the calling thread waits on them: their futures,
    the replies of abandoned calls and when each call ended (``time.monotonic``)."""

    def __init__(self, calls: list[_Call], t0: float, budget_s: float | None):
        self.calls, self.t0, self.budget_s = calls, t0, budget_s
        self.futures: list[Future] = []
        self.replies: list[LLMReply | None] = [None] * len(calls)  # abandoned calls' replies
        self.done_at = [t0] * len(calls)
        self.reported: set[int] = set()
        self.group = deadline.Group()  # the calls' deadlines: a cancel ends them all at once

    def submit(self) -> None:
        """Start every call in its own thread, stamping its end time when it is done."""
        for i, c in enumerate(self.calls):
            f = _spawn(
                call_model,
                c.cfg,
                c.messages,
                c.limit_s,
                *(() if c.n == 1 and c.temperature is None else (c.n, c.temperature)),
                group=self.group,
            )
            f.add_done_callback(self._stamp(i))
            self.futures.append(f)

    def _stamp(self, i: int) -> Callable[[Future], None]:
        """A done-callback recording when call ``i`` ended."""

        def at(_f: Future) -> None:
            self.done_at[i] = time.monotonic()

        return at

    def _pending(self) -> set[Future]:
        """The calls still out (neither done nor abandoned)."""
        return {f for i, f in enumerate(self.futures) if not f.done() and self.replies[i] is None}

    def wait(
        self,
        on_wait: Callable[[], None] | None,
        on_reply: Callable[[int, LLMReply, int], None] | None,
    ) -> None:
        """Wait in ``WAIT_SLICE_S`` slices until every call is done or abandoned, reporting
        arrivals to ``on_reply`` and calling ``on_wait`` between slices; when either raises
        (a cancel), every call of the round is ended at once (its connections shut)."""
        try:
            self._wait(on_wait, on_reply)
        except BaseException:
            self.group.expire()
            raise

    def _wait(self, on_wait, on_reply) -> None:
        while True:
            if on_reply is not None:
                self._report_arrivals(on_reply)
            pending = self._pending()
            if not pending:
                break
            _, pending = wait(pending, timeout=WAIT_SLICE_S, return_when=FIRST_COMPLETED)
            self._abandon_overdue(pending)
            if pending and on_wait is not None:
                on_wait()

    def _report_arrivals(self, on_reply: Callable[[int, LLMReply, int], None]) -> None:
        """Hand each reply not yet reported to ``on_reply``, in arrival order."""
        for i in sorted(
            (
                i
                for i, f in enumerate(self.futures)
                if f.done() and i not in self.reported and self.replies[i] is None
            ),
            key=lambda i: self.done_at[i],
        ):
            self.reported.add(i)
            on_reply(i, self.futures[i].result(), len(self._pending()))

    def _abandon_overdue(self, pending: set[Future]) -> None:
        """Give each call of ``pending`` past its limit an error reply and drop it from
        ``pending``."""
        now = time.monotonic() - self.t0
        for i, f in enumerate(self.futures):
            c = self.calls[i]
            if f in pending and now >= c.limit_s:
                why = (
                    "the time left before statement_timeout"
                    if self.budget_s is not None and c.limit_s < c.cfg.timeout_s
                    else "timeout_s"
                )
                self.replies[i] = LLMReply(
                    model=c.cfg.name,
                    text=None,
                    latency_ms=now * 1000,
                    error=(
                        f"model {c.cfg.name!r} at {c.cfg.endpoint}: no answer "
                        f"within {c.limit_s:.3g} s ({why}); abandoned"
                    ),
                )
                self.done_at[i] = self.t0 + min(now, c.limit_s)
                pending.discard(f)

    def outcome(self, work_ms: float) -> ModelRound:
        """The round's ``ModelRound``; its wait ends when the last call ended or was
        abandoned."""
        out = [r if r is not None else f.result() for r, f in zip(self.replies, self.futures)]
        end = time.monotonic()
        # a future's done-callback runs just after its waiters wake: one not stamped yet ended now
        last = max((d if d > self.t0 else end for d in self.done_at), default=self.t0)
        return ModelRound(out, (last - self.t0) * 1000, work_ms)
