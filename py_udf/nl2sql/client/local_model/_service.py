"""The local model as a service of this machine: ``llama-server`` under supervisord.

supervisord (the ``supervisor`` package, not a supervisor of our own) starts the server bound to
127.0.0.1 on the service's port, with the API key nl2sql generated (read from a file, never on
the command line), slots and threads sized to the CPU and ``--no-repack`` on a CPU with AMX
(its repacked AMX kernel dies with SIGILL); it restarts the server whenever it exits — a crash or
a ``kill -9`` — and keeps its log. Run as root, the server runs as ``nobody``. Everything lies in
the state folder: ``service.json`` (what runs), ``supervisord.conf``, ``server.log``.
"""

from __future__ import annotations

import grp
import os
import pwd
import secrets
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import LocalModelError
from ._paths import Paths, Record
from ._probe import health

__all__ = [
    "DEFAULT_PORT",
    "KEY_NAME",
    "SLOT_CTX",
    "Service",
    "read_key",
    "server_flags",
    "sizing",
    "start",
    "stop",
    "supervisor_conf",
    "systemd_unit",
]

DEFAULT_PORT = 8407  # the service's own port on 127.0.0.1 (--port another)
KEY_NAME = "NL2SQL_LOCAL_MODEL_KEY"  # the key's file in the secrets folder; add_model's api_key_env
SLOT_CTX = 8192  # tokens a slot holds: nl2sql's largest prompts and their answer (docs/models.md)
START_TIMEOUT_S = 180  # a model's load on a slow disk; the first start reads the whole file
PROGRAM = "llama-server"


@dataclass(frozen=True)
class Service(Record):
    """What the service runs (``service.json``).

    Attributes:
        model: the catalog name or the GGUF file's stem. alias: the name it answers under.
        gguf: the model file. binary: llama-server. port: its port on 127.0.0.1.
        parallel: slots (requests decoded together; more wait in the server's queue).
        threads: CPU threads. slot_ctx: tokens per slot (``--ctx-size`` is ``parallel`` times it).
    """

    FILE = "service.json"

    model: str
    alias: str
    gguf: str
    binary: str
    port: int
    parallel: int
    threads: int
    slot_ctx: int = SLOT_CTX

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL."""
        return f"http://127.0.0.1:{self.port}/v1"


def server_flags(cpuinfo: str | None = None) -> list[str]:
    """The ``llama-server`` flags this CPU needs: ``--no-repack`` where it has AMX.

    Args:
        cpuinfo: the text of ``/proc/cpuinfo`` (read when not given).

    Returns:
        ``["--no-repack"]`` when a ``flags`` line names an ``amx`` flag, else ``[]``
        (repacking is faster where it works); ``["--no-repack"]`` when the CPU is unknown.
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return ["--no-repack"]
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return ["--no-repack"] if any(f.startswith("amx") for f in line.split()) else []
    return []


def sizing(cpus: int | None = None) -> tuple[int, int]:
    """Slots and threads for a CPU of ``cpus`` cores.

    Every core decodes (the database mostly waits on the model while a question is answered);
    two slots up to 4 cores, then one more per 4 cores up to 8: on a CPU, decoding several
    requests together reads the weights once for all of them, and more wait in the server's queue.

    Args:
        cpus: the core count (default ``os.cpu_count()``).

    Returns:
        ``(parallel, threads)``.
    """
    cpus = cpus or os.cpu_count() or 1
    return min(8, max(2, cpus // 4 + 1)), cpus


def read_key(p: Paths) -> str | None:
    """The service's API key.

    Args:
        p: the folders (its ``secrets``).

    Returns:
        The key from the secrets folder, or None (none generated, or unreadable).
    """
    try:
        return (p.secrets / KEY_NAME).read_text().strip() or None
    except OSError:
        return None


def _group_id(name: str) -> int | None:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        return None


def _ensure_key(p: Paths, run_as: str | None) -> str:
    """The API key, generated once: ``secrets/NL2SQL_LOCAL_MODEL_KEY`` (as root readable by the
    ``postgres`` group, whose backends send it) and ``state/server.key`` (the server's copy,
    owned by the user it runs as)."""
    key = read_key(p) or secrets.token_urlsafe(32)
    gid = _group_id("postgres") if os.geteuid() == 0 else None
    p.secrets.mkdir(parents=True, exist_ok=True)
    _write_private(p.secrets / KEY_NAME, key, gid)
    if gid is not None:
        os.chown(p.secrets, 0, gid)
        p.secrets.chmod(0o750)
    server_key = p.state / "server.key"
    _write_private(server_key, key, None)
    if run_as:
        os.chown(server_key, pwd.getpwnam(run_as).pw_uid, -1)
    return key


def _write_private(path: Path, text: str, gid: int | None) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")
    if gid is not None:
        os.chown(tmp, 0, gid)
        tmp.chmod(0o640)
    os.replace(tmp, path)


def _run_as() -> str | None:
    """The user the server runs as: ``nobody`` when we are root, else ourselves (None)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        return None
    return "nobody"


def _reachable(folder: Path, user: str) -> None:
    """Raise unless every folder above ``folder`` lets others through (the server runs as
    ``user`` and reads its key file there)."""
    for d in folder.resolve().parents:
        if not d.stat().st_mode & stat.S_IXOTH:
            raise LocalModelError(
                f"nl2sql model start: the server runs as {user}, who cannot reach {folder} "
                f"({d} is closed to other users)",
                hint="point NL2SQL_MODEL_HOME at a folder others may pass through "
                "(default /var/lib/nl2sql/model)",
            )


def _server_command(s: Service, key_file: Path) -> list[str]:
    return [
        s.binary,
        *("--model", s.gguf, "--alias", s.alias),
        *("--host", "127.0.0.1", "--port", str(s.port)),
        *("--api-key-file", str(key_file)),
        *("--ctx-size", str(s.parallel * s.slot_ctx), "--parallel", str(s.parallel)),
        *("--threads", str(s.threads)),
        "--metrics",
        *server_flags(),
    ]


def supervisor_conf(s: Service, state: Path, run_as: str | None) -> str:
    """supervisord's configuration for the service.

    Args:
        s: the service. state: the state folder. run_as: the user the server runs as (None:
            the user starting it).

    Returns:
        The configuration's text (INI, supervisord's own format).
    """
    command = " ".join(_quote(a) for a in _server_command(s, state / "server.key"))
    lines = [
        "[unix_http_server]",
        f"file={state / 'supervisor.sock'}",
        "chmod=0700",
        "[supervisord]",
        f"logfile={state / 'supervisord.log'}",
        f"pidfile={state / 'supervisord.pid'}",
        f"directory={state}",
        "logfile_maxbytes=1MB",
        "logfile_backups=1",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "[supervisorctl]",
        f"serverurl=unix://{state / 'supervisor.sock'}",
        f"[program:{PROGRAM}]",
        f"command={command}",
        *([f"user={run_as}"] if run_as else []),
        "autostart=true",
        "autorestart=true",
        "startsecs=3",
        "startretries=3",
        "stopasgroup=true",
        "killasgroup=true",
        "stopwaitsecs=10",
        "redirect_stderr=true",
        f"stdout_logfile={state / 'server.log'}",
        "stdout_logfile_maxbytes=10MB",
        "stdout_logfile_backups=2",
    ]
    return "\n".join(lines) + "\n"


def systemd_unit(state: Path) -> str:
    """A systemd unit that starts the service's supervisord at boot (and again if it exits),
    for a machine where systemd runs: ``nl2sql model systemd-unit > /etc/systemd/system/
    nl2sql-model.service``, then ``systemctl enable --now nl2sql-model`` (after ``nl2sql model
    stop``: one supervisord at a time).

    Args:
        state: the state folder (its ``supervisord.conf``, written by ``start``).

    Returns:
        The unit's text.
    """
    conf = state / "supervisord.conf"
    return "\n".join(
        [
            "[Unit]",
            "Description=nl2sql's local model (llama-server under supervisord)",
            "After=network.target",
            "[Service]",
            f"ExecStart={sys.executable} -m supervisor.supervisord --nodaemon -c {conf}",
            f"ExecStop={sys.executable} -m supervisor.supervisorctl -c {conf} shutdown",
            "Restart=always",
            "RestartSec=2",
            "[Install]",
            "WantedBy=multi-user.target",
            "",
        ]
    )


def _quote(arg: str) -> str:
    """An argument as supervisord's ``command=`` reads it (shlex rules; ``%`` doubled)."""
    return shlex.quote(arg).replace("%", "%%")


def _ctl(state: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "supervisor.supervisorctl", "-c", str(state / "supervisord.conf")]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout)


def supervisor_running(state: Path) -> bool:
    """Whether this service's supervisord answers on its socket.

    Args:
        state: the state folder.

    Returns:
        True when ``supervisorctl pid`` answers with a pid.
    """
    if not (state / "supervisord.conf").exists() or not (state / "supervisor.sock").exists():
        return False
    try:
        return _ctl(state, "pid", timeout=15).stdout.strip().isdigit()
    except subprocess.TimeoutExpired:
        return False


def program_state(state: Path) -> str:
    """The server's state as supervisord says it.

    Args:
        state: the state folder.

    Returns:
        ``RUNNING``, ``STARTING``, ``BACKOFF``, ``FATAL``, ``STOPPED``…, or ``NOT RUNNING``
        without a supervisord.
    """
    if not supervisor_running(state):
        return "NOT RUNNING"
    out = _ctl(state, "status", PROGRAM, timeout=15).stdout.split()
    return out[1] if len(out) > 1 else "UNKNOWN"


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def start(p: Paths, s: Service, quiet: bool = False) -> Service:
    """Start the service (a running one is left as it is) and wait until the model answers.

    Args:
        p: the folders. s: what to run. quiet: no messages.

    Returns:
        The running service.

    Raises:
        LocalModelError: the port is taken by another program, supervisord did not start, or
            the server exited or did not load the model within ``START_TIMEOUT_S`` (the end of
            its log is in the message; the service is stopped again).
    """
    p.state.mkdir(parents=True, exist_ok=True)
    if supervisor_running(p.state):
        running = Service.load(p.state) or s
        wait_ready(p, running)
        return running
    if not _port_free(s.port):
        raise LocalModelError(
            f"nl2sql model: port {s.port} on 127.0.0.1 is taken by another program",
            hint="start on another port: nl2sql model start --port N (then register again)",
        )
    run_as = _run_as()
    if run_as:  # the server's user reaches its key file (the folder stays unlisted)
        p.state.chmod(p.state.stat().st_mode | 0o011)
        _reachable(p.state, run_as)
    _ensure_key(p, run_as)
    s.save(p.state)
    conf = p.state / "supervisord.conf"
    conf.write_text(supervisor_conf(s, p.state, run_as))
    conf.chmod(0o600)
    cmd = [sys.executable, "-m", "supervisor.supervisord", "-c", str(conf)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise LocalModelError(
            f"nl2sql model: supervisord did not start: {(r.stderr or r.stdout).strip()[-500:]}",
            hint=f"its log: {p.state / 'supervisord.log'}",
        )
    try:
        wait_ready(p, s)
    except LocalModelError:
        stop(p)
        raise
    return s


def wait_ready(p: Paths, s: Service, timeout_s: float = START_TIMEOUT_S) -> None:
    """Wait until ``GET /health`` answers 200 and supervisord counts the server as started
    (``RUNNING``: from then on it restarts it whenever it exits).

    Args:
        p: the folders. s: the service. timeout_s: how long to wait, seconds.

    Raises:
        LocalModelError: the server gave up (supervisord's ``FATAL``) or the time passed.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = program_state(p.state)
        if state == "RUNNING" and health(s, read_key(p)) == "ok":
            return
        if state in ("FATAL", "NOT RUNNING"):
            break
        time.sleep(0.5)
    raise LocalModelError(
        f"nl2sql model: llama-server did not come up ({program_state(p.state)}); the end of "
        f"its log:\n{log_tail(p.state, 15)}",
        hint="nl2sql model logs shows the whole log; a model file that is not a GGUF model, "
        "too little memory, or a port taken are the usual causes",
    )


def stop(p: Paths) -> bool:
    """Stop the server and its supervisord.

    Args:
        p: the folders.

    Returns:
        Whether one was running.
    """
    if not supervisor_running(p.state):
        return False
    _ctl(p.state, "shutdown", timeout=60)
    pid_file = p.state / "supervisord.pid"
    deadline = time.monotonic() + 30
    while pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    return True


def log_tail(state: Path, n: int = 50) -> str:
    """The end of the server's log.

    Args:
        state: the state folder. n: how many lines.

    Returns:
        The last ``n`` lines ('' without a log).
    """
    try:
        with (state / "server.log").open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 200 * n))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def remove_state(p: Paths) -> None:
    """Forget the service (after ``stop``): its state folder.

    Args:
        p: the folders.
    """
    shutil.rmtree(p.state, ignore_errors=True)
