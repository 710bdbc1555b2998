"""The tools' output schemas (``tools/list`` shows them; a result's structured content is checked
against them by the SDK): one ``TypedDict`` per tool an agent reads rows or lookups from. A key
left out here would be dropped from the structured content, so each lists every key its tool
returns (``NotRequired`` where a result may lack it)."""

from __future__ import annotations

from typing import Any, NotRequired

# pydantic builds a schema of a nested TypedDict on Python 3.11 only from typing_extensions'
from typing_extensions import TypedDict

Row = dict[str, Any]


class AskOutput(TypedDict):
    """``ask``: the chosen SQL and its rows as the agent may see them."""

    sql: str | None
    rows: list[Row]
    withheld_columns: list[str]
    rows_withheld: NotRequired[str]
    row_count: int
    truncated: bool
    confidence: float | None
    log_id: int | None
    data_notice: str


class ExecuteOutput(TypedDict):
    """``execute_sql``: the agent's query as run (or planned) and its rows as it may see them."""

    status: str
    sql: str
    dry_run: bool
    rows: NotRequired[list[Row]]
    row_count: NotRequired[int]
    truncated: NotRequired[bool]
    withheld_columns: NotRequired[list[str]]
    rows_withheld: NotRequired[str]
    exec_ms: NotRequired[float | None]
    plan_cost: NotRequired[float | None]
    plan_rows: NotRequired[float | None]
    total_ms: float
    log_id: int | None
    values_withheld: NotRequired[dict[str, Any]]
    data_notice: NotRequired[str]


class Match(TypedDict):
    """One cell value like the literal, and the column holding it."""

    schema: str
    table: str
    column: str
    value: str
    score: float
    how: str


class SearchOutput(TypedDict):
    """``search_values``."""

    matches: list[Match]
    values_withheld: NotRequired[str]
    data_notice: NotRequired[str]


class TableOutput(TypedDict):
    """``describe_table``."""

    schema: str
    table: str
    name: str
    comment: str | None
    rows: int | None
    columns: list[dict[str, Any]]
    foreign_keys: list[dict[str, Any]]
    data_notice: str


class TablesOutput(TypedDict):
    """``list_tables``."""

    tables: list[dict[str, Any]]
    count: int
    truncated: bool


class CuratedOutput(TypedDict):
    """``semantic_context``."""

    semantic_model: dict[str, Any]
    verified_queries: list[dict[str, Any]]
