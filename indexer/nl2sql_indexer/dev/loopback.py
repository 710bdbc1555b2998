"""A scripted OpenAI-compatible chat-completions server on loopback.

Its answers are SCRIPTED, NOT A MODEL'S. No LLM is reachable from the machines this project
is built and tested on, so tests, demos and benchmarks start this server on 127.0.0.1 and
tell it, ahead of time, what to answer: rules ("for model M, when the prompt contains X,
answer Y"), replays ("for model M, the answer to question Q is the SQL S", e.g. the gold or
a recorded run), and an optional default. Everything it returns was written by a person or
a script; nothing here generates or judges SQL. Any result obtained against it measures the
pipeline around the model, never a model.

It speaks the real chat-completions protocol over HTTP (stdlib ``http.server`` only), so
the client-side code path -- the ``openai`` client, retries, timeouts, error handling -- is
exactly the one used against a real endpoint:

* ``POST /v1/chat/completions`` -- returns a ``chat.completion`` object with ``n`` identical
  choices. ``usage`` counts tokens as a real endpoint does (cl100k_base through nl2sql's
  tokenizer, with OpenAI's per-message overhead); a rule with ``"usage": false`` leaves it out.
* ``GET /v1/models`` -- the models named in rules, replays and profiles.
* Admin endpoints, so another process can script it: ``POST /_rules`` (JSON list of rule
  objects, appended), ``POST /_replay`` (``{"model", "answers", "delay_s"}``),
  ``POST /_default`` (``{"response": str | null}``), ``POST /_profile``
  (``{"model", "profile", ...options}``), ``POST /_clear``, ``GET /_requests``.

Provider profiles (``set_profile``; the table is ``_loopback_profiles.PROFILES``) make the
requests for one model refused and answered as a provider does: OpenAI's reasoning models,
Azure, Anthropic's and Gemini's OpenAI compatibility, llama.cpp, Groq, Ollama, OpenRouter,
Mistral, DeepSeek, vLLM, LM Studio -- their error bodies, how many choices ``n`` gets, where the
reasoning goes, a thinking budget that a small output cap cuts, a context window. A
llama.cpp-profiled model is also described at ``GET /props``, an Ollama one at ``POST /api/show``
(both at the server root, as those servers serve them).

Errors are OpenAI-style JSON bodies ``{"error": {"message", "type", "code"}}``: 400 for a
malformed request, 404 for an unknown path or when nothing scripted matches, and whatever
status a rule asks for. Streaming (``stream: true``) is not supported and is refused with 400.

Command line (``nl2sql-loopback``): ``--host`` (loopback only), ``--port``, ``--script FILE``
with ``{"rules": [...], "replays": [{"model", "answers", "delay_s"}], "default": str|null,
"profiles": {model: name | {"profile": name, ...options}}}``.
"""

from __future__ import annotations

import argparse
import copy
import json
import signal
import socket
import sys
import threading
import time
from typing import Any

from nl2sql.model.prompts import QUESTION_MARKER
from nl2sql.retrieval.rewriting import original_question
from nl2sql_indexer.dev._loopback_http import ChatHandler, LoopbackHTTPServer, LoopbackHTTPServer6
from nl2sql_indexer.dev._loopback_profiles import Profile, profile_named
from nl2sql_indexer.dev._loopback_script import (
    Reply,
    Rule,
    extract_question,
    is_loopback_host,
    last_user_text,
    normalize,
    replay_from_dict,
    rule_from_dict,
    rule_matches,
    rule_reply,
)

__all__ = [
    "QUESTION_MARKER",
    "extract_question",
    "Rule",
    "LoopbackLLM",
    "is_loopback_host",
    "main",
]


class LoopbackLLM:
    """OpenAI-compatible chat-completions server on 127.0.0.1 whose answers are scripted (NOT a model).

    The socket is bound when the object is created (``port=0`` picks a free port), so
    :attr:`base_url` is known before :meth:`start`. Use as a context manager::

        with LoopbackLLM() as llm:
            llm.add_rule(Rule(model="m", response="SELECT 1"))
            client = openai.OpenAI(base_url=llm.base_url, api_key="x")

    Resolution order for a request: rules (insertion order, first match wins), then the
    replay for the request's model, then the default answer, else a 404 error naming the
    model and the question. A stopped server cannot be started again.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        """Bind to ``host:port`` (loopback only; ValueError otherwise). ``port=0`` = a free port."""
        if not is_loopback_host(host):
            raise ValueError(
                f"refusing to listen on non-loopback host {host!r}: "
                "the scripted LLM server binds to loopback only (127.0.0.0/8, localhost, ::1)"
            )
        h = host.strip().strip("[]")
        server_cls = LoopbackHTTPServer6 if ":" in h else LoopbackHTTPServer
        self._lock = threading.Lock()
        self._rules: list[list] = []  # [rule, remaining times or None]
        self._replays: dict[str, tuple[dict[str, str], dict[str, str], float]] = {}
        self._default: str | None = None
        self._profiles: dict[str, tuple[str, Profile]] = {}  # model -> (name, profile)
        self._log_entries: list[dict] = []
        self._kv: dict[str, int] = {}  # model -> tokens its requests in flight hold (kv_unified)
        self.stop_event = threading.Event()  # set by stop(): waiting and trickling handlers end
        self.release_event = threading.Event()  # set by clear() and stop(): hanging handlers end
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.verbose = False
        self.started_at = time.time()
        self._server = server_cls((h, port), ChatHandler, self)

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> LoopbackLLM:
        """Serve in a daemon thread; returns self. Calling it on a running server is a no-op."""
        if self._stopped:
            raise RuntimeError("this LoopbackLLM was stopped; create a new one")
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"loopback-llm:{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: wake hanging/delayed handlers, close connections and the socket. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self.stop_event.set()
        self.release_event.set()
        if self._thread is not None:
            self._server.shutdown()
        with self._server.conns_lock:
            conns = list(self._server.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackLLM:
        """Start the server."""
        return self.start()

    def __exit__(self, *exc) -> None:
        """Stop the server."""
        self.stop()

    @property
    def port(self) -> int:
        """The TCP port the server is bound to."""
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """Base URL for an OpenAI client, e.g. ``http://127.0.0.1:PORT/v1``."""
        host = self._server.server_address[0]
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/v1"

    # -- scripting ------------------------------------------------------------------------
    def add_rule(self, rule: Rule) -> None:
        """Append a rule; rules are tried in insertion order and the first match wins."""
        if not isinstance(rule, Rule):
            raise TypeError("add_rule expects a Rule")
        with self._lock:
            self._rules.append([rule, rule.times])

    def clear(self) -> None:
        """Drop all rules, replays, profiles and the request log (the default answer is kept).
        Requests hanging under a ``hang`` rule are released with HTTP 400 (not retried by
        clients)."""
        with self._lock:
            self._rules.clear()
            self._replays.clear()
            self._profiles.clear()
            self._log_entries.clear()
            released, self.release_event = self.release_event, threading.Event()
        released.set()

    def set_replay(self, model: str, answers: dict[str, str], delay_s: float = 0.0) -> None:
        """For `model`, answer with answers[extract_question(last user message)].

        Lookup is exact first, then whitespace/case-insensitive, then with the explicit dates
        of the pipeline's query rewriting removed (``rewriting.original_question``), so a
        rewritten question still finds the answer recorded for the question as asked. Rules take precedence over
        replays; a question missing from ``answers`` falls through to the default. Setting a
        replay for a model replaces that model's previous replay.
        """
        answers = dict(answers)
        normalized: dict[str, str] = {}
        for q, a in answers.items():
            normalized.setdefault(normalize(q), a)
        with self._lock:
            self._replays[model] = (answers, normalized, float(delay_s))

    def set_default(self, response: str | None) -> None:
        """Answer ``response`` when nothing matches; None -> a 404 error naming (model, question)."""
        with self._lock:
            self._default = response

    def set_profile(self, model: str, profile: str | None, **options: float) -> None:
        """Refuse and answer ``model``'s requests as the provider ``profile`` does (a key of
        ``_loopback_profiles.PROFILES``); None removes the model's profile.

        Args:
            model: the model name requests carry (any name: an Azure deployment's, say).
            profile: the profile's name, or None.
            **options: overrides of the profile: ``delay_s`` (seconds before each answer, as a
                reasoning model takes), ``thinking_tokens``, ``context_window``, ``total_slots``,
                ``kv_unified`` (the slots share one cache of ``context_window`` tokens).

        Raises:
            ValueError: an unknown profile or option, or an empty model name.
        """
        if not isinstance(model, str) or not model:
            raise ValueError("a profile's model must be a non-empty string")
        if profile is None:
            if options:
                raise ValueError("options need a profile")
            with self._lock:
                self._profiles.pop(model, None)
            return
        built = profile_named(profile, options)
        with self._lock:
            self._profiles[model] = (profile, built)

    def kv_hold(self, model: str, tokens: int) -> None:
        """Add ``tokens`` (negative: give back) to what ``model``'s requests in flight hold of a
        shared KV cache (profile option ``kv_unified``)."""
        with self._lock:
            self._kv[model] = self._kv.get(model, 0) + tokens

    def kv_held(self, model: str) -> int:
        """Tokens ``model``'s requests in flight hold of the shared KV cache."""
        with self._lock:
            return self._kv.get(model, 0)

    def profile_of(self, model: str) -> tuple[str, Profile] | None:
        """``(name, profile)`` set for ``model``, or None."""
        with self._lock:
            return self._profiles.get(model)

    def profiled(self, context: str) -> tuple[str, Profile] | None:
        """The first model whose profile has ``context`` (``"llamacpp"``, ``"ollama"``) and that
        profile, or None: the model a llama-server's ``/props`` describes."""
        with self._lock:
            for model, (_, profile) in self._profiles.items():
                if profile.context == context:
                    return model, profile
        return None

    def load_script(self, script: dict) -> None:
        """Load ``{"rules": [...], "replays": [{"model", "answers", "delay_s"}], "default": ...,
        "profiles": {model: name | {"profile": name, ...options}}}``.

        Rules are appended, replays and profiles set; ``default`` is applied only if the key is
        present. Raises ValueError on a malformed script.
        """
        if not isinstance(script, dict):
            raise ValueError("a script must be a JSON object")
        unknown = set(script) - {"rules", "replays", "default", "profiles"}
        if unknown:
            raise ValueError(f"unknown script field(s): {sorted(unknown)}")
        rules = [rule_from_dict(d) for d in (script.get("rules") or [])]
        replays = [replay_from_dict(d) for d in (script.get("replays") or [])]
        profiles = _script_profiles(script.get("profiles") or {})
        if (
            "default" in script
            and script["default"] is not None
            and not isinstance(script["default"], str)
        ):
            raise ValueError("script 'default' must be a string or null")
        for r in rules:
            self.add_rule(r)
        for model, answers, delay_s in replays:
            self.set_replay(model, answers, delay_s)
        for model, name, options in profiles:
            self.set_profile(model, name, **options)
        if "default" in script:
            self.set_default(script["default"])

    def models(self) -> list[str]:
        """Models named in rules, replays and profiles, in order of first appearance."""
        with self._lock:
            names = [r.model for r, _ in self._rules if r.model is not None]
            names += list(self._replays) + list(self._profiles)
        return list(dict.fromkeys(names))

    @property
    def requests(self) -> list[dict]:
        """Received chat requests, in arrival order: ``{"model", "messages", "temperature",
        "n", "params", "profile", "refused", "time", "port"}``. ``params`` is every other key of the
        body as sent (``max_tokens``, ``max_completion_tokens``, ``reasoning_effort``, ... only
        where the client sent them; ``temperature`` and ``n`` there too when sent);
        ``profile`` the model's profile name or None; ``refused`` the HTTP status of the
        profile's refusal (parameters or context window) or None; ``port`` the client's port
        (requests on one kept-alive connection share it)."""
        with self._lock:
            return copy.deepcopy(self._log_entries)

    # -- what the HTTP handler (_loopback_http.ChatHandler) calls --------------------------
    def record_request(
        self,
        body: dict,
        n: int,
        profile: str | None = None,
        refused: int | None = None,
        port: int | None = None,
    ) -> None:
        """Append one chat request to the log :attr:`requests` returns.

        Args:
            body: the request body (``model`` and ``messages`` valid).
            n: the choices asked for (1 when absent).
            profile: the model's profile name, if any.
            refused: the status of the profile's refusal, if it refused the request.
            port: the client's port (its connection), if known.
        """
        params = {k: v for k, v in body.items() if k not in ("model", "messages")}
        with self._lock:
            self._log_entries.append(
                {
                    "model": body["model"],
                    "messages": body["messages"],
                    "temperature": body.get("temperature"),
                    "n": n,
                    "params": params,
                    "profile": profile,
                    "refused": refused,
                    "time": time.time(),
                    "port": port,
                }
            )

    def reply_to(self, model: str, messages: list[dict]) -> Reply:
        """The reply to one chat request: the first matching rule (one use of it taken), else
        the model's replayed answer, else the default response, else a 404."""
        user = last_user_text(messages)
        question = extract_question(user) if user is not None else None
        with self._lock:
            reply = self._take_rule(model, user, question)
            if reply is None:
                reply = self._replayed(model, question)
            default = self._default
        if reply is not None:
            return reply
        if default is not None:
            return Reply(content=default)
        return Reply(
            status=404,
            code="no_scripted_answer",
            message=f"loopback LLM: no scripted answer for model={model!r}, question={question!r}",
        )

    def _take_rule(self, model: str, user: str | None, question: str | None) -> Reply | None:
        """The reply of the first rule matching the request, counting one use; None when no
        rule matches. The caller holds ``self._lock``."""
        for entry in self._rules:
            rule, remaining = entry
            if not rule_matches(rule, remaining, model, user, question):
                continue
            if remaining is not None:
                entry[1] = remaining - 1
            return rule_reply(rule)
        return None

    def _replayed(self, model: str, question: str | None) -> Reply | None:
        """The model's recorded answer to the question (exact, normalized, or as asked before
        query rewriting); None when there is none. The caller holds ``self._lock``."""
        replay = self._replays.get(model)
        if replay is None or question is None:
            return None
        exact, normalized, delay_s = replay
        if question in exact:
            return Reply(content=exact[question], delay_s=delay_s)
        norm = normalize(question)
        if norm in normalized:
            return Reply(content=normalized[norm], delay_s=delay_s)
        # the pipeline's query rewriting added explicit dates: match the question as asked
        asked = normalize(original_question(question))
        if asked in normalized:
            return Reply(content=normalized[asked], delay_s=delay_s)
        return None


def _script_profiles(profiles: Any) -> list[tuple[str, str, dict]]:
    """The ``profiles`` of a script as ``(model, name, options)``; ValueError if malformed."""
    if not isinstance(profiles, dict):
        raise ValueError('script "profiles" must be an object {model: profile name or object}')
    out = []
    for model, spec in profiles.items():
        if isinstance(spec, str):
            spec = {"profile": spec}
        if not isinstance(spec, dict) or not isinstance(spec.get("profile"), str):
            raise ValueError(f"profile of {model!r} must be a name or {{'profile': name, ...}}")
        options = {k: v for k, v in spec.items() if k != "profile"}
        profile_named(spec["profile"], options)  # validated before anything is set
        out.append((model, spec["profile"], options))
    return out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry (``nl2sql-loopback``): serve scripted answers until SIGINT/SIGTERM."""
    parser = _arg_parser()
    args = parser.parse_args(argv)
    if not is_loopback_host(args.host):
        parser.error(
            f"refusing non-loopback host {args.host!r}: "
            "only 127.0.0.0/8, localhost and ::1 are allowed"
        )
    if not 0 <= args.port <= 65535:
        parser.error(f"invalid port {args.port}")
    script = _read_script(parser, args.script) if args.script else None
    llm = _scripted_server(parser, args, script)
    _serve_until_signal(llm)
    return 0


def _arg_parser() -> argparse.ArgumentParser:
    """The ``nl2sql-loopback`` command line."""
    parser = argparse.ArgumentParser(
        prog="nl2sql-loopback",
        description="OpenAI-compatible chat-completions server on loopback whose answers are "
        "SCRIPTED (rules/replays/default), not produced by a model.",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="loopback address to bind (127.0.0.0/8, localhost, ::1); default 127.0.0.1",
    )
    parser.add_argument(
        "--port", type=int, default=0, help="TCP port; 0 picks a free one (default)"
    )
    parser.add_argument(
        "--script",
        metavar="FILE",
        help='JSON: {"rules": [...], "replays": [{"model","answers"}], "default": str|null, '
        '"profiles": {model: profile}}',
    )
    parser.add_argument("--verbose", action="store_true", help="log each HTTP request to stderr")
    return parser


def _read_script(parser: argparse.ArgumentParser, path: str) -> Any:
    """The JSON of the ``--script`` file (exits with a usage error when unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        parser.error(f"cannot read script {path!r}: {e}")


def _scripted_server(
    parser: argparse.ArgumentParser, args: argparse.Namespace, script: Any
) -> LoopbackLLM:
    """A bound (not started) server with ``script`` loaded (exits with a usage error when it
    cannot listen or the script is invalid)."""
    try:
        llm = LoopbackLLM(host=args.host, port=args.port)
    except OSError as e:
        parser.error(f"cannot listen on {args.host}:{args.port}: {e}")
    llm.verbose = args.verbose
    if script is not None:
        try:
            llm.load_script(script)
        except (ValueError, TypeError) as e:
            llm.stop()
            parser.error(f"invalid script {args.script!r}: {e}")
    return llm


def _serve_until_signal(llm: LoopbackLLM) -> None:
    """Start ``llm`` and serve until SIGINT or SIGTERM; then stop it and restore the handlers."""
    done = threading.Event()

    def _on_signal(signum, frame):
        done.set()

    old_int = signal.signal(signal.SIGINT, _on_signal)
    old_term = signal.signal(signal.SIGTERM, _on_signal)
    llm.start()
    print(f"loopback LLM (scripted answers, not a model) listening on {llm.base_url}", flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        llm.stop()
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)


if __name__ == "__main__":
    sys.exit(main())
