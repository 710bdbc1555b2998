"""``nl2sql model``: a private local model as a service of this machine (docs/models.md,
"A private local model").

  nl2sql model install [NAME] [--gguf PATH|URL [--sha256 HEX]]   llama-server and the GGUF file
  nl2sql model start [--port N] [--parallel N] [--threads N]     serve it on 127.0.0.1
  nl2sql model stop | status [--json] | logs [-n N] | systemd-unit
  nl2sql model register [--dsn DSN] [--name local]               add_model for it in a database
"""

from __future__ import annotations

import argparse
import json

from ...core.errors import LocalModelError
from ._paths import paths
from ._service import systemd_unit
from .catalog import DEFAULT, MODELS
from .manage import install, logs, register, start, status, stop

__all__ = ["add_subcommands"]


def _install(args: argparse.Namespace) -> int:
    done = install(args.name, args.gguf, args.sha256, quiet=args.quiet)
    print(f"installed {done.model}: {done.gguf}")
    print(f"  from {done.source}")
    print(f"  served by {done.binary}")
    print("next: nl2sql model start")
    return 0


def _start(args: argparse.Namespace) -> int:
    s = start(args.port, args.parallel, args.threads, quiet=args.quiet)
    print(
        f"{s.alias} serving at {s.base_url} ({s.parallel} slots of {s.slot_ctx} tokens, "
        f"{s.threads} threads); restarted by supervisord if it exits"
    )
    print("next: nl2sql model register --dsn …")
    return 0


def _stop(_args: argparse.Namespace) -> int:
    print("stopped" if stop() else "not running")
    return 0


def _status(args: argparse.Namespace) -> int:
    st = status()
    if args.json:
        print(json.dumps(st, indent=2))
    else:
        inst = st.get("installed") or {}
        print(f"installed: {inst.get('model', 'nothing (nl2sql model install)')}")
        for k in ("state", "health", "base_url", "model", "slots", "slot_ctx"):
            if st.get(k) is not None:
                print(f"{k}: {st[k]}")
        for k in ("prompt_tokens_per_s", "predicted_tokens_per_s"):
            if st.get(k) is not None:
                print(f"{k}: {st[k]:.1f}")
    return 0 if st.get("health") == "ok" else 3


def _logs(args: argparse.Namespace) -> int:
    print(logs(args.lines))
    return 0


def _systemd_unit(_args: argparse.Namespace) -> int:
    state = paths().state
    if not (state / "supervisord.conf").exists():
        raise LocalModelError(
            "nl2sql model systemd-unit: the service was never started here",
            hint="run nl2sql model start once (it writes the configuration), then this",
        )
    print(systemd_unit(state), end="")
    return 0


def _register(args: argparse.Namespace) -> int:
    print(register(args.dsn, args.name, args.priority))
    return 0


def add_subcommands(subparsers) -> None:
    """Register ``model`` and its verbs on the ``nl2sql`` command's parser.

    Args:
        subparsers: the ``nl2sql`` parser's ``add_subparsers()`` result.
    """
    what = "a private local model (llama.cpp's llama-server) on this machine"
    m = subparsers.add_parser(
        "model",
        help=what,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = m.add_subparsers(dest="model_command", required=True)
    p = verbs.add_parser("install", help="build llama-server and fetch a model, checked")
    p.add_argument(
        "name", nargs="?", default=None, help=f"one of {', '.join(MODELS)} (default {DEFAULT})"
    )
    p.add_argument("--gguf", metavar="PATH|URL", default=None, help="any other GGUF file")
    p.add_argument("--sha256", default=None, help="the --gguf file's expected sha256")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(run=_install)
    p = verbs.add_parser("start", help="serve the installed model on 127.0.0.1")
    p.add_argument("--port", type=int, default=None, help="default 8407 (or the last one used)")
    p.add_argument("--parallel", type=int, default=None, help="slots (default sized to the CPU)")
    p.add_argument("--threads", type=int, default=None, help="threads (default: every core)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(run=_start)
    verbs.add_parser("stop", help="stop the server").set_defaults(run=_stop)
    p = verbs.add_parser("status", help="model, health, slots, context, recent tokens/s")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_status)
    p = verbs.add_parser("logs", help="the end of the server's log")
    p.add_argument("-n", "--lines", type=int, default=50)
    p.set_defaults(run=_logs)
    verbs.add_parser(
        "systemd-unit", help="a systemd unit that starts the service at boot (printed)"
    ).set_defaults(run=_systemd_unit)
    p = verbs.add_parser("register", help="add_model for the local model in a database")
    p.add_argument("--dsn", default=None, help="default: NL2SQL_DSN, else libpq's PG* variables")
    p.add_argument("--name", default="local", help="its name in nl2sql.model (default local)")
    p.add_argument("--priority", type=int, default=None, help="lower writes the PreSQL")
    p.set_defaults(run=_register)
