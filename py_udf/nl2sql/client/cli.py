"""The ``nl2sql`` command: nl2sql beside the database (docs/client.md).

  nl2sql ask --dsn DSN "question"        the chosen SQL and the first rows (--json: the trace;
                                         --chart out.png|out.svg: the answer drawn, docs/charts.md)
  nl2sql explain --dsn DSN "question"    the whole trace as JSON
  nl2sql reindex --dsn DSN               index the database from this process (progress bar)
  nl2sql model install|start|stop|status|logs|register
                                         a private local model on this machine (docs/models.md)
  nl2sql doctor, narrate, explain-sql, evaluate, export-semantic-model, prune-query-log
                                         the SQL functions of the same names, run here

Without --dsn: the environment variable NL2SQL_DSN, else libpq's (PGHOST, PGDATABASE, …)."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from typing import Any

from ..core.errors import ClientError, LocalModelError
from .connection import Answer, connect

# modules adding subcommands (``add_subcommands(subparsers)``): install, upgrade, uninstall and
# the worker live in ``admin``; one absent is skipped
SUBCOMMAND_MODULES = (
    "nl2sql.client.admin",
    "nl2sql.client.tools_cli",
    "nl2sql.client.local_model.cli",
)


CHART_HELP = (
    "draw the answer into PATH (.png or .svg): a chart chosen from the question and the result "
    "(nl2sql.chart)"
)


def dsn_argument(p: argparse.ArgumentParser) -> None:
    """Add ``--dsn`` to a subcommand's parser.

    Args:
        p: the subcommand's parser.
    """
    p.add_argument(
        "--dsn",
        default=None,
        help="libpq connection string or URI (default: NL2SQL_DSN, else PGHOST, PGDATABASE, …)",
    )


def question_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--dsn``, the question and ``--evidence``/``--conversation`` to a parser.

    Args:
        p: the subcommand's parser.
    """
    dsn_argument(p)
    p.add_argument("question", help="the question, in words")
    p.add_argument("--evidence", default=None, help="a hint text (BIRD's external knowledge)")
    p.add_argument("--conversation", default=None, help="a conversation key (follow-ups)")
    p.add_argument(
        "--for-model",
        action="store_true",
        help="the output goes to a model (an agent): the role's value rules apply to it as to "
        "a prompt (setting agent_values; docs/mcp.md)",
    )


def rows_table(columns: list[str], rows: list[tuple], limit: int) -> str:
    """Rows as an aligned text table, with a line saying how many more there are.

    Args:
        columns: the column names. rows: the rows. limit: how many rows are shown at most.

    Returns:
        The table's text.
    """
    shown = [["" if v is None else str(v) for v in r] for r in rows[:limit]]
    widths = [max([len(c)] + [len(r[i]) for r in shown]) for i, c in enumerate(columns)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(v.ljust(w) for v, w in zip(r, widths)) for r in shown]
    more = len(rows) - len(shown)
    lines.append(
        f"({len(rows)} row{'s' * (len(rows) != 1)}{f', {more} not shown' if more else ''})"
    )
    return "\n".join(lines)


def _print_answer(a: Answer, as_json: bool, limit: int) -> None:
    if as_json:
        out = dict(a.trace, columns=a.columns, rows=[list(r) for r in a.rows])
        print(json.dumps(out, default=str, indent=2))
        return
    print(a.sql.rstrip().rstrip(";") + ";")
    print()
    print(rows_table(a.columns, a.rows, limit))


def cmd_ask(args: argparse.Namespace) -> int:
    """``nl2sql ask``: the chosen SQL and its first rows, or the trace as JSON.

    Args:
        args: the parsed command line.

    Returns:
        The exit status (0; errors are raised as ``ClientError``).
    """
    if args.chart:
        return _chart(args)
    with connect(args.dsn, for_model=getattr(args, "for_model", False)) as client:
        a = client.ask(args.question, args.evidence, args.conversation)
    _print_answer(a, args.json, args.rows)
    return 0


def _chart(args: argparse.Namespace) -> int:
    """``nl2sql ask --chart PATH``: the answer drawn into PATH (PNG or SVG); the SQL and what
    was drawn printed (``--json``: the spec)."""
    from ..charts import render  # vl-convert only for this option

    try:
        render.image_format(args.chart)
    except ValueError as e:
        raise ClientError(str(e), hint="give a path ending in .png or .svg") from None
    with connect(args.dsn, for_model=getattr(args, "for_model", False)) as client:
        spec = client.chart(args.question, args.evidence, args.conversation)
    render.write(spec, args.chart)
    meta = spec.get("usermeta", {})
    if args.json:
        print(json.dumps(spec, default=str, indent=2))
        return 0
    if meta.get("sql"):
        print(meta["sql"].rstrip().rstrip(";") + ";\n")
    print(f"{meta.get('chart')} chart ({meta.get('reason')}) written to {args.chart}")
    for note in meta.get("notes") or []:
        print(f"  {note}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    """``nl2sql explain``: the whole trace as JSON.

    Args:
        args: the parsed command line.

    Returns:
        The exit status (0; errors are raised as ``ClientError``).
    """
    with connect(args.dsn, for_model=getattr(args, "for_model", False)) as client:
        trace = client.explain(args.question, args.evidence, args.conversation)
    print(json.dumps(trace, default=str, indent=2))
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    """``nl2sql reindex``: index from this process with a values/s progress bar.

    Args:
        args: the parsed command line.

    Returns:
        The exit status (0; errors are raised as ``ClientError``).
    """
    from tqdm import tqdm  # the bar only for this subcommand

    unit = "table" if args.jobs > 1 else "value"  # workers report tables done
    bar = tqdm(desc=unit + "s", unit=unit, unit_scale=True, disable=args.quiet)
    seen: dict[str, int] = {}

    def progress(table: str, values: int) -> None:
        bar.update(values - seen.get(table, 0))
        seen[table] = values
        bar.set_postfix_str(table, refresh=False)

    try:
        with connect(args.dsn) as client:
            counts = client.reindex(
                args.schemas, args.force, on_progress=progress, jobs=args.jobs, dsn=args.dsn
            )
    finally:
        bar.close()
    print(json.dumps(counts))
    return 0


def parser() -> argparse.ArgumentParser:
    """The command line: ``ask``, ``explain``, ``reindex`` and the subcommands of
    ``SUBCOMMAND_MODULES``.

    Returns:
        The parser; each subcommand's ``run`` default is its function.
    """
    ap = argparse.ArgumentParser(
        prog="nl2sql", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("ask", help="answer a question: the SQL and its first rows")
    question_arguments(p)
    p.add_argument("--json", action="store_true", help="print the trace (with the rows) as JSON")
    p.add_argument("--rows", type=int, default=20, help="rows shown (default 20)")
    p.add_argument("--chart", metavar="PATH", default=None, help=CHART_HELP)
    p.set_defaults(run=cmd_ask)
    p = sub.add_parser("explain", help="the whole trace of answering a question, as JSON")
    question_arguments(p)
    p.set_defaults(run=cmd_explain)
    p = sub.add_parser("reindex", help="index the database from this process")
    dsn_argument(p)
    p.add_argument("--schema", action="append", dest="schemas", help="schema (repeatable)")
    p.add_argument("--force", action="store_true", help="redo every table, not only changed ones")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="worker processes (each embeds) claiming the changed tables from a queue in "
        "the database (default 1)",
    )
    p.set_defaults(run=cmd_reindex)
    for name in SUBCOMMAND_MODULES:
        try:
            mod: Any = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
            continue
        mod.add_subcommands(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: the arguments (default ``sys.argv[1:]``).

    Returns:
        The exit status: 0, 1 on an nl2sql error (message and hint on stderr), 130 when
        interrupted (the running statement is cancelled).
    """
    args = parser().parse_args(argv)
    # psycopg logs "error ignored in rollback" when Ctrl-C lands while a statement runs (the
    # transaction cannot roll back a busy connection); the cancel below is the answer to that,
    # so its warning would only put a library's traceback-like line before ours on stderr.
    logging.getLogger("psycopg").setLevel(logging.ERROR)
    try:
        return args.run(args)
    except (ClientError, LocalModelError) as e:
        print(str(e), file=sys.stderr)
        if e.hint:
            print(f"hint: {e.hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("nl2sql: interrupted; the running statement was cancelled", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
