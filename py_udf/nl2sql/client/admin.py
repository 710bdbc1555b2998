"""The ``nl2sql`` command's administrative subcommands: ``install``, ``upgrade``,
``uninstall`` (``client.install``) and ``worker`` (``client.worker``). ``add_subcommands``
registers them on the command's parser; ``python -m nl2sql.client.admin`` runs them alone."""

from __future__ import annotations

import argparse
import os
import sys

from ..core.errors import WorkerError

__all__ = ["add_subcommands", "main"]


def _dsn_arg(p: argparse.ArgumentParser) -> None:
    """``--dsn``, default NL2SQL_DSN (empty: libpq's PGHOST, PGDATABASE, … environment)."""
    p.add_argument(
        "--dsn",
        default=os.environ.get("NL2SQL_DSN", ""),
        help="libpq connection string (default: $NL2SQL_DSN, else the PG* environment)",
    )


def _refused(e: Exception) -> int:
    """Print a refusal (its message starts with ``nl2sql:``) on stderr; returns 1."""
    print(str(e), file=sys.stderr)
    return 1


def _install(args: argparse.Namespace) -> int:
    from . import install  # lazy: the other subcommands do not need pglast

    run = install.upgrade if args.admin_command == "upgrade" else install.install
    try:
        run(args.dsn)
    except install.InstallError as e:
        return _refused(e)
    return 0


def _uninstall(args: argparse.Namespace) -> int:
    from . import install  # lazy: as in _install

    if not args.yes:
        print(
            "nl2sql: uninstall drops schema nl2sql with its index, settings, models, curated "
            "knowledge, query log and requests: run it again with --yes to confirm",
            file=sys.stderr,
        )
        return 2
    try:
        install.uninstall(args.dsn)
    except install.InstallError as e:
        return _refused(e)
    return 0


def _worker(args: argparse.Namespace) -> int:
    import nl2sql  # lazy: the package root, only to see whether the client pipeline is there

    from . import worker  # lazy: loads the pipeline

    if not hasattr(nl2sql, "connect"):
        return _refused(
            RuntimeError(
                "nl2sql: this nl2sql package has no client pipeline (nl2sql.connect): the "
                "worker cannot answer; install the nl2sql release that has it"
            )
        )
    try:
        worker.run(args.dsn, poll_s=args.poll_s, once=args.once)
    except WorkerError as e:
        return _refused(e)
    return 0


def _apply(args: argparse.Namespace) -> int:
    import nl2sql  # lazy: loads the pipeline

    try:
        with nl2sql.connect(args.dsn) as client:
            calls = client.apply()
    except Exception as e:  # noqa: BLE001 - ClientError and connection errors, said on stderr
        msg = str(e)
        return _refused(RuntimeError(msg if msg.startswith("nl2sql") else f"nl2sql apply: {msg}"))
    for c in calls:
        print(
            f"deferred call {c.id} {c.function}() as {c.role}: {c.status}"
            + (f": {c.error}" if c.error else "")
        )
    print(
        f"nl2sql apply: {sum(c.status == 'done' for c in calls)} applied, "
        f"{sum(c.status == 'refused' for c in calls)} refused, "
        f"{sum(c.status == 'pending' for c in calls)} left pending"
    )
    return 0


def add_subcommands(subparsers) -> None:
    """Register ``install``, ``upgrade``, ``uninstall``, ``worker`` and ``apply``; each sets ``run``
    (``run(args) -> exit status``), as the ``nl2sql`` command's own subcommands do.

    Args:
        subparsers: the ``nl2sql`` parser's ``add_subparsers()`` result.
    """
    for name, what in (
        ("install", "create schema nl2sql in a database without PL/Python"),
        ("upgrade", "apply what a newer nl2sql adds to schema nl2sql"),
    ):
        p = subparsers.add_parser(name, help=what, description=what)
        _dsn_arg(p)
        p.set_defaults(run=_install, admin_command=name)
    p = subparsers.add_parser(
        "uninstall", help="drop schema nl2sql (needs --yes)", description="drop schema nl2sql"
    )
    _dsn_arg(p)
    p.add_argument("--yes", action="store_true", help="confirm: everything nl2sql holds goes")
    p.set_defaults(run=_uninstall)
    p = subparsers.add_parser(
        "worker",
        help="answer the questions SQL clients submit (nl2sql.submit), as their roles",
        description="answer nl2sql.submit() requests as the roles that submitted them",
    )
    _dsn_arg(p)
    p.add_argument("--poll-s", type=float, default=5.0, help="poll interval besides LISTEN")
    p.add_argument("--once", action="store_true", help="answer what is queued, then exit")
    p.set_defaults(run=_worker)
    p = subparsers.add_parser(
        "apply",
        help="apply the configuration functions called in SQL (deferred calls), as their roles",
        description="apply nl2sql.deferred_call rows as the roles that made them",
    )
    _dsn_arg(p)
    p.set_defaults(run=_apply)


def main(argv: list[str] | None = None) -> int:
    """Run one administrative subcommand.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0 done, 1 refused or failed (the message on stderr), 2 not confirmed.
    """
    ap = argparse.ArgumentParser(prog="nl2sql", description=__doc__)
    add_subcommands(ap.add_subparsers(required=True))
    args = ap.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
