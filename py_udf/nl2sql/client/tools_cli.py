"""The ``nl2sql`` subcommands of the SQL functions a DBA runs from a shell beside the database:
``doctor``, ``narrate``, ``explain-sql``, ``evaluate``, ``export-semantic-model``,
``prune-query-log``, ``execute-sql``, ``search-values`` and ``describe-table`` (docs/client.md), each calling the ``Client`` method of the same name."""

from __future__ import annotations

import argparse
import json

from .cli import dsn_argument, question_arguments, rows_table
from .connection import connect


def _dumps(obj) -> str:
    return json.dumps(obj, default=str, indent=2)


def cmd_doctor(args: argparse.Namespace) -> int:
    """``nl2sql doctor``: the checks as a table (``--json``: a JSON array).

    Args:
        args: the parsed command line.

    Returns:
        0, or 1 when a check failed (its row says how to fix it).
    """
    with connect(args.dsn) as client:
        rows = client.doctor()
    if args.json:
        print(_dumps(rows))
    else:
        cols = ["check", "status", "detail", "fix"]
        print(rows_table(cols, [tuple(r[c] for c in cols) for r in rows], len(rows)))
    return 1 if any(r["status"] == "fail" for r in rows) else 0


def cmd_narrate(args: argparse.Namespace) -> int:
    """``nl2sql narrate``: the answer in words.

    Args:
        args: the parsed command line.

    Returns:
        0 (errors are raised as ``ClientError``).
    """
    with connect(args.dsn) as client:
        print(client.narrate(args.question, args.evidence, args.conversation))
    return 0


def cmd_explain_sql(args: argparse.Namespace) -> int:
    """``nl2sql explain-sql``: a read-only query explained in words.

    Args:
        args: the parsed command line.

    Returns:
        0 (errors are raised as ``ClientError``).
    """
    with connect(args.dsn) as client:
        print(client.explain_sql(args.sql))
    return 0


def cmd_execute_sql(args: argparse.Namespace) -> int:
    """``nl2sql execute-sql``: one read-only query run as a candidate is, as JSON.

    Args:
        args: the parsed command line.

    Returns:
        0 when it ran (or planned), 1 when it was refused, failed or timed out.
    """
    with connect(args.dsn, for_model=args.for_model) as client:
        out = client.execute_sql(args.sql, args.max_rows, args.dry_run)
    print(_dumps(out))
    return 0 if out.get("status") == "ok" else 1


def cmd_search_values(args: argparse.Namespace) -> int:
    """``nl2sql search-values``: the columns holding values like a literal, as JSON.

    Args:
        args: the parsed command line.

    Returns:
        0 (errors are raised as ``ClientError``).
    """
    with connect(args.dsn) as client:
        print(_dumps(client.search_values(args.text, args.k)))
    return 0


def cmd_describe_table(args: argparse.Namespace) -> int:
    """``nl2sql describe-table``: one table as this role may see it, as JSON.

    Args:
        args: the parsed command line.

    Returns:
        0 (errors are raised as ``ClientError``).
    """
    with connect(args.dsn, for_model=args.for_model) as client:
        print(_dumps(client.describe_table(args.table)))
    return 0


def _agent_subcommands(subparsers) -> None:
    """``execute-sql``, ``search-values``, ``describe-table`` (the agent door's functions)."""
    model = "the output goes to a model: the role's value rules apply (docs/mcp.md)"
    p = subparsers.add_parser("execute-sql", help="run a read-only query as a candidate is")
    dsn_argument(p)
    p.add_argument("sql", help="one read-only query")
    p.add_argument("--max-rows", type=int, default=50, help="most rows (1..1000, default 50)")
    p.add_argument("--dry-run", action="store_true", help="plan it only: cost and row estimate")
    p.add_argument("--for-model", action="store_true", help=model)
    p.set_defaults(run=cmd_execute_sql)
    p = subparsers.add_parser("search-values", help="which columns hold values like a literal")
    dsn_argument(p)
    p.add_argument("text", help="the literal")
    p.add_argument("-k", type=int, default=10, help="most matches (1..100, default 10)")
    p.set_defaults(run=cmd_search_values)
    p = subparsers.add_parser("describe-table", help="one table: columns, keys, join paths")
    dsn_argument(p)
    p.add_argument("table", help="the table's name")
    p.add_argument("--for-model", action="store_true", help=model)
    p.set_defaults(run=cmd_describe_table)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``nl2sql evaluate``: one evaluation run; its EX and misses (``--json``: the summary).

    Args:
        args: the parsed command line.

    Returns:
        0 (errors are raised as ``ClientError``).
    """
    with connect(args.dsn) as client:
        out = client.evaluate(args.max_questions, args.note)
    if args.json:
        print(_dumps(out))
        return 0
    print(f"run {out.get('run_id')}: EX {out.get('ex')} ({out.get('right')}/{out.get('judged')})")
    for m in out.get("misses") or []:
        print(f"  miss #{m['verified_query_id']} {m['category']}: {m['question']}")
    return 0


def cmd_export_semantic_model(args: argparse.Namespace) -> int:
    """``nl2sql export-semantic-model``: the semantic model's YAML on stdout.

    Args:
        args: the parsed command line.

    Returns:
        0 (errors are raised as ``ClientError``).
    """
    with connect(args.dsn) as client:
        text = client.export_semantic_model()
    print(text, end="" if text.endswith("\n") else "\n")
    return 0


def cmd_prune_query_log(args: argparse.Namespace) -> int:
    """``nl2sql prune-query-log``: rows deleted (``--json``: the counts).

    Args:
        args: the parsed command line.

    Returns:
        0 (errors are raised as ``ClientError``).
    """
    with connect(args.dsn) as client:
        out = client.prune_query_log()
    if args.json:
        print(_dumps(out))
    else:
        print(f"deleted {out['deleted']} query_log rows (retention {out['retention_days']} days)")
    return 0


def add_subcommands(subparsers) -> None:
    """Register the subcommands; each sets ``run`` (``run(args) -> exit status``).

    Args:
        subparsers: the ``nl2sql`` parser's ``add_subparsers()`` result.
    """
    p = subparsers.add_parser("doctor", help="check the installation, models and index")
    dsn_argument(p)
    p.add_argument("--json", action="store_true", help="print the checks as a JSON array")
    p.set_defaults(run=cmd_doctor)
    p = subparsers.add_parser("narrate", help="answer a question in words")
    question_arguments(p)
    p.set_defaults(run=cmd_narrate)
    p = subparsers.add_parser("explain-sql", help="a read-only query explained in words")
    dsn_argument(p)
    p.add_argument("sql", help="the query")
    p.set_defaults(run=cmd_explain_sql)
    p = subparsers.add_parser("evaluate", help="execution accuracy on the verified questions")
    dsn_argument(p)
    p.add_argument("--max-questions", type=int, default=None, help="at most N questions")
    p.add_argument("--note", default=None, help="a note kept with the run")
    p.add_argument("--json", action="store_true", help="print the run's summary as JSON")
    p.set_defaults(run=cmd_evaluate)
    p = subparsers.add_parser("export-semantic-model", help="the semantic model as YAML")
    dsn_argument(p)
    p.set_defaults(run=cmd_export_semantic_model)
    p = subparsers.add_parser("prune-query-log", help="delete query_log rows past retention")
    dsn_argument(p)
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.set_defaults(run=cmd_prune_query_log)
    _agent_subcommands(subparsers)
