"""A project-local PostgreSQL cluster (the server scripts/install.sh installed into) for the demo,
tests and benchmarks.

initdb into a folder, a free loopback port, trust authentication on loopback and on the Unix
socket in the data directory (mode 0700: the server's OS user only), the setting
``nl2sql.venv`` pointing at the venv PL/Python imports from. Run as root, the server runs as the
``postgres`` OS user (initdb/postgres refuse root).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

DEFAULT_VENV = os.environ.get("NL2SQL_VENV", "/opt/nl2sql/venv")


def server_bindir() -> Path:
    """The binaries of the server nl2sql is installed into.

    Returns:
        ``NL2SQL_PG_BIN`` when set; else the bindir scripts/install.sh recorded in
        ``<venv>/share/nl2sql/pg_bindir``; else the newest ``/usr/lib/postgresql/<major>/bin``
        holding ``initdb`` (Debian's layout); else ``/usr/lib/postgresql/bin`` (absent).
    """
    env = os.environ.get("NL2SQL_PG_BIN")
    if env:
        return Path(env)
    recorded = Path(DEFAULT_VENV) / "share" / "nl2sql" / "pg_bindir"
    if recorded.is_file() and (Path(recorded.read_text().strip()) / "initdb").exists():
        return Path(recorded.read_text().strip())
    found = [p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/initdb")]
    found = [p for p in found if p.parent.name.isdigit()]
    if found:
        return max(found, key=lambda p: int(p.parent.name))
    return Path("/usr/lib/postgresql/bin")


PG_BIN = server_bindir()


def install_lock_path(bindir: Path = PG_BIN) -> str:
    """The lock file a test session, ``scripts/dev_locked.sh`` and the soak bench hold while they
    install a checkout into a server's extension directory and run against it.

    One lock per server: checkouts sharing a server's extension directory (and the venv
    installed for it) take turns, while suites on different servers (Debian 13's PostgreSQL 17
    and a built 18 in one root, scripts/majors_test.sh) run side by side.

    Args:
        bindir: the server's binaries (default: the one nl2sql is installed into).

    Returns:
        ``/tmp/nl2sql-install-<bindir, slashes as dashes>.lock``.
    """
    return "/tmp/nl2sql-install" + str(bindir).replace("/", "-") + ".lock"


PRELOAD = ("pg_cron", "pg_stat_statements")
"""Libraries every local cluster preloads: pg_cron (``schedule_reindex``) and
pg_stat_statements (``mine_queries``)."""


class ClusterError(RuntimeError):
    """The local cluster could not be created, started or reached; the message says why."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(
    cmd: list[str], env: dict[str, str] | None = None, **kw
) -> subprocess.CompletedProcess:
    if os.geteuid() == 0:
        cmd = [
            "runuser",
            "-u",
            "postgres",
            "--",
            "env",
            *(f"{k}={v}" for k, v in (env or {}).items()),
            *cmd,
        ]
        env = None
    else:
        env = {**os.environ, **(env or {})}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, **kw)


def postgres_can_access(path: Path) -> bool:
    """True when the postgres OS user can traverse to ``path`` (always True when not root)."""
    if os.geteuid() != 0:
        return True
    r = subprocess.run(
        ["runuser", "-u", "postgres", "--", "test", "-x", str(path)], capture_output=True
    )
    return r.returncode == 0


class LocalCluster:
    """A PostgreSQL cluster in ``datadir`` listening on 127.0.0.1:``port``.

    ``port`` is chosen once (free port) and remembered in ``datadir/nl2sql.port`` so a restart
    reuses it. ``server_env`` is passed to the server process (e.g. API key variables).
    ``bindir`` names the server's binaries (default ``PG_BIN``: another major, e.g. the old
    server of a pg_upgrade).
    """

    def __init__(
        self,
        datadir: str | Path,
        venv: str = DEFAULT_VENV,
        server_env: dict[str, str] | None = None,
        bindir: str | Path | None = None,
    ):
        self.datadir = Path(datadir).resolve()
        self.venv = venv
        self.bindir = Path(bindir) if bindir else PG_BIN
        self.server_env = {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            **(server_env or {}),
        }
        self.port_file = self.datadir / "nl2sql.port"
        self.port = int(self.port_file.read_text()) if self.port_file.exists() else None

    @property
    def initialized(self) -> bool:
        """True when ``datadir`` holds a cluster."""
        return (self.datadir / "PG_VERSION").exists()

    def init(self, initdb_args: Sequence[str] = ()) -> None:
        """initdb (if needed) and write the cluster's settings.

        Args:
            initdb_args: more initdb options, e.g. ``["--no-data-checksums"]`` for a cluster
                that pg_upgrade fills from one without checksums (PostgreSQL 18's initdb turns
                them on by default; pg_upgrade refuses a mismatch).

        Raises:
            ClusterError: the folder is not empty, the postgres OS user cannot reach it, or
                initdb failed (its message).
        """
        if self.initialized:
            return
        if self.datadir.is_dir() and any(self.datadir.iterdir()):
            # checked before the chown/chmod below, which would otherwise take over the folder
            raise ClusterError(
                f"{self.datadir} is not empty and holds no PostgreSQL cluster; "
                f"name a new or empty folder for the cluster"
            )
        self.datadir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.datadir, pw.pw_uid, pw.pw_gid)
        self.datadir.chmod(0o700)
        if not postgres_can_access(self.datadir):
            raise ClusterError(
                f"the postgres OS user cannot reach {self.datadir}; choose a "
                f"folder whose parents are world-executable"
            )
        r = _as_server_user(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.datadir),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                *initdb_args,
            ]
        )
        if r.returncode != 0:
            raise ClusterError(f"initdb failed: {r.stderr.strip()}")
        self.port = free_port()
        conf = (
            f"\n# nl2sql local cluster\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{self.socket_directory()}'\n"
            f"nl2sql.venv = '{self.venv}'\n"
            f"shared_preload_libraries = '{','.join(PRELOAD)}'\ncron.database_name = 'postgres'\n"
            "max_connections = 60\nfsync = off\nsynchronous_commit = off\n"
            "full_page_writes = off\nlog_min_messages = warning\n"
        )
        with open(self.datadir / "postgresql.conf", "a") as f:
            f.write(conf)
        self.port_file.write_text(str(self.port))

    def socket_directory(self) -> str:
        """Where the server's Unix socket goes: the data directory (mode 0700: only the server's
        OS user reaches it, so its trust authentication is the server's own), or nowhere ('')
        when the socket's path would be too long for a socket address.

        Returns:
            The setting ``unix_socket_directories``'s value.
        """
        where = str(self.datadir)
        return where if len(where) + len("/.s.PGSQL.65535") < 100 and "'" not in where else ""

    def preloaded(self) -> list[str]:
        """The ``shared_preload_libraries`` the cluster's configuration names (``postgres -C``:
        the files as the server would read them now, also while it runs).

        Returns:
            The library names, in order.
        """
        r = _as_server_user(
            [
                str(self.bindir / "postgres"),
                "-D",
                str(self.datadir),
                "-C",
                "shared_preload_libraries",
            ]
        )
        if r.returncode != 0:
            raise ClusterError(f"postgres -C shared_preload_libraries failed: {r.stderr.strip()}")
        return [x.strip().strip('"') for x in r.stdout.strip().split(",") if x.strip()]

    def ensure_preload(self) -> bool:
        """Make the configuration preload every library of ``PRELOAD`` (a cluster made by an
        earlier version preloaded only pg_cron): a line appended to ``postgresql.conf`` (the
        last setting of a name wins) keeps the libraries it had and adds the missing ones.

        Returns:
            True when the configuration was changed (a running server must restart).
        """
        have = self.preloaded()
        missing = [x for x in PRELOAD if x not in have]
        if not missing:
            return False
        libs = ",".join(have + missing)
        with open(self.datadir / "postgresql.conf", "a") as f:
            f.write(
                f"\n# nl2sql: libraries the project needs (added to an earlier cluster)\n"
                f"shared_preload_libraries = '{libs}'\n"
            )
        return True

    def ensure_venv(self) -> bool:
        """Make the configuration name ``venv`` as ``nl2sql.venv`` (a cluster made with another
        venv would otherwise keep importing that venv's nl2sql): a line appended to
        ``postgresql.conf`` (the last setting of a name wins).

        Returns:
            True when the configuration was changed (a running server must restart, so that
            no backend or embedding process keeps the other venv's code).
        """
        r = _as_server_user(
            [str(self.bindir / "postgres"), "-D", str(self.datadir), "-C", "nl2sql.venv"]
        )
        if r.returncode != 0:
            raise ClusterError(f"postgres -C nl2sql.venv failed: {r.stderr.strip()}")
        if r.stdout.strip() == str(self.venv):
            return False
        with open(self.datadir / "postgresql.conf", "a") as f:
            f.write(
                f"\n# nl2sql: the venv PL/Python imports nl2sql from\nnl2sql.venv = '{self.venv}'\n"
            )
        return True

    def _live_preload(self) -> list[str]:
        with self.connect() as c:
            v = c.execute("SHOW shared_preload_libraries").fetchone()[0]
        return [x.strip().strip('"') for x in v.split(",") if x.strip()]

    @property
    def running(self) -> bool:
        """True when the server of this cluster answers pg_ctl status."""
        if not self.initialized:
            return False
        r = _as_server_user([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "status"])
        return r.returncode == 0

    def start(self) -> LocalCluster:
        """Init if needed and start the server. Returns self.

        A cluster made earlier gets the libraries of ``PRELOAD`` added to its configuration
        (``ensure_preload``) and ``venv`` as its ``nl2sql.venv`` (``ensure_venv``); a running
        server that does not preload them all, or named another venv, is restarted; otherwise
        starting a running cluster does nothing.
        """
        self.init()
        self.ensure_preload()
        venv_changed = self.ensure_venv()
        if self.running:
            if not venv_changed and all(x in self._live_preload() for x in PRELOAD):
                return self
            self.stop()
        if not _port_free(self.port):
            raise ClusterError(
                f"port {self.port} is taken; edit {self.port_file} and port in "
                f"{self.datadir}/postgresql.conf, or remove {self.datadir}"
            )
        r = _as_server_user(
            [
                str(self.bindir / "pg_ctl"),
                "-D",
                str(self.datadir),
                "-w",
                "-t",
                "60",
                "-l",
                str(self.datadir / "server.log"),
                "start",
            ],
            env=self.server_env,
        )
        if r.returncode != 0:
            log = self.datadir / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise ClusterError(f"pg_ctl start failed: {r.stderr.strip()}\n{tail}")
        return self

    def stop(self) -> None:
        """Stop the server (fast mode) if it runs."""
        if self.running:
            _as_server_user(
                [str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop"]
            )

    def destroy(self) -> None:
        """Stop and delete the cluster folder."""
        self.stop()
        shutil.rmtree(self.datadir, ignore_errors=True)

    def dsn(self, dbname: str = "postgres", user: str = "postgres") -> str:
        """libpq connection string for ``dbname`` on this cluster."""
        return f"host=127.0.0.1 port={self.port} dbname={dbname} user={user}"

    def connect(self, dbname: str = "postgres", user: str = "postgres", autocommit: bool = True):
        """A psycopg 3 connection."""
        import psycopg

        return psycopg.connect(self.dsn(dbname, user), autocommit=autocommit)

    def create_database(self, dbname: str, drop: bool = False) -> None:
        """CREATE DATABASE (dropping an existing one first when ``drop``)."""
        from psycopg import sql

        with self.connect() as c:
            exists = c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
            if exists and drop:
                c.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(dbname)))
                exists = None
            if not exists:
                c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))

    def psql_file(self, dbname: str, path: str | Path) -> None:
        """Run an SQL file with psql (ON_ERROR_STOP). Raises ClusterError with psql's stderr."""
        r = subprocess.run(
            [
                str(self.bindir / "psql"),
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-d",
                self.dsn(dbname),
                "-f",
                str(path),
            ],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise ClusterError(f"psql -f {path} failed: {r.stderr.strip()[-2000:]}")


def _port_free(port: int | None) -> bool:
    """Whether PostgreSQL could listen on ``port`` of 127.0.0.1. SO_REUSEADDR as the server
    sets it: connections of a cluster just stopped, left in TIME_WAIT, do not block it."""
    if port is None:
        return False
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False
