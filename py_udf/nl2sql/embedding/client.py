"""Backend side of the shared embedder: ask the server over its Unix socket, start it, relay
model calls; imports no ONNX Runtime, numpy, openai (docs/internals/embedding.md "Client")."""

from __future__ import annotations

import array
import base64
import fcntl
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NoReturn

from ..core.errors import (
    EmbedderConnectError,
    EmbedderTimeout,
    EmbedderTransportError,
    EmbedderUnavailable,
)
from ..model.config import RELAYS
from ..net import deadline as net_deadline
from ._unix_http import UnixClient

DIR_NAME = "nl2sql_embedder"
SOCKET_NAME = "embed.sock"  # as nl2sql.embedding._server names them
PID_NAME = "embedder.pid"
LOG_NAME = "embedder.log"
LOCK_NAME = "start.lock"
MODEL_NAME = "all-MiniLM-L6-v2"
CHUNK = 512  # texts per request
REQUEST_TIMEOUT_S = 60.0  # the most one request may take (a question's texts: ms)
TIMEOUT_BASE_S = 5.0  # a request's limit: this plus TIMEOUT_PER_TEXT_S per text
TIMEOUT_PER_TEXT_S = 0.05
START_TIMEOUT_S = 30.0  # waiting for a process being started (model load: ~1-2 s)
RETRY_AFTER_S = 30.0  # in-process embedding for this long after a failure
RELAY_MARGIN_S = 2.0  # waited beyond a relayed call's own hard deadline
QUOTA_TIMEOUT_S = 2.0  # a ledger request (microseconds of work); past it the row lock counts

_LOCK = threading.Lock()
_STATE: dict = {
    "mode": None,
    "client": None,
    "retry_at": 0.0,
    "last_error": None,
    "served_by": set(),
    "fallback": None,
    "started": None,
    "relayed": 0,
}
# model/ (the floor below) calls these through ``model.config.RELAYS`` (names looked up per call)
RELAYS.update(chat=lambda p, deadline_s: relay_chat(p, deadline_s), quota=lambda p: relay_quota(p))


def configure(mode: str) -> None:
    """Choose the embedder for this backend's next calls and start a new call's record.

    Args:
        mode: the setting ``embedder``: ``'shared'`` or ``'local'``.
    """
    with _LOCK:
        _STATE["mode"] = "shared" if mode == "shared" else "local"
        _STATE["served_by"] = set()
        _STATE["fallback"] = None
        _STATE["started"] = None
        _STATE["relayed"] = 0


def active() -> bool:
    """Whether ``encode`` asks the shared process first (setting read once without ``configure``).

    Returns:
        True when the mode is ``'shared'``.
    """
    if _STATE["mode"] is None:
        _STATE["mode"] = mode_in_backend()
    return _STATE["mode"] == "shared"


def mode_in_backend() -> str:
    """The setting ``embedder`` as this process sees it, read without the caller's ``plpy``.

    Returns:
        ``'local'`` outside PostgreSQL or off the main thread; in a backend the stored value
        (``'shared'`` when none is stored or it cannot be read).
    """
    if threading.current_thread() is not threading.main_thread():
        return "local"
    try:
        import plpy  # only inside PostgreSQL (absent in the CLI, the process, tests)
    except ImportError:
        return "local"
    try:
        rows = plpy.execute("SELECT value FROM nl2sql.setting WHERE key = 'embedder'")
        value = str(rows[0]["value"]).strip().lower() if rows else "shared"
    except Exception:  # noqa: BLE001 - an unreadable setting means the default
        value = "shared"
    return "local" if value == "local" else "shared"


def note_local() -> None:
    """Record that texts of the current call were embedded in-process."""
    with _LOCK:
        _STATE["served_by"].add("local")


def report() -> dict:
    """What served the embeddings of the current call (the trace's ``embedder``; no path named).

    Returns:
        ``{"setting", "served_by": [...], "fallback": reason or None, "started_process": pid or
        None}``; ``served_by`` empty when every text came from the cache.
    """
    with _LOCK:
        return {
            "setting": _STATE["mode"] or "local",
            "served_by": sorted(_STATE["served_by"]),
            "fallback": _STATE["fallback"],
            "started_process": _STATE["started"],
            "relayed_model_calls": _STATE["relayed"],
        }


def directory() -> Path:
    """The shared embedder's folder: ``<data directory>/nl2sql_embedder``.

    Returns:
        Its absolute path (the backend's working directory is the data directory).

    Raises:
        EmbedderUnavailable: the working directory is not a PostgreSQL data directory.
    """
    cwd = Path(os.getcwd())
    if not (cwd / "PG_VERSION").exists():
        raise EmbedderUnavailable("this process does not run in a PostgreSQL data directory")
    return cwd / DIR_NAME


def private_directory() -> Path:
    """Create (mode 0700) or check the shared embedder's folder.

    Returns:
        ``directory()``, existing, owned by this process's user, closed to others.

    Raises:
        EmbedderUnavailable: it cannot be created, is not a folder, or is another's or open.
    """
    d = directory()
    try:
        d.mkdir(mode=0o700, exist_ok=True)
        st = d.stat()
    except OSError as e:
        raise EmbedderUnavailable(
            f"cannot create the embedder folder {DIR_NAME} in the data directory ({e.strerror})"
        ) from None
    if not d.is_dir() or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise EmbedderUnavailable(
            f"the embedder folder {DIR_NAME} in the data directory is not "
            f"a private folder of the server's OS user (mode 0700)"
        )
    return d


def socket_path(d: Path) -> str:
    """The socket's path as given to connect/bind (relative to the data directory when too long
    for a socket address).

    Args:
        d: the embedder folder.

    Returns:
        The path text.
    """
    p = os.fspath(d / SOCKET_NAME)
    return p if len(p.encode()) < 100 else os.path.join(DIR_NAME, SOCKET_NAME)


def _client():
    """The HTTP client speaking to the socket (one per backend; the standard library's
    http.client, not httpx's stack nor the openai package)."""
    if _STATE["client"] is None:
        _STATE["client"] = UnixClient(socket_path(directory()), timeout=REQUEST_TIMEOUT_S)
    return _STATE["client"]


class _StatusError(Exception):
    """The process answered with an HTTP error status (kept apart from transport errors)."""

    def __init__(self, status: int):
        super().__init__(f"HTTP {status}")
        self.status_code = status


def request_timeout(n: int) -> float:
    """The time limit of one request.

    Args:
        n: texts in the request.

    Returns:
        Seconds: ``TIMEOUT_BASE_S + TIMEOUT_PER_TEXT_S * n``, at most ``REQUEST_TIMEOUT_S``.
    """
    return min(REQUEST_TIMEOUT_S, TIMEOUT_BASE_S + TIMEOUT_PER_TEXT_S * n)


def _request(texts: list[str], model: str) -> list[array.array]:
    resp = _client().post(
        "/v1/embeddings",
        json={"input": texts, "model": model, "encoding_format": "base64"},
        timeout=request_timeout(len(texts)),
    )
    if resp.status_code != 200:
        raise _StatusError(resp.status_code)
    data = sorted(resp.json()["data"], key=lambda d: d["index"])
    out = [array.array("f", base64.b64decode(d["embedding"])) for d in data]
    if len(out) != len(texts) or any(len(v) != 384 for v in out):
        raise EmbedderUnavailable(
            "the shared embedder answered with the wrong number or size of vectors"
        )
    return out


def _ask(texts: list[str], model: str) -> list[array.array]:
    """Embed in chunks; a refused or broken connection (no process) starts one, once."""
    out: list[array.array] = []
    for i in range(0, len(texts), CHUNK):
        chunk = texts[i : i + CHUNK]
        try:
            out.extend(_request(chunk, model))
        except EmbedderTimeout:
            raise EmbedderUnavailable(
                f"the shared embedder did not answer within {request_timeout(len(chunk)):g} s"
            ) from None
        except EmbedderTransportError:
            ensure_running()
            try:
                out.extend(_request(chunk, model))
            except (EmbedderTransportError, _StatusError, ValueError, KeyError) as e:
                raise EmbedderUnavailable(
                    f"the shared embedder started but failed: {type(e).__name__}"
                ) from None
        except _StatusError as e:
            raise EmbedderUnavailable(f"the shared embedder answered {e}") from None
    return out


def encode(texts: list[str], model: str = MODEL_NAME) -> list[array.array] | None:
    """Embed texts with the shared process, or say that the caller must embed in-process.

    Args:
        texts: the texts (any number; sent in requests of ``CHUNK``).
        model: the model name the process serves (``encode.MODEL_NAMES``: one per precision).

    Returns:
        One ``array.array('f')`` of 384 floats per text, in input order; None when the process is
        unavailable (the call's ``fallback``; not tried again for ``RETRY_AFTER_S``).
    """
    now = time.monotonic()
    if now < _STATE["retry_at"]:
        with _LOCK:
            _STATE["fallback"] = _STATE["last_error"]
        return None
    try:
        got = _ask(list(texts), model)
    except Exception as e:  # noqa: BLE001 - any failure: embed in-process, say why in the trace
        net_deadline.raise_cancel(e)
        why = (
            str(e)
            if isinstance(e, EmbedderUnavailable)
            else f"the shared embedder failed ({type(e).__name__})"
        )
        with _LOCK:
            _STATE["retry_at"] = time.monotonic() + RETRY_AFTER_S
            _STATE["last_error"] = f"{why}; embedded in-process instead"
            _STATE["fallback"] = _STATE["last_error"]
        return None
    with _LOCK:
        _STATE["served_by"].add("shared")
    return got


def _relay_failed(why: str) -> NoReturn:
    """Raise ``EmbedderUnavailable(why)``; no use of the process for ``RETRY_AFTER_S``."""
    with _LOCK:
        _STATE["retry_at"] = time.monotonic() + RETRY_AFTER_S
        _STATE["last_error"] = f"{why}; embedded in-process instead"
    raise EmbedderUnavailable(why)


def relay_chat(payload: dict, deadline_s: float) -> dict | None:
    """Have the shared process make one (already gated) model call; it is not started for one.

    Args:
        payload: the body of ``POST /nl2sql/v1/chat``: ``config`` (``ModelConfig`` as a dict),
            ``messages`` (gated), ``timeout_s``, ``n``, ``temperature``.
        deadline_s: the call's hard deadline in seconds (awaited ``RELAY_MARGIN_S`` longer).

    Returns:
        The ``LLMReply``'s fields, or None when the process could not take the request (not in
        use, not running, refused, too old): nothing was sent, the caller calls in-process.

    Raises:
        EmbedderUnavailable: sent but no usable reply (the model may have been called: report an
            error, do not call again).
    """
    # the entry point's ``configure`` chose the mode (``active`` is not for worker threads)
    if _STATE["mode"] != "shared" or time.monotonic() < _STATE["retry_at"]:
        return None
    try:
        resp = _client().post("/nl2sql/v1/chat", json=payload, timeout=deadline_s + RELAY_MARGIN_S)
    except EmbedderConnectError:
        return None
    except EmbedderTimeout:
        _relay_failed(
            f"no reply from the shared process relaying model calls within "
            f"{deadline_s + RELAY_MARGIN_S:g} s"
        )
    except EmbedderTransportError as e:
        _relay_failed(f"the shared process relaying model calls failed: {type(e).__name__}")
    if resp.status_code in (404, 405):
        return None
    if resp.status_code != 200:
        _relay_failed(
            f"the shared process relaying model calls answered HTTP "
            f"{resp.status_code}: {resp.text[:300]}"
        )
    with _LOCK:
        _STATE["relayed"] += 1
    return resp.json()


def relay_quota(payload: dict) -> dict | None:
    """Ask the shared process's ledger of questions in flight (``POST /nl2sql/v1/quota``); it is
    not started for this.

    Args:
        payload: ``{"op": "pending" | "take" | "add", ...}`` (``model.quota.Ledger.apply``).

    Returns:
        The ledger's answer, or None when no process could answer (not in use, not running,
        failing, too old): the caller counts with the row lock instead.
    """
    if _STATE["mode"] != "shared" or time.monotonic() < _STATE["retry_at"]:
        return None
    try:
        resp = _client().post("/nl2sql/v1/quota", json=payload, timeout=QUOTA_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001 - any failure: the caller uses the row lock
        net_deadline.raise_cancel(e)
        return None
    if resp.status_code != 200:
        return None
    got = resp.json()
    return got if isinstance(got, dict) else None


def relayed_capabilities() -> list[dict]:
    """What the shared process learned of the models it called.

    Returns:
        ``capability.learned``'s list; empty when the process is not running or too old to say.
    """
    try:
        resp = _client().get("/nl2sql/v1/capabilities", timeout=5.0)
    except Exception as e:  # noqa: BLE001 - no process: nothing learned there
        net_deadline.raise_cancel(e)
        return []
    if resp.status_code != 200:
        return []
    got = resp.json().get("learned")
    return got if isinstance(got, list) else []


def _answers() -> bool:
    """Whether a process answers on the socket right now."""
    try:
        return _client().get("/v1/models", timeout=5.0).status_code == 200
    except Exception as e:  # noqa: BLE001 - any failure means "not answering"
        net_deadline.raise_cancel(e)
        return False


def interpreter() -> str:
    """The Python that runs the embedding process.

    Returns:
        ``<venv>/bin/python3`` of the venv holding this package, else the base Python's.
    """
    # <venv>/lib/python3.X/site-packages/nl2sql/embedding/
    venv = Path(__file__).resolve().parents[5]
    if (venv / "pyvenv.cfg").exists() and (venv / "bin" / "python3").exists():
        return os.fspath(venv / "bin" / "python3")
    return os.path.join(sys.base_prefix, "bin", "python3")


def _spawn(d: Path) -> None:
    """Start the embedding process, detached, logging to ``embedder.log``."""
    with open(d / LOG_NAME, "ab") as log:
        proc = subprocess.Popen(
            [
                interpreter(),
                "-m",
                "nl2sql.embedding._server",
                "--dir",
                os.fspath(d),
                "--postmaster-pid",
                str(os.getppid()),
                "--detach",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            close_fds=True,
            start_new_session=True,
            cwd=os.fspath(d.parent),
            # the folder holding this package first: found also without a venv
            env={**os.environ, "PYTHONPATH": os.fspath(Path(__file__).resolve().parents[2])},
        )
    try:
        proc.wait(timeout=START_TIMEOUT_S)  # the first fork returns at once
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise EmbedderUnavailable("the shared embedder's launcher hung") from None


def _pid(d: Path) -> int | None:
    try:
        return int((d / PID_NAME).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _wait_started(d: Path, deadline: float) -> None:
    """Wait until the process just spawned answers; fail fast when it exited."""
    where = f"see {LOG_NAME} in the {DIR_NAME} folder of the data directory"
    while time.monotonic() < deadline:
        pid = _pid(d)
        if pid is not None and (d / SOCKET_NAME).exists() and _answers():
            with _LOCK:
                _STATE["started"] = pid
            return
        if pid is not None and not _alive(pid):
            raise EmbedderUnavailable(f"the shared embedder exited while starting ({where})")
        time.sleep(0.05)
        net_deadline.tick()
    raise EmbedderUnavailable(
        f"the shared embedder did not start within {START_TIMEOUT_S:g} s ({where})"
    )


def ensure_running() -> None:
    """Make sure an embedding process answers on the socket, starting one (under an exclusive
    ``flock`` on ``start.lock``) if none does.

    Raises:
        EmbedderUnavailable: the folder is unusable, or nothing answered within
            ``START_TIMEOUT_S`` (the reason names ``embedder.log``).
    """
    d = private_directory()
    deadline = time.monotonic() + START_TIMEOUT_S
    with open(d / LOCK_NAME, "a") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EmbedderUnavailable(
                        "timed out waiting for another backend starting the shared embedder"
                    ) from None
                time.sleep(0.05)
                net_deadline.tick()
        try:
            if _answers():
                return
            (d / PID_NAME).unlink(missing_ok=True)
            _spawn(d)
            _wait_started(d, deadline)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def probe(start: bool = True) -> dict:
    """The shared embedder as this backend sees it (for ``nl2sql.doctor()``).

    Args:
        start: start the process when none answers (``ensure_running``).

    Returns:
        ``{"folder", "pid", "answers", "started", "error", "fallback"}``: the embedder folder
        (None when unusable), the recorded process id, whether a process answers now, whether
        this call started it, why it is unavailable (None when it answers), and the reason this
        backend embeds in-process for now (None when it does not).
    """
    fallback = _STATE["last_error"] if time.monotonic() < _STATE["retry_at"] else None
    info = {"folder": None, "pid": None, "answers": False, "started": False, "error": None}
    info["fallback"] = fallback
    try:
        d = private_directory()
        info["folder"] = os.fspath(d)
        info["answers"] = _answers()
        if not info["answers"] and start:
            ensure_running()
            info["answers"] = info["started"] = _answers()
        info["pid"] = _pid(d)
    except EmbedderUnavailable as e:
        info["error"] = str(e)
    return info
