"""The Vega-Lite v5 spec of a result (docs/charts.md): the chosen SQL's rows inline (capped),
the mark and encoding the rule chose (``choice``), dates binned when asked, a long tail folded
into "other", and what was done in ``usermeta``; a result no chart fits gets a spec that says
so (a text mark), never an error."""

from __future__ import annotations

from typing import Any

from . import choice as ch
from .binning import OTHER, bin_rows, fold_tail, unit_order
from .shape import (
    NOMINAL,
    ORDINAL,
    QUANTITATIVE,
    TEMPORAL,
    Column,
    columns,
    is_date,
    is_number,
    parse_rows,
)

SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
MAX_VALUES = 5000
"""Most rows a spec carries in ``data.values`` (the cap; ``usermeta.truncated`` says when more
came)."""
MESSAGE_FIELD = "nl2sql_message"
WHOLE_TICKS = 10
"""A count axis spanning at most this many units gets a tick at every whole number (Vega, as
vl-convert renders it, draws 0.5 steps below about 5 despite ``tickMinStep``)."""
_TITLE_CHARS = 90
_MARKS = {
    ch.BAR: "bar",
    ch.STACKED_BAR: "bar",
    ch.LINE: "line",
    ch.GROUPED_LINE: "line",
    ch.SCATTER: "point",
    ch.PIE: "arc",
}


def field(name: str) -> str:
    """A column name as a Vega-Lite field (dots and brackets are paths there: escaped).

    Args:
        name: the column name.

    Returns:
        The field text.
    """
    for c in ("\\", ".", "[", "]"):
        name = name.replace(c, "\\" + c)
    return name


def _title(question: str, notes: list[str] | None = None) -> str | dict[str, Any]:
    """The question as the title (cut), what was done to the rows as its subtitle."""
    q = " ".join(question.split())
    q = q if len(q) <= _TITLE_CHARS else q[: _TITLE_CHARS - 1] + "…"
    return {"text": q, "subtitle": notes} if notes else q


def _other_last(rows: list[dict], x: str, y: str, ordered: bool) -> list[str]:
    """The categories in the order drawn, "other" last: the SQL's order, else largest first."""
    totals: dict[Any, float] = {}
    for r in rows:
        totals[r[x]] = totals.get(r[x], 0) + r[y]
    cats = [c for c in totals if c != OTHER]
    if not ordered:
        cats.sort(key=lambda c: -totals[c])
    return [*cats, OTHER]


def message_spec(question: Any, text: str, meta: dict[str, Any]) -> dict[str, Any]:
    """A spec that draws ``text`` instead of a chart (``usermeta.chart`` ``none``).

    Args:
        question: the title (text, or a title object). text: what to say. meta: the usermeta.

    Returns:
        The spec.
    """
    if isinstance(question, dict):
        question = question.get("text", "")
    return {
        "$schema": SCHEMA,
        "title": _title(question),
        "data": {"values": [{MESSAGE_FIELD: text}]},
        "mark": {"type": "text", "fontSize": 14},
        "encoding": {"text": {"field": MESSAGE_FIELD, "type": NOMINAL}},
        "usermeta": {**meta, "chart": ch.NONE, "reason": text},
    }


def _usable(rows: list[dict], lay: ch.Layout, notes: list[str]) -> list[dict]:
    """Rows whose drawn cells are present and of their column's kind; the others counted."""
    need = [c for c in (lay.x, lay.y, lay.color) if c is not None]
    kept, nulls, misfit = [], 0, 0
    for r in rows:
        if any(r.get(c.name) is None for c in need):
            nulls += 1
        elif any(not _fits(r[c.name], c) for c in need):
            misfit += 1
        else:
            kept.append(r)
    if nulls:
        notes.append(f"{nulls} row(s) with NULL in a drawn column left out")
    if misfit:
        notes.append(
            f"mixed types: {misfit} row(s) whose value is not of its column's type left out"
        )
    return kept


def _fits(v: Any, col: Column) -> bool:
    if col.kind == QUANTITATIVE:
        return is_number(v)
    if col.kind == TEMPORAL:
        return is_date(v)
    return True


def build(question: str, sql: str | None, rows: list, cap: int = MAX_VALUES) -> dict[str, Any]:
    """The spec of ``sql``'s rows asked by ``question``.

    Args:
        question: the question. sql: the chosen SQL. rows: its rows (``row_to_json`` texts or
            dicts). cap: most rows carried.

    Returns:
        A Vega-Lite v5 spec; ``usermeta``: ``sql``, ``chart``, ``reason``, ``cap``, ``rows``,
        ``truncated``, ``binning``, ``notes``.
    """
    names, parsed, dup = parse_rows(rows)
    meta: dict[str, Any] = {"sql": sql, "cap": cap, "rows": len(parsed), "columns": names}
    meta["truncated"] = len(parsed) > cap
    notes: list[str] = [f"{dup} column name(s) given twice: the last kept"] if dup else []
    if meta["truncated"]:
        notes.append(f"{len(parsed)} rows: only the first {cap} drawn")
    parsed = parsed[:cap]
    lay = ch.choose(question, columns(names, parsed), len(parsed))
    meta.update(notes=notes, binning=lay.binning)
    if lay.chart == ch.NONE:
        return message_spec(question, _none_text(lay, names, parsed), meta)
    drawn = _usable(parsed, lay, notes)
    if not drawn:
        return message_spec(question, "no chart fits: every row has a NULL or misfit", meta)
    return _chart_spec(question, lay, drawn, meta)


def _none_text(lay: ch.Layout, names: list[str], rows: list[dict]) -> str:
    """What a chartless spec says: one value as ``name: value``, else why."""
    if len(rows) == 1 and len(names) == 1:
        return f"{names[0]}: {rows[0][names[0]]}"
    return lay.reason


def _chart_spec(question: str, lay: ch.Layout, rows: list[dict], meta: dict) -> dict[str, Any]:
    """The chart's spec from rows fit to draw."""
    notes = meta["notes"]
    y_name = lay.y.name if lay.y else "count"
    if lay.binning:
        rows = bin_rows(rows, lay.x.name, lay.y.name if lay.y else None, lay.color, lay.binning)
        notes.append(f"{lay.x.name} binned by {lay.binning}")
    if lay.chart in (ch.PIE, ch.BAR, ch.STACKED_BAR) and lay.x.kind == NOMINAL:
        rows, folded = fold_tail(rows, lay.x.name, y_name, lay.chart == ch.PIE)
        if folded:
            notes.append(f"{folded} smallest categories folded into 'other'")
    meta["rows_drawn"] = len(rows)
    enc = _encoding(lay, y_name, rows, meta["sql"])
    if any(r[lay.x.name] == OTHER for r in rows) and lay.x.kind == NOMINAL:
        key = "color" if lay.chart == ch.PIE else "x"
        enc[key]["sort"] = _other_last(rows, lay.x.name, y_name, _ordered(meta["sql"]))
    if lay.chart == ch.PIE:
        rows = _pie_order(enc, rows, lay.x.name, y_name, meta["sql"])
    return {
        "$schema": SCHEMA,
        "title": _title(question, notes),
        **_size(lay, rows),
        "data": {"values": rows},
        "mark": {"type": _MARKS[lay.chart], "tooltip": True, **_mark_extra(lay)},
        "encoding": enc,
        "usermeta": {**meta, "chart": lay.chart, "reason": lay.reason},
    }


def _pie_order(enc: dict, rows: list[dict], x: str, y: str, sql: str | None) -> list[dict]:
    """The pie's rows in its legend's order (slices are stacked in data order): the SQL's
    order, else largest first; "other" last."""
    order = enc["color"].get("sort")
    if not isinstance(order, list):
        order = _other_last(rows, x, y, _ordered(sql))[:-1]
        enc["color"]["sort"] = order
    rank = {c: i for i, c in enumerate(order)}
    return sorted(rows, key=lambda r: rank.get(r[x], len(rank)))


def _size(lay: ch.Layout, rows: list[dict]) -> dict[str, Any]:
    """Width and height: bars a step each when there are many, else a fixed frame."""
    if lay.chart in (ch.BAR, ch.STACKED_BAR) and len({str(r[lay.x.name]) for r in rows}) > 20:
        return {"width": {"step": 18}, "height": 300}
    return {"width": 300 if lay.chart == ch.PIE else 420, "height": 300}


def _mark_extra(lay: ch.Layout) -> dict[str, Any]:
    if lay.chart in (ch.LINE, ch.GROUPED_LINE):
        return {"point": True}
    if lay.chart == ch.SCATTER:
        return {"filled": True}
    return {}


def _x_type(lay: ch.Layout) -> str:
    if lay.binning == "day" and lay.chart in (ch.LINE, ch.GROUPED_LINE):
        return TEMPORAL  # days a line joins keep their distance in time
    if lay.binning or lay.x.years:
        return ORDINAL
    if lay.chart == ch.SCATTER:
        return lay.x.kind
    return lay.x.kind if lay.x.kind == TEMPORAL else NOMINAL


def _encoding(lay: ch.Layout, y_name: str, rows: list[dict], sql: str | None) -> dict:
    """The encoding: fields, types, axis titles from the column names, sort."""
    x_title = f"{lay.x.name} ({lay.binning})" if lay.binning else lay.x.name
    y = {"field": field(y_name), "type": QUANTITATIVE, "title": y_name}
    ints = [r.get(y_name) for r in rows]
    if lay.chart != ch.PIE and all(isinstance(v, int) for v in ints):
        y["axis"] = _whole_ticks(lay, ints, rows)
    if lay.chart == ch.PIE:
        return {"theta": {**y, "stack": True}, "color": _x_channel(lay, rows, x_title, sql)}
    x = _x_channel(lay, rows, x_title, sql)
    if lay.chart == ch.SCATTER:
        y["scale"] = {"zero": False}
        x["scale"] = {"zero": False}
    enc: dict[str, Any] = {"x": x, "y": y}
    if lay.color is not None:
        enc["color"] = {"field": field(lay.color.name), "type": NOMINAL, "title": lay.color.name}
    return enc


def _whole_ticks(lay: ch.Layout, ints: list[int], rows: list[dict]) -> dict[str, Any]:
    """The axis of an integer measure: whole-number steps, and where it spans at most
    ``WHOLE_TICKS`` a tick at each whole number (from 0 where the scale starts there; not where
    bars of one x stack, their sums unknown here)."""
    if not ints:
        return {"tickMinStep": 1}
    lo, hi = min(ints), max(ints)
    if lay.chart != ch.SCATTER:
        lo, hi = min(0, lo), max(0, hi)
    stacked = lay.chart == ch.BAR and len({str(r[lay.x.name]) for r in rows}) < len(rows)
    if lay.chart == ch.STACKED_BAR or stacked or hi - lo > WHOLE_TICKS:
        return {"tickMinStep": 1}
    return {"tickMinStep": 1, "values": list(range(lo, hi + 1)), "format": ",d"}


def _x_channel(lay: ch.Layout, rows: list[dict], title: str, sql: str | None) -> dict:
    """The x (or the pie's colour) channel: its type, title, sort and labels."""
    out: dict[str, Any] = {"field": field(lay.x.name), "type": _x_type(lay), "title": title}
    if lay.binning in ("month", "weekday"):
        out["sort"] = unit_order(lay.binning)
    elif out["type"] == NOMINAL and lay.chart != ch.SCATTER:
        out["sort"] = (
            None
            if _ordered(sql)
            else {
                "field": field(lay.y.name if lay.y else "count"),
                "op": "sum",
                "order": "descending",
            }
        )
    if lay.chart != ch.PIE and out["type"] in (NOMINAL, ORDINAL):
        long = any(len(str(r[lay.x.name])) > 10 for r in rows) or len(rows) > 12
        out["axis"] = {"labelAngle": -45 if long else 0, "labelLimit": 160}
    return out


def _ordered(sql: str | None) -> bool:
    """Whether the SQL orders its result itself (then bars keep its order)."""
    return bool(sql) and " order by " in " ".join(sql.lower().split()).replace("(", " ")


def withhold(spec: dict[str, Any], names: list[str], why: str | None = None) -> dict[str, Any]:
    """The spec with the values of columns ``names`` removed (a model reader may not see them):
    a chart that needs one of them becomes a message saying so.

    Args:
        spec: the spec. names: the withheld columns. why: the message, or None.

    Returns:
        The spec as it may be shown.
    """
    if not names:
        return spec
    drawn = {enc.get("field") for enc in spec.get("encoding", {}).values() if isinstance(enc, dict)}
    meta = {**spec.get("usermeta", {}), "withheld_columns": names}
    if drawn & {field(n) for n in names} or MESSAGE_FIELD in drawn:
        text = why or "not drawn: the chart shows values of columns withheld from this reader"
        meta.pop("columns", None)
        return message_spec(spec.get("title", ""), text + " (" + ", ".join(names) + ")", meta)
    values = [{k: v for k, v in r.items() if k not in names} for r in spec["data"]["values"]]
    return {**spec, "data": {"values": values}, "usermeta": meta}
