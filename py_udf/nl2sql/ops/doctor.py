"""``nl2sql.doctor()``: what a DBA checks first, read from this backend, its server and the
configured models; one row per check (the rows themselves: ``_doctor_rows``;
docs/install.md "doctor()")."""

from __future__ import annotations

import importlib.util
import os
import pwd
import sys
import time
from pathlib import Path

from .. import __version__
from ..core import spi
from ..core.errors import ConfigError, EmbeddingError
from ..core.redaction import configured_secrets, redact, url_secrets
from ..core.settings import get_settings
from ..embedding import client as embed_client
from ..embedding import encode, index_model, query_log_relay, value_vectors
from ..model import capability, probe
from ..model.config import get_models
from ..net import deadline
from . import _ddl_queue, table_state
from . import _doctor_rows as rows

__all__ = ["ALLOWED", "doctor", "may_run", "unreadable"]

DEFAULT_VENV = "/opt/nl2sql/venv"  # as nl2sql._boot() reads an unset nl2sql.venv
QUERY_CANCELED = "57014"  # SQLSTATE of a cancel or statement_timeout: the call ends
ALLOWED = "nl2sql.doctor()"  # whoever may EXECUTE it may run the checks
EXTENSIONS = (
    "SELECT a.name, a.default_version AS available, e.extversion AS installed "
    "FROM pg_catalog.pg_available_extensions a "
    "LEFT JOIN pg_catalog.pg_extension e ON e.extname = a.name "
    "WHERE a.name = ANY($1)"
)
CALLERS = (
    "SELECT r.rolname FROM pg_catalog.pg_roles r WHERE r.rolcanlogin AND NOT r.rolsuper "
    "AND r.rolname !~ '^pg_' "
    "AND pg_catalog.has_function_privilege(r.oid, $1, 'EXECUTE') "
    "AND pg_catalog.has_function_privilege(r.oid, $2, 'EXECUTE') ORDER BY 1"
)
PUBLIC_CALLS = (
    "SELECT pg_catalog.has_function_privilege('public', $1, 'EXECUTE') "
    "AND pg_catalog.has_function_privilege('public', $2, 'EXECUTE') AS p"
)
NL2SQL_SIGNATURES = (
    "public.nl2sql(text, text, text, text)",
    "nl2sql._nl2sql(text, text, text, text)",
)


def may_run(plpy) -> bool:
    """Whether the current role may EXECUTE ``nl2sql.doctor()`` (the inner ``_doctor`` is
    executable by every role and asks this first: one GRANT decides).

    Args:
        plpy: PL/Python's module (SPI access).

    Returns:
        True when it may.
    """
    got = spi.query(
        plpy, "SELECT pg_catalog.has_function_privilege($1, 'EXECUTE') AS ok", [ALLOWED], ["text"]
    )
    return bool(got[0]["ok"])


def unreadable(paths: list[Path], walk: Path | None = None) -> list[str]:
    """The paths this process may not read (folders: read and enter).

    Args:
        paths: files and folders to check.
        walk: a folder whose every file and folder is checked as well (the nl2sql package).

    Returns:
        The unreadable ones as text, in the order met.
    """
    todo = list(paths)
    if walk is not None:
        todo += sorted(walk.rglob("*.py")) + [p for p in walk.rglob("*") if p.is_dir()]
    out = []
    for p in todo:
        mode = os.R_OK | (os.X_OK if p.is_dir() else 0)
        if not os.access(p, mode):
            out.append(os.fspath(p))
    return out


def _settings(plpy, name: str) -> str | None:
    got = spi.query(plpy, "SELECT pg_catalog.current_setting($1, true) AS v", [name], ["text"])
    return got[0]["v"]


def _guarded(plpy, check: str, fn, *args) -> list[rows.Row]:
    """Run one check in a subtransaction; its failure becomes its own ``fail`` row."""
    try:
        with plpy.subtransaction():
            got = fn(plpy, *args)
    except Exception as e:  # one check failing must not hide the others
        if deadline.cancelled(e) or getattr(e, "sqlstate", None) == QUERY_CANCELED:
            raise  # the statement is being cancelled: no further check
        why = redact(f"{type(e).__name__}: {e}", configured_secrets(plpy))
        fix = "run nl2sql.doctor() as the extension's owner" if _denied(e) else ""
        return [(check, rows.FAIL, f"the check failed: {why}", fix)]
    return got if isinstance(got, list) else [got]


def _denied(e: Exception) -> bool:
    """Whether an SPI error is a refused privilege (SQLSTATE 42501)."""
    return getattr(e, "sqlstate", None) == "42501"


def _version(plpy) -> rows.Row:
    got = spi.query(
        plpy,
        "SELECT e.extversion, a.default_version FROM pg_catalog.pg_extension e "
        "JOIN pg_catalog.pg_available_extensions a ON a.name = e.extname "
        "WHERE e.extname = 'nl2sql'",
    )
    return rows.version_row(got[0]["extversion"], got[0]["default_version"], __version__)


def _server(plpy) -> rows.Row:
    num = int(_settings(plpy, "server_version_num"))
    return rows.server_row(num, _settings(plpy, "server_version"), tuple(sys.version_info))


def _venv(plpy) -> rows.Row:
    setting = _settings(plpy, "nl2sql.venv") or None
    venv = Path(setting or DEFAULT_VENV)
    # the folder nl2sql._boot() puts on sys.path for this venv
    sp = (venv / "lib" / "python{}.{}".format(*sys.version_info[:2]) / "site-packages").resolve()
    package = Path(__file__).resolve().parents[1]  # <site-packages>/nl2sql
    python = venv / "bin" / "python3"
    paths = [venv, sp] + ([python] if python.exists() else [])
    user = pwd.getpwuid(os.geteuid()).pw_name
    return rows.venv_row(
        setting, os.fspath(sp), os.fspath(package), user, unreadable(paths, package)
    )


def _onnx(plpy) -> rows.Row:
    torch = all(importlib.util.find_spec(m) for m in ("torch", "sentence_transformers"))
    try:
        path = encode.onnx_path()
    except EmbeddingError as e:
        return rows.onnx_row(None, str(e), None, torch)
    if not path.exists():
        return rows.onnx_row(os.fspath(path), None, None, torch)
    if not os.access(path, os.R_OK):
        return rows.onnx_row(os.fspath(path), f"{path} is not readable", None, torch)
    other = index_model.mismatch(plpy, get_settings(plpy).embedding_precision)
    if other:  # the setting asks for the other model file than the index's
        return "onnx model", rows.WARN, f"{path}: {other}", "SELECT nl2sql.reindex(force => true)"
    return rows.onnx_row(os.fspath(path), None, path.stat().st_size, torch)


def _embedder(plpy) -> rows.Row:
    mode = get_settings(plpy).embedder
    info = embed_client.probe(start=True) if mode == "shared" else {}
    info["log_not_kept"] = query_log_relay.last_not_kept()["why"]
    return rows.embedder_row(mode, info)


def _embedding_model(plpy) -> rows.Row:
    """Which model embeds questions (the index's), asked to embed one text: its dimensions
    against the value index's columns, and the time it took."""
    name = "embedding model"
    index_model.configure_recorded(plpy)  # doctor() is no entry point: as a question would
    model = encode.current_model()
    if model.startswith("refused: "):
        return name, rows.FAIL, model[9:], "SELECT nl2sql.reindex(force => true)"
    t0 = time.perf_counter()
    try:
        vec = encode.embed(["nl2sql doctor"], cache=False)[0]
    except EmbeddingError as e:
        return name, rows.FAIL, f"{model}: {e}", "check the endpoint, then rerun doctor()"
    ms, cols = (time.perf_counter() - t0) * 1000, index_model.dimensions(plpy)
    if len(vec) != cols:
        return (
            name,
            rows.FAIL,
            f"{model}: {len(vec)} dimensions, the index {cols}",
            ("SELECT nl2sql.reindex(force => true)"),
        )
    values = value_vectors.current() or model
    detail = f"{model} answered in {ms:.0f} ms ({cols} dimensions); cell values: {values}"
    return name, rows.OK, detail, None


def _extensions(plpy) -> list[rows.Row]:
    major = int(_settings(plpy, "server_version_num")) // 10000
    names = ["vector", "pg_trgm", "pg_cron", "pg_stat_statements"]
    found = {r["name"]: r for r in spi.query(plpy, EXTENSIONS, [names], ["text[]"])}
    preload = {p.strip() for p in (_settings(plpy, "shared_preload_libraries") or "").split(",")}
    here = spi.query(plpy, "SELECT pg_catalog.current_database() AS d")[0]["d"]
    cron_db = _settings(plpy, "cron.database_name")
    beside = not spi.query(
        plpy, "SELECT 1 FROM pg_catalog.pg_language WHERE lanname = 'plpython3u'"
    )
    out = []
    for name in names:
        r = found.get(name, {})
        out.append(
            rows.extension_row(
                name,
                r.get("installed"),
                r.get("available"),
                major,
                None if name in ("vector", "pg_trgm") else name in preload,
                cron_db if name == "pg_cron" and cron_db and cron_db != here else None,
                beside,
            )
        )
    return out


def _models(plpy) -> list[rows.Row]:
    try:
        models = get_models(plpy)
    except ConfigError as e:
        return [("models", rows.FAIL, str(e), "SELECT nl2sql.add_model(...) (README, 'Models')")]
    major = int(_settings(plpy, "server_version_num")) // 10000
    place = rows.key_place(_settings(plpy, "cluster_name"), major)
    budget = get_settings(plpy).prompt_token_budget
    reaches = probe.probe_all(models, tick=lambda: spi.cancel_point(plpy))
    capability.adopt(embed_client.relayed_capabilities())
    out = []
    for m, reach in zip(models, reaches):
        out += rows.model_rows(m.api_key_env, reach, place)
        if url_secrets(m.base_url):  # added before add_model refused them
            out.append(rows.url_credentials_row(m.name))
        window = capability.window_of(m) if reach.outcome == "ok" else (None, "not asked")
        cap = capability.decide(m)
        capability.server_facts(cap, window[1])
        out.append(rows.request_row(m.name, cap, window))
        extra = (
            rows.served_row(m.name, m.model, reach.listed),
            rows.context_row(m.name, window[0], budget, cap.max_output),
        )
        out += [r for r in extra if r is not None]
    return out


def _index(plpy) -> rows.Row:
    st = get_settings(plpy)
    states = table_state.table_states(plpy, None, None, st)
    never = sum(1 for s in states if s["old_fingerprint"] is None)
    changed = sum(
        1 for s in states if s["old_fingerprint"] is not None and table_state.needs_reindex(s)
    )
    queued = len(_ddl_queue.queued_tables(plpy))
    last = spi.query(plpy, "SELECT max(indexed_at)::text AS t FROM nl2sql.schema_table")[0]["t"]
    return rows.index_row(len(states), never, changed, queued, last)


def _stored_settings(plpy) -> rows.Row:
    stored = spi.query(
        plpy,
        "SELECT key, value FROM nl2sql.setting WHERE key <> ALL($1)",
        [[index_model.KEY, index_model.ENDPOINT_KEY, index_model.VALUE_KEY]],
        ["text[]"],
    )
    return rows.settings_row([(r["key"], r["value"]) for r in stored])


def _roles(plpy) -> rows.Row:
    sig = list(NL2SQL_SIGNATURES)
    public = spi.query(plpy, PUBLIC_CALLS, sig, ["text", "text"])[0]["p"]
    names = (
        [] if public else [r["rolname"] for r in spi.query(plpy, CALLERS, sig, ["text", "text"])]
    )
    return rows.roles_row(bool(public), names)


CHECKS = (
    ("extension version", _version),
    ("server", _server),
    ("venv", _venv),
    ("onnx model", _onnx),
    ("embedder", _embedder),
    ("embedding model", _embedding_model),
    ("extensions", _extensions),
    ("models", _models),
    ("index", _index),
    ("settings", _stored_settings),
    ("roles", _roles),
)


def doctor(plpy) -> list[rows.Row]:
    """Run every check, in order; a check that raises becomes a ``fail`` row of its own.

    Args:
        plpy: PL/Python's module (SPI access; this is the backend's main thread).

    Returns:
        ``(check, status, detail, fix)`` rows; status ``ok``, ``warn`` or ``fail``. Models are
        probed in parallel, at most ``probe.TOTAL_S`` seconds in all; no key is shown.
    """
    out: list[rows.Row] = []
    for name, fn in CHECKS:
        out += _guarded(plpy, name, fn)
    return out
