"""One model call as the requests its endpoint takes: the shape ``capability`` decides, one
change per refused parameter (remembered), one retry with a larger output budget when the
thinking spent it all, separate requests for the samples ``n`` did not bring, and the prompt
fitted to the server's context window (docs/internals/model.md "Capabilities")."""

from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

import openai

from ..core.errors import ModelError
from ..core.types import LLMReply, ModelConfig
from ..net import room
from . import _reply, capability, tokens
from .capability import Fix

MAX_SHAPES = 5  # requests of different shapes one call may try (each changes one parameter)
MAX_PARALLEL_SAMPLES = 8  # separate sample requests in flight at once
MIN_ANSWER = 128  # the least output room worth a request, tokens
MAX_ROOM_RETRIES = 3  # requests sent again after a server refused them for room
_CONTEXT = re.compile(
    r"context (size|length|window)|exceeds? (the )?(available )?context|maximum context|"
    r"too many tokens|prompt is too long",
    re.I,
)
_FIX_HINT = (
    "max_completion_tokens => N or max_tokens => N, send_temperature => false, "
    "send_n => false, reasoning_effort => ''"
)


def is_final_server_error(text: str) -> bool:
    """Whether a 5xx answer's body says the request itself is refused (a prompt over the
    context, llama.cpp's "Only one completion choice is allowed" for ``n`` > 1): sending it
    again would be refused again, so the client does not retry it.

    Args:
        text: the response body.

    Returns:
        True for such a refusal.
    """
    return is_context_refusal(text) or (
        capability.fix_for(text, None, capability.Capability(), {"n": 2}) is not None
    )


def is_context_refusal(text: str) -> bool:
    """Whether an endpoint's error text says the prompt does not fit its context.

    Args:
        text: the error's message or body (llama.cpp, vLLM, OpenAI, Anthropic wordings).

    Returns:
        True when it names the context.
    """
    return bool(_CONTEXT.search(text or ""))


def _post(client, body: dict, timeout_s: float):
    """``POST /chat/completions`` with ``body`` as given, through the openai client's own
    request path (retries, errors, the deadline's hooks); the reply's JSON as sent (a dict, or
    whatever else the endpoint answered). openai's documented way to send a body as it is:
    ``chat.completions.create`` would first transform the parameters by their declared types,
    a third of a call's CPU for these plain JSON values (docs/benchmarks.md "Planning per
    question, and a model call's own cost").

    Args:
        client: the call's openai client. body: the request body. timeout_s: the request's
            time limit in seconds.

    Returns:
        The reply's JSON: a dict for a chat completion, else whatever the endpoint sent.

    Raises:
        openai.OpenAIError: as ``chat.completions.create`` raises it.
    """
    resp = client.post(
        "/chat/completions", cast_to=object, body=body, options={"timeout": timeout_s}
    )
    if isinstance(resp, str):  # JSON under another content type: read as the typed reply was
        try:
            return json.loads(resp)
        except ValueError:
            return resp
    return resp


def _empty(got: _reply.Read) -> str:
    """Why a reply gave no answer: no choices at all (no chat completion), or no text in them."""
    if not got.choices:
        return "empty answer: the reply held no choices (it is no chat completion)"
    return "empty answer: the reply held no text (null content or only reasoning)"


class Exchange:
    """The requests of one call and what they taught: the capability in use, the shapes tried,
    the tokens every response spent (a cut reply's too)."""

    def __init__(self, cfg: ModelConfig, messages: list[dict], n: int, temperature: float | None):
        self.cfg, self.messages, self.n = cfg, messages, n
        self.temp = cfg.temperature if temperature is None else temperature
        self.cap = capability.decide(cfg)
        self.tried: list[dict] = []
        self.changed: set[str] = set()
        self.learned: list[str] = []
        self.requests = 0
        self.usage = _reply.Read()  # tokens summed over every response
        self.window: tuple[int | None, str] = (None, "")
        self.room_retries = 0
        self._prompt_n: int | None = None  # the prompt's estimated tokens, once counted
        self._llamacpp_samples()

    def _llamacpp_samples(self) -> None:
        """A llama.cpp server takes ``n`` only up to its slots and its ``usage`` then counts one
        choice: samples go as separate requests unless ``add_model`` says otherwise."""
        if self.n > 1 and self.cap.source.get("send_n") != "configured":
            self.window = capability.window_of(self.cfg)
            capability.server_facts(self.cap, self.window[1])

    # -- the call -----------------------------------------------------------------------
    def run(self, client, timeout_s: float, t0: float) -> LLMReply:
        """Make the call's requests.

        Args:
            client: the call's openai client; timeout_s: each request's time limit (the hard
                deadline bounds them all); t0: the call's ``perf_counter`` start.

        Returns:
            The ``LLMReply``: every sample's text, the tokens of every response.

        Raises:
            ModelError: the prompt does not fit the window, the budget cut every answer, or
                the endpoint refused every shape (openai's errors propagate otherwise).
        """
        got = self._first(client, timeout_s)
        texts = list(got.texts)
        if self.n > 1 and got.choices < self.n:
            if "n" in self.tried[-1] and got.choices <= 1:
                self._apply(Fix("send_n", False, f"n={self.n} answered with {got.choices} choice"))
            texts += self._more_samples(client, timeout_s, self.n - max(got.choices, 1))
        text = texts[0] if texts else None
        return self._reply(
            text, texts, None if text else _empty(got), (time.perf_counter() - t0) * 1000
        )

    def _first(self, client, timeout_s: float) -> _reply.Read:
        """The first response with an answer (or the last one cut), each refused parameter
        changed once, a cut budget raised once."""
        while True:
            self._fit_window()
            sent = capability.request_args(self.cap, self.n, self.temp)
            self.tried.append(sent)
            try:
                got = self._create(client, timeout_s, sent)
            except openai.APIStatusError as e:
                # a refused parameter: 400/422, or llama.cpp's 500 for n > 1 (not retried)
                if e.status_code not in (400, 422) and e.status_code < 500:
                    raise
                self._window_from(e)
                if self._for_room(e, client):
                    continue
                fix = capability.fix_for(_message(e), getattr(e, "param", None), self.cap, sent)
                if fix is None or fix.field in self.changed or len(self.tried) >= MAX_SHAPES:
                    raise
                self._apply(fix)
                continue
            if got.cut and "max_output" not in self.changed:
                bigger = min(
                    max(self.cap.max_output * 4, self.cfg.reasoning_max_tokens),
                    self.cfg.max_output_tokens,
                )
                if bigger > self.cap.max_output:
                    why = f"finish_reason length with no answer at {self.cap.max_output} tokens"
                    self._apply(Fix("max_output", bigger, why))
                    continue
            if got.cut:
                raise ModelError(self._cut_message(got))
            return got

    def _create(self, client, timeout_s: float, sent: dict) -> _reply.Read:
        """One request, once the server has room for it (``net.room``); its usage added to the
        call's."""
        self.requests += 1
        key = (self.cfg.base_url,)  # counted only for a server whose room is known
        need = self._prompt_tokens() + int(self.cap.max_output) if room.limit_of(key) else 0
        body = {"model": self.cfg.model, "messages": self.messages, **sent}
        with room.hold(key, need, getattr(client, "nl2sql_deadline", None)):
            got = _reply.read(_post(client, body, timeout_s))
        for f in ("prompt_tokens", "completion_tokens", "reasoning_tokens"):
            setattr(self.usage, f, getattr(self.usage, f) + getattr(got, f))
        if got.server_ms is not None:
            self.usage.server_ms = (self.usage.server_ms or 0.0) + got.server_ms
        if got.usage_note and got.usage_note not in self.learned:
            self.learned.append(got.usage_note)
            self.usage.usage_note = got.usage_note
        return got

    def _more_samples(self, client, timeout_s: float, k: int) -> list[str]:
        """``k`` more samples as separate concurrent requests of one choice each."""
        if k <= 0:
            return []
        sent = capability.request_args(self.cap, 1, self.temp)
        pool = ThreadPoolExecutor(max_workers=min(k, MAX_PARALLEL_SAMPLES))
        try:
            futures = [pool.submit(self._create, client, timeout_s, sent) for _ in range(k)]
            texts = []
            for f in futures:
                try:
                    texts += f.result().texts[:1]
                except Exception:  # noqa: BLE001 - a failed sample costs that sample only
                    pass
            return texts
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    # -- what the endpoint takes ----------------------------------------------------------
    def _apply(self, fix: Fix) -> None:
        """Change the capability as ``fix`` says, remembered for the model."""
        self.cap = capability.learn(self.cfg, self.cap, fix)
        self.changed.add(fix.field)
        self.learned.append(f"{fix.field} = {fix.value!r}: {fix.why}")

    def _fit_window(self) -> None:
        """Fit the output cap to the context window when the server says one; refuse a prompt
        that leaves no room for an answer (nothing is sent)."""
        self.window = capability.window_of(self.cfg)
        window, how = self.window
        if not window:
            return
        self.cap.context_window = window
        prompt = self._prompt_tokens()
        room = window - prompt
        if room >= self.cap.max_output:
            return
        if room >= min(self.cap.max_output, MIN_ANSWER):
            self.learned.append(
                f"output cap {self.cap.max_output} lowered to {room}: the prompt (~{prompt} "
                f"tokens) and the answer share the context window of {window} ({how})"
            )
            self.cap.max_output = room
            return
        raise ModelError(
            f"model {self.cfg.name!r} at {self.cfg.endpoint}: the prompt (~{prompt} tokens) "
            f"leaves no room for an answer in the context window of {window} tokens ({how}); "
            f"{_WINDOW_HINT}; nothing was sent"
        )

    def _prompt_tokens(self) -> int:
        """The prompt's tokens as estimated here, with a margin for another tokenizer (15 %)."""
        if self._prompt_n is not None:
            return self._prompt_n
        n = sum(tokens.count(str(m.get("content") or ""), self.cfg.model)[0] for m in self.messages)
        self._prompt_n = int((n + 4 * len(self.messages) + 3) * 1.15) + 16
        return self._prompt_n

    def _for_room(self, e: openai.APIStatusError, client) -> bool:
        """Whether to send again a request the server refused for room: a 5xx naming the
        context while the prompt alone fits the window (llama.cpp's slots share one KV cache,
        so requests together ran out of it). The server's window becomes the most that
        requests to it hold at once (``net.room``), and the request waits for room."""
        window = self.window[0]
        if (
            e.status_code < 500
            or not is_context_refusal(_message(e))
            or not window
            or self._prompt_tokens() + MIN_ANSWER > window
            or self.room_retries >= MAX_ROOM_RETRIES
        ):
            return False
        self.room_retries += 1
        room.limit((self.cfg.base_url,), window)
        if self.room_retries == 1:
            self.learned.append(
                f"refused for room (HTTP {e.status_code}, the context) while the prompt fits "
                f"the window of {window} tokens: requests to this server now share that window"
            )
        d = getattr(client, "nl2sql_deadline", None)
        time.sleep(min(0.2 * self.room_retries, max(d.left(), 0.0) if d else 1.0))
        return True

    def _window_from(self, e: openai.APIStatusError) -> None:
        """Keep the window a context refusal states (llama.cpp's ``n_ctx`` in its body)."""
        body = e.body if isinstance(e.body, dict) else {}
        inner = body.get("error")
        n_ctx = (inner if isinstance(inner, dict) else body).get("n_ctx")
        if isinstance(n_ctx, int) and n_ctx > 0:
            capability.remember_window(self.cfg, n_ctx, "the server's context refusal (n_ctx)")

    # -- what comes back ------------------------------------------------------------------
    def _cut_message(self, got: _reply.Read) -> str:
        """The error of a reply the output budget cut before any answer."""
        thought = f", {got.reasoning_tokens} of them reasoning" if got.reasoning_tokens else ""
        return (
            f"model {self.cfg.name!r} at {self.cfg.endpoint}: the reply was cut at its output "
            f"budget of {self.cap.max_output} tokens (finish_reason length{thought}) before "
            f"any answer; raise max_tokens (or max_completion_tokens) with nl2sql.add_model, "
            f"or the setting llm_max_output_tokens ({self.cfg.max_output_tokens}) that bounds "
            f"the retry with a larger budget"
        )

    def request_shown(self) -> dict:
        """What was sent, as the trace shows it.

        Returns:
            ``{"sent": the last shape's parameters, "requests": HTTP requests made,
            "shapes_tried" (when more than one), "context_window" (when known)}``.
        """
        out: dict = {"sent": dict(self.tried[-1]) if self.tried else {}, "requests": self.requests}
        if len(self.tried) > 1:
            out["shapes_tried"] = len(self.tried)
        if self.window[0]:
            out["context_window"] = self.window[0]
        return out

    def _reply(self, text, texts, error, latency_ms: float) -> LLMReply:
        u = self.usage
        request = self.request_shown()
        if u.server_ms is not None:  # the rest waited: for a slot of a busy server, the network
            request["server_ms"] = round(u.server_ms, 1)
            request["waited_ms"] = round(max(0.0, latency_ms - u.server_ms), 1)
        return LLMReply(
            model=self.cfg.name,
            text=text,
            error=error,
            latency_ms=latency_ms,
            prompt_tokens=u.prompt_tokens,
            completion_tokens=u.completion_tokens,
            choices=texts,
            reasoning_tokens=u.reasoning_tokens,
            request=request,
            learned=list(self.learned),
            context_window=self.window[0],
        )

    def failed(self, error: str, latency_ms: float) -> LLMReply:
        """The reply of a failed call.

        Args:
            error: why it failed (keys masked); latency_ms: its wall time, ms.

        Returns:
            The ``LLMReply``: the error, and the tokens its responses spent (a cut reply's).
        """
        return self._reply(None, [], error, latency_ms)


_WINDOW_HINT = (
    "raise the server's context (llama-server --ctx-size, shared among its --parallel slots; "
    "Ollama's num_ctx), lower the setting prompt_token_budget, or give the window with "
    "nl2sql.add_model(..., context_window => N)"
)


def _message(e: openai.APIStatusError) -> str:
    """An endpoint error's own message (the body's ``message``, else the exception's text)."""
    body = e.body
    if isinstance(body, list) and body:  # Gemini's compatibility layer answers a list
        body = body[0]
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
    return str(e)


def refusal(cfg: ModelConfig, e: Exception, ex: Exchange) -> str | None:
    """The error of a request the endpoint refused (HTTP 400/422, or a context refusal of any
    status), naming what was tried and the ``add_model`` argument that fixes it; None for any
    other failure.

    Args:
        cfg: the model.
        e: the exception of the last request.
        ex: the call's exchange.

    Returns:
        The message, or None.
    """
    if not isinstance(e, openai.APIStatusError):
        return None
    msg = " ".join(_message(e).split())[:300]
    if is_context_refusal(msg):
        window, how = ex.window
        size = f" of {window} tokens ({how})" if window else ""
        return (
            f"model {cfg.name!r} at {cfg.endpoint}: the prompt does not fit the server's "
            f"context window{size} (HTTP {e.status_code}: {msg}); {_WINDOW_HINT}"
        )
    if e.status_code not in (400, 422):
        return None
    shapes = "; then ".join(
        ", ".join(f"{k}={v}" for k, v in sent.items()) or "no optional parameter"
        for sent in ex.tried
    )
    return (
        f"model {cfg.name!r} at {cfg.endpoint} refused the request (HTTP {e.status_code}: "
        f"{msg}); tried: {shapes}; if a parameter is the cause, set what the endpoint takes "
        f"with nl2sql.add_model('{cfg.name}', '{cfg.model}', …, {_FIX_HINT})"
    )
