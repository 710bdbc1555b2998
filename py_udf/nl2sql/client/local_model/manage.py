"""``nl2sql model``'s verbs as functions: install, start, stop, status, register (the command
line in ``cli.py`` calls these; docs/models.md, "A private local model")."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg

from ...core.errors import LocalModelError
from . import _fetch, _probe, _service
from ._binary import server_binary
from ._paths import Paths, Record, paths
from .catalog import DEFAULT, resolve

__all__ = ["Installed", "install", "register", "start", "status", "stop"]

MODEL_NAME = "local"  # the add_model name register gives it
REGISTER_TIMEOUT_S = 180  # the model call's deadline: a question may wait for a slot


@dataclass(frozen=True)
class Installed(Record):
    """The installed model (``installed.json`` in the state folder).

    Attributes:
        model: the catalog name, or the GGUF file's stem. alias: the name it is served under.
        gguf: the model file. binary: the llama-server that serves it. source: where the file
            came from (package pins and licence, a path, a URL). sha256: the file's, when known.
    """

    FILE = "installed.json"

    model: str
    alias: str
    gguf: str
    binary: str
    source: str
    sha256: str | None = None


@contextlib.contextmanager
def _exclusive(p: Paths, verb: str) -> Iterator[None]:
    """One ``install``/``start``/``stop`` at a time: a second one is refused at once."""
    p.state.mkdir(parents=True, exist_ok=True)
    with open(p.state / ".lock", "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            other = f.read().strip() or "another nl2sql model command"
            raise LocalModelError(
                f"nl2sql model {verb}: {other} is running (pid in {p.state / '.lock'})",
                hint="wait for it to end, then run this command again",
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"nl2sql model {verb} (pid {os.getpid()})\n")
        f.flush()
        yield


def install(
    name: str | None = None,
    gguf: str | None = None,
    sha256: str | None = None,
    quiet: bool = False,
) -> Installed:
    """Install llama-server (built once per CPU) and a model's GGUF file, checked.

    Args:
        name: a catalog name (default ``qwen2.5-coder-1.5b``); ignored with ``gguf``.
        gguf: any other GGUF file: a path, or an http(s) URL to download.
        sha256: the expected sha256 of ``gguf`` (checked when given).
        quiet: no progress bars.

    Returns:
        What is installed (also in the state folder's ``installed.json``).

    Raises:
        LocalModelError: an unknown name, a failed download or build, no disk space, a
            sha256 mismatch, or a file that is no GGUF model; nothing unchecked is kept.
    """
    p = paths()
    with _exclusive(p, "install"):
        model = _model_file(p, name, gguf, sha256, quiet)
        binary = server_binary(p.cache, quiet)
        done = Installed(**model, binary=str(binary))
        done.save(p.state)
    return done


def _model_file(p: Paths, name, gguf, sha256, quiet) -> dict[str, Any]:
    """The model's fields of :class:`Installed`, its file fetched and checked."""
    if gguf is None:
        m = resolve(name or DEFAULT)
        path = _fetch.fetch_catalog(m, p.models, p.cache, quiet)
        source = f"{m.source}; data of {m.package.format('1…' + str(m.parts))}=={m.version}"
        return {
            "model": m.name,
            "alias": m.alias,
            "gguf": str(path),
            "source": source,
            "sha256": m.sha256,
        }
    if gguf.startswith(("http://", "https://")):
        path = _fetch.fetch_url(gguf, p.models, sha256, quiet)
        source = gguf
    else:
        path = Path(gguf).resolve()
        _fetch.check_gguf(path)
        if sha256 and (got := _fetch.sha256_of(path, quiet)) != sha256.lower():
            raise LocalModelError(
                f"nl2sql model: {path} has sha256 {got}, not {sha256}",
                hint="check the file against its publisher's checksum",
            )
        source = str(path)
    _fetch.check_gguf(path)
    stem = path.name.removesuffix(".gguf")
    return {"model": stem, "alias": stem, "gguf": str(path), "source": source, "sha256": sha256}


def start(
    port: int | None = None,
    parallel: int | None = None,
    threads: int | None = None,
    quiet: bool = False,
) -> _service.Service:
    """Start the installed model's server under supervisord (a running one is kept).

    Args:
        port: its port on 127.0.0.1 (default the last one used, else 8407).
        parallel: slots (default sized to the CPU). threads: CPU threads (default all cores).
        quiet: no messages.

    Returns:
        The running service.

    Raises:
        LocalModelError: nothing installed, the port taken, or the server did not come up.
    """
    p = paths()
    with _exclusive(p, "start"):
        inst = Installed.load(p.state)
        if inst is None or not Path(inst.gguf).is_file() or not Path(inst.binary).is_file():
            raise LocalModelError(
                "nl2sql model start: no local model is installed",
                hint="run: nl2sql model install (the 1.5B; qwen2.5-coder-0.5b on small machines)",
            )
        old = _service.Service.load(p.state)
        if old and old.gguf != inst.gguf and _service.supervisor_running(p.state):
            raise LocalModelError(
                f"nl2sql model start: {old.model} is running; {inst.model} is installed",
                hint="nl2sql model stop && nl2sql model start serves the installed one (the "
                "questions being answered are cut off)",
            )
        slots, cores = _service.sizing()
        s = _service.Service(
            model=inst.model,
            alias=inst.alias,
            gguf=inst.gguf,
            binary=inst.binary,
            port=port or (old.port if old else _service.DEFAULT_PORT),
            parallel=parallel or slots,
            threads=threads or cores,
        )
        return _service.start(p, s, quiet)


def stop() -> bool:
    """Stop the server and its supervisord.

    Returns:
        Whether one was running.
    """
    p = paths()
    if not p.state.is_dir():
        return False  # never started here
    with _exclusive(p, "stop"):
        return _service.stop(p)


def status() -> dict[str, Any]:
    """The installed model and the server's state, health, slots, context and recent tokens/s.

    Returns:
        A dict: ``installed``, ``state`` (supervisord's word), ``health``, ``base_url``,
        ``model``, ``slots``, ``slot_ctx``, ``prompt_tokens_per_s``,
        ``predicted_tokens_per_s``, ``requests_processing``, ``requests_deferred``, ``log``.
    """
    p = paths()
    inst, s = Installed.load(p.state), _service.Service.load(p.state)
    out: dict[str, Any] = {"installed": asdict(inst) if inst else None}
    out["state"] = _service.program_state(p.state)
    if s is None:
        return out
    key = _service.read_key(p)
    out.update(base_url=s.base_url, health=_probe.health(s, key), log=str(p.state / "server.log"))
    if out["health"] == "ok":
        pr, me = _probe.props(s, key), _probe.metrics(s, key)
        out.update(model=pr.get("model"), slots=pr.get("total_slots"), slot_ctx=pr.get("n_ctx"))
        out["prompt_tokens_per_s"] = me.get("prompt_tokens_seconds")
        out["predicted_tokens_per_s"] = me.get("predicted_tokens_seconds")
        out["requests_processing"] = me.get("requests_processing")
        out["requests_deferred"] = me.get("requests_deferred")
    return out


def logs(n: int = 50) -> str:
    """The end of the server's log.

    Args:
        n: how many lines.

    Returns:
        The last ``n`` lines ('' without a log).
    """
    return _service.log_tail(paths().state, n)


def register(
    dsn: str | None = None, name: str = MODEL_NAME, priority: int | None = None, conn=None
) -> str:
    """``nl2sql.add_model`` for the running local model in a database (inside the server or
    beside it): its alias, base URL, the key's name (``api_key_env``), temperature 0, the
    context of one slot and a deadline that allows for waiting on a busy slot.

    Args:
        dsn: the database (None: ``NL2SQL_DSN``, else libpq's variables); unused with ``conn``.
        name: the model's name in ``nl2sql.model``. priority: lower writes the PreSQL.
        conn: an open psycopg connection to use instead (its transaction is the caller's).

    Returns:
        A line saying what was registered.

    Raises:
        LocalModelError: no service was started here; the database refused (no nl2sql).
    """
    s = _service.Service.load(paths().state)
    if s is None:
        raise LocalModelError(
            "nl2sql model register: no local model was started on this machine",
            hint="run: nl2sql model install && nl2sql model start",
        )
    sql = (
        "SELECT nl2sql.add_model(%s, %s, base_url => %s, api_key_env => %s, temperature => 0,"
        " context_window => %s, timeout_s => %s, priority => %s)"
    )
    args = (name, s.alias, s.base_url, _service.KEY_NAME, s.slot_ctx, REGISTER_TIMEOUT_S, priority)
    try:
        if conn is not None:
            conn.execute(sql, args)
        else:
            with psycopg.connect(dsn or os.environ.get("NL2SQL_DSN") or "", autocommit=True) as c:
                c.execute(sql, args)
    except psycopg.Error as e:
        raise LocalModelError(
            f"nl2sql model register: the database refused: {str(e).strip().splitlines()[0]}",
            hint="install nl2sql there first (CREATE EXTENSION nl2sql CASCADE, or nl2sql "
            "install --dsn …), as a role that may call nl2sql.add_model",
        ) from None
    return f"model {name!r}: {s.alias} at {s.base_url} (key: {_service.KEY_NAME})"
