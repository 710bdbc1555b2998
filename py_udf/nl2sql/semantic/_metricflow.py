"""dbt MetricFlow's semantic-model YAML (``semantic_models:`` with entities, dimensions and
measures; ``metrics:``), rewritten as the Cortex Analyst model ``cortex`` imports
(docs/semantic-model.md, "dbt MetricFlow"). Source: dbt Labs, MetricFlow semantic models and
metrics (the spec of dbt Core 1.6–1.11, read by later versions too)."""

from __future__ import annotations

import re
from typing import Any

from ..core.errors import ConfigError

NAME = "dbt_semantic_models"
_REF = re.compile(r"""ref\(\s*(?:['"][^'"]*['"]\s*,\s*)?['"]([^'"]+)['"]""")
_AGGREGATES = {
    "sum": "SUM({})",
    "max": "MAX({})",
    "min": "MIN({})",
    "average": "AVG({})",
    "avg": "AVG({})",
    "count": "COUNT({})",
    "count_distinct": "COUNT(DISTINCT {})",
    "sum_boolean": "SUM(CASE WHEN {} THEN 1 ELSE 0 END)",
    "median": "percentile_cont(0.5) WITHIN GROUP (ORDER BY {})",
}
_ONE_SIDE = ("primary", "unique", "natural")


def is_metricflow(doc: Any) -> bool:
    """Whether a parsed YAML is dbt MetricFlow's (``semantic_models:``, no ``tables:``).

    Args:
        doc: the parsed YAML.

    Returns:
        True for a mapping with ``semantic_models`` and without ``tables``.
    """
    return isinstance(doc, dict) and "semantic_models" in doc and "tables" not in doc


def to_cortex(doc: dict) -> tuple[dict, list[dict]]:
    """Rewrite dbt MetricFlow YAML as a Cortex Analyst model: a semantic model is a logical table
    (``model: ref('orders')`` its base table), categorical and time dimensions are dimensions and
    time dimensions, a measure is a metric (``agg`` applied to ``expr``), a primary entity is
    the primary key, a foreign entity joins the model whose primary (unique, natural) entity has
    its name (many-to-one), a simple metric is a metric of its measure's table.

    Args:
        doc: the parsed YAML (``is_metricflow``).

    Returns:
        ``(model, skipped)``: the Cortex-shaped mapping, and ``{kind, name, reason}`` of what has
        no counterpart (a measure with another ``agg``, a ratio or derived metric).

    Raises:
        ConfigError: ``semantic_models`` is not a list of mappings with ``name``.
    """
    models = doc.get("semantic_models")
    if not isinstance(models, list) or not all(isinstance(m, dict) for m in models):
        raise ConfigError("not a semantic model: semantic_models must be a list of mappings")
    skipped: list[dict] = []
    tables: list[dict] = []
    measures: dict[str, tuple[dict, dict]] = {}  # measure name -> (table, metric entry)
    keys: dict[str, tuple[str, str]] = {}  # entity name -> (table, column) of its one side
    foreign: list[tuple[str, str, str]] = []  # (table, entity name, column)
    for sm in models:
        name = str(sm.get("name") or "").strip()
        if not name:
            raise ConfigError("not a semantic model: every semantic model needs a name")
        ref = _REF.search(str(sm.get("model") or ""))
        table: dict[str, Any] = {
            "name": name,
            "description": sm.get("description"),
            "base_table": {"table": ref.group(1) if ref else name},
        }
        _entities(sm, table, keys, foreign)
        for d in _list(sm, "dimensions"):
            section = "time_dimensions" if str(d.get("type")).lower() == "time" else "dimensions"
            table.setdefault(section, []).append(_object(d, str(d.get("expr") or d.get("name"))))
        for m in _list(sm, "measures"):
            agg = str(m.get("agg") or "").lower()
            if agg not in _AGGREGATES:
                skipped.append(_skip("metric", f"{name}.{m.get('name')}", f"agg {agg or '(none)'}"))
                continue
            arg = "*" if agg == "count" and not m.get("expr") else str(m.get("expr") or m["name"])
            entry = _object(m, _AGGREGATES[agg].format(arg))
            table.setdefault("metrics", []).append(entry)
            measures[str(m.get("name")).lower()] = (table, entry)
        tables.append(table)
    for m in _list(doc, "metrics"):
        _metric(m, measures, skipped)
    return {
        "name": NAME,
        "tables": tables,
        "relationships": _relationships(foreign, keys),
    }, skipped


def _entities(
    sm: dict, table: dict, keys: dict[str, tuple[str, str]], foreign: list[tuple[str, str, str]]
) -> None:
    """``to_cortex``'s entities of one semantic model: a primary one is ``table``'s primary key;
    a one side is noted in ``keys`` (entity → (table, column)), a foreign one in ``foreign``."""
    name = table["name"]
    for e in _list(sm, "entities"):
        col = str(e.get("expr") or e.get("name") or "")
        kind = str(e.get("type") or "").lower()
        if kind == "primary":
            table["primary_key"] = {"columns": [col]}
        if kind in _ONE_SIDE:
            keys.setdefault(str(e.get("name")).lower(), (name, col))
        elif kind == "foreign":
            foreign.append((name, str(e.get("name")).lower(), col))


def _metric(m: dict, measures: dict, skipped: list[dict]) -> None:
    """A simple metric: a metric of its measure's table (the measure's own entry when named
    alike); other metric types are skipped."""
    name = str(m.get("name") or "")
    params = m.get("type_params") if isinstance(m.get("type_params"), dict) else {}
    measure = params.get("measure")
    measure = measure.get("name") if isinstance(measure, dict) else measure
    if str(m.get("type") or "simple").lower() != "simple" or not measure:
        skipped.append(_skip("metric", name, f"a {m.get('type')} metric has no counterpart"))
        return
    found = measures.get(str(measure).lower())
    if found is None:
        skipped.append(_skip("metric", name, f"its measure {measure} was not imported"))
        return
    table, entry = found
    if name.lower() == str(entry["name"]).lower():
        target = entry
    else:
        target = {"name": name, "expr": entry["expr"]}
        table["metrics"].append(target)
    if m.get("description"):
        target["description"] = m["description"]
    if m.get("label"):
        target["synonyms"] = [*target.get("synonyms", []), str(m["label"])]


def _relationships(foreign: list[tuple[str, str, str]], keys: dict) -> list[dict]:
    """A foreign entity joins the table whose primary, unique or natural entity has its name."""
    out = []
    for table, entity, col in foreign:
        if entity in keys and keys[entity][0] != table:
            right, rcol = keys[entity]
            out.append(
                {
                    "name": f"{table}_to_{right}",
                    "left_table": table,
                    "right_table": right,
                    "relationship_columns": [{"left_column": col, "right_column": rcol}],
                    "join_type": "left_outer",
                    "relationship_type": "many_to_one",
                }
            )
    return out


def _object(d: dict, expr: str) -> dict:
    out = {"name": d.get("name"), "expr": expr}
    if d.get("description"):
        out["description"] = d["description"]
    if d.get("label"):
        out["synonyms"] = [str(d["label"])]
    return out


def _list(d: dict, key: str) -> list[dict]:
    v = d.get(key)
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _skip(kind: str, name: str, why: str) -> dict:
    return {"kind": kind, "name": name, "reason": why}
