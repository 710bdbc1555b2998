"""The rows of ``nl2sql.doctor()`` from what was read: pure functions, one per check, each
returning ``(check, status, detail, fix)`` with status ``ok``, ``warn`` or ``fail``
(docs/install.md "doctor()")."""

from __future__ import annotations

import re
from pathlib import PurePath

from ..core.errors import ConfigError
from ..core.settings import BY_NAME
from ..model.capability import Capability
from ..model.probe import Reach

OK, WARN, FAIL = "ok", "warn", "fail"
Row = tuple[str, str, str, str]
TESTED_MAJORS = (15, 16, 17, 18)  # the supported majors (docs/install.md: what ran where)
# (extension, the least version, the least version on PostgreSQL 18)
MINIMUM = {"vector": ("0.8.0", "0.8.1"), "pg_cron": ("1.0", "1.6.6")}
# beside the database (no PL/Python): what ``nl2sql install`` checks (client.install.MIN_PGVECTOR)
MINIMUM_BESIDE = {"vector": "0.7.0"}
NL2SQL_FUNCTIONS = "nl2sql(), nl2sql.ask(), nl2sql.explain()"


def version_key(version: str | None) -> tuple[int, ...]:
    """A version text as a comparable tuple; a part without leading digits ends it.

    Args:
        version: e.g. ``'0.8.1'`` or ``'1.4-1'`` (None: empty).

    Returns:
        ``(0, 8, 1)``, ``(1, 4)``.
    """
    out = []
    for part in str(version or "").split("."):
        digits = re.match(r"\d+", part)
        if not digits:
            break
        out.append(int(digits.group()))
    return tuple(out)


def _older(name: str, found: str, least: str) -> bool:
    """Whether ``found`` is older than ``least``; pg_cron's on the parts ``found`` names: its
    control file (so ``extversion``) names only the SQL version, ``1.6`` for every 1.6.x, so the
    patch release cannot be seen here (install.sh checks it where it builds pg_cron)."""
    need = version_key(least)
    if name == "pg_cron":
        need = need[: len(version_key(found))]
    return version_key(found) < need


def least_version(name: str, major: int, beside: bool = False) -> str | None:
    """The least version of an extension nl2sql works with.

    Args:
        name: the extension; major: the server's major; beside: nl2sql runs beside this
            database (no PL/Python: ``MINIMUM_BESIDE`` first).

    Returns:
        The version text, or None when any version does.
    """
    if beside and name in MINIMUM_BESIDE:
        return MINIMUM_BESIDE[name]
    pair = MINIMUM.get(name)
    return None if pair is None else (pair[1] if major >= 18 else pair[0])


def version_row(installed: str | None, available: str | None, package: str) -> Row:
    """The extension's version in this database against the importable package's.

    Args:
        installed: ``extversion`` here; available: the control file's ``default_version``;
        package: ``nl2sql.__version__``.

    Returns:
        ``fail`` when installed and package differ, ``warn`` when newer extension files wait for
        ``ALTER EXTENSION nl2sql UPDATE``, else ``ok``.
    """
    check = "extension version"
    if installed != package:
        fix = (
            "ALTER EXTENSION nl2sql UPDATE"
            if version_key(package) > version_key(installed)
            else f"install the nl2sql {installed} Python package into the venv (nl2sql.venv)"
        )
        return check, FAIL, f"extension {installed}, Python package {package}", fix
    if available and version_key(available) > version_key(installed):
        return (
            check,
            WARN,
            f"extension {installed} (package {package}); extension files of {available} are "
            "installed",
            f"install the nl2sql {available} Python package, then ALTER EXTENSION nl2sql UPDATE",
        )
    return check, OK, f"extension {installed}, Python package {package}", ""


def server_row(version_num: int, version_text: str, python: tuple[int, ...]) -> Row:
    """The server's major and the Python its PL/Python embeds.

    Args:
        version_num: ``server_version_num`` (e.g. 170004); version_text: ``server_version``;
        python: ``sys.version_info`` of this backend.

    Returns:
        ``ok`` on a supported major, else ``warn``.
    """
    major = version_num // 10000
    py = ".".join(str(p) for p in python[:3])
    detail = f"PostgreSQL {version_text} (major {major}); PL/Python embeds Python {py}"
    if major in TESTED_MAJORS:
        return "server", OK, detail, ""
    supported = f"{TESTED_MAJORS[0]} to {TESTED_MAJORS[-1]}"
    return "server", WARN, f"{detail}; majors {supported} are supported", ""


def venv_row(
    setting: str | None, site_packages: str, package_dir: str, user: str, unreadable: list[str]
) -> Row:
    """The venv PL/Python imports nl2sql from, and whether the server's OS user reads it.

    Args:
        setting: ``nl2sql.venv`` as set (None: unset, the default is used).
        site_packages: the folder ``_boot`` put on ``sys.path``.
        package_dir: the folder ``nl2sql`` was imported from.
        user: the server's OS user.
        unreadable: paths of the venv that user cannot read (empty when all are readable).

    Returns:
        ``fail`` when something is unreadable, ``warn`` when the package comes from elsewhere,
        else ``ok`` (an unset setting means the default venv, which is the one found).
    """
    shown = setting or "unset (default /opt/nl2sql/venv)"
    detail = f"nl2sql.venv = {shown}; site-packages {site_packages}; OS user {user}"
    if unreadable:
        return (
            "venv",
            FAIL,
            f"{detail}; not readable by {user}: {', '.join(unreadable[:5])}",
            f"make the venv readable by {user} (chmod -R o+rX, or chgrp to its group)",
        )
    if not PurePath(package_dir).is_relative_to(site_packages):
        return (
            "venv",
            WARN,
            f"{detail}; but nl2sql is imported from {package_dir}",
            "remove the other copy of nl2sql from the server's Python path",
        )
    return "venv", OK, detail, ""


def onnx_row(path: str | None, error: str | None, size: int | None, torch: bool) -> Row:
    """The exported ONNX model file the embeddings are computed with.

    Args:
        path: where it is looked for (None when that cannot be said: ``error``).
        error: why it cannot be found or read, or None.
        size: its size in bytes (None when missing).
        torch: whether torch and sentence-transformers are importable (the fallback).

    Returns:
        ``ok`` when present and readable; ``warn`` when missing but torch can stand in;
        ``fail`` otherwise.
    """
    fix = "python -m nl2sql.embedding.export --export-onnx (where torch is installed), or set NL2SQL_ONNX_MODEL"
    if size is not None and error is None:
        return "onnx model", OK, f"{path} ({size / 1e6:.1f} MB)", ""
    why = error or f"{path} does not exist"
    if torch:
        return "onnx model", WARN, f"{why}; embeddings use torch instead (slower)", fix
    return "onnx model", FAIL, f"{why}; and torch is not installed: nothing embeds", fix


def embedder_row(mode: str, info: dict) -> Row:
    """The shared embedding process (``embedding.client.probe``).

    Args:
        mode: setting ``embedder`` (``shared`` or ``local``).
        info: ``client.probe()``'s dict, with ``log_not_kept``: why the shared process did not
            write this backend's last failed call's log row (``query_log_relay``), or None.

    Returns:
        ``ok`` when local or answering; ``warn`` when this backend currently embeds
        in-process after a failure, or its last failed call's log row was not kept; ``fail``
        when the process cannot be reached or started.
    """
    if mode != "shared":
        return "embedder", OK, "setting embedder = local: every backend embeds in-process", ""
    if info.get("log_not_kept") and not info.get("error") and info.get("answers"):
        why = f"this backend's last failed call's log row rolled back: {info['log_not_kept']}"
        return "embedder", WARN, why, "see embedder.log; docs/operations.md, 'Failed calls'"
    if info.get("error") or not info.get("answers"):
        why = info.get("error") or "the process does not answer"
        return (
            "embedder",
            FAIL,
            f"shared embedder unavailable: {why}",
            "see embedder.log in the nl2sql_embedder folder of the data directory, or "
            "SELECT nl2sql.set_setting('embedder', 'local')",
        )
    started = "; started by this call" if info.get("started") else ""
    detail = f"shared embedder answers (pid {info.get('pid')}){started}"
    if info.get("fallback"):
        return "embedder", WARN, f"{detail}; this backend fell back: {info['fallback']}", ""
    return "embedder", OK, detail, ""


def extension_row(
    name: str,
    installed: str | None,
    available: str | None,
    major: int,
    preloaded: bool | None = None,
    elsewhere: str | None = None,
    beside: bool = False,
) -> Row:
    """One extension nl2sql requires (vector, pg_trgm) or can use (pg_cron, pg_stat_statements).

    Args:
        name: the extension; installed: its version in this database (None: not created);
        available: the server's ``default_version`` (None: not installed on the server);
        major: the server's major; preloaded: whether it is in ``shared_preload_libraries``
        (None for those not preloaded); elsewhere: pg_cron's database when not this one;
        beside: nl2sql runs beside this database (``least_version``).

    Returns:
        ``fail`` for a required one missing or too old, or pg_cron too old; ``warn`` for an
        optional one missing; else ``ok``.
    """
    check = f"extension {name}"
    least = least_version(name, major, beside)
    found = installed or available
    if found and least and _older(name, found, least):
        return (
            check,
            FAIL,
            f"{name} {found}; PostgreSQL {major} needs {least} or later",
            (
                f"install {name} {least} or later (docs/install.md), then ALTER EXTENSION {name} UPDATE"
            ),
        )
    if name in ("vector", "pg_trgm"):
        if installed:
            return check, OK, f"{name} {installed}", ""
        return check, FAIL, f"{name} is not created in this database", "CREATE EXTENSION " + name
    use = "nl2sql.schedule_reindex()" if name == "pg_cron" else "nl2sql.mine_queries()"
    if not preloaded:
        line = "shared_preload_libraries = 'pg_cron,pg_stat_statements'"
        what = f"{name} is not in shared_preload_libraries (optional: {use} needs it)"
        return check, WARN, what, f"add {name} to {line} in postgresql.conf; restart"
    if elsewhere:
        return check, OK, f"{name} {found or '?'}: jobs kept in database {elsewhere}", ""
    if not installed:
        return (
            check,
            WARN,
            f"{name} is loaded but not created here ({use} needs it)",
            (f"CREATE EXTENSION {name}"),
        )
    return check, OK, f"{name} {installed}", ""


def key_place(cluster_name: str | None, major: int) -> str:
    """Where the server's environment (the models' keys) is set.

    Args:
        cluster_name: setting ``cluster_name`` (Debian sets ``'17/main'``); major: the server's.

    Returns:
        Debian's per-cluster ``environment`` file, else the service's environment, in words.
    """
    if cluster_name and re.fullmatch(r"\d+/[\w.-]+", cluster_name):
        return f"/etc/postgresql/{cluster_name}/environment"
    return (
        f"the environment of the service that starts PostgreSQL {major} (systemd Environment=, "
        "or the shell running pg_ctl)"
    )


def model_rows(env: str | None, reach: Reach, place: str) -> list[Row]:
    """A model's two rows: its key variable (never the key) and its endpoint's answer.

    Args:
        env: the model's ``api_key_env`` (None: it names none); reach: the probe's answer;
        place: where the server's environment is set (``key_place``).

    Returns:
        ``[key row, endpoint row]``: the key row ``fail`` when the variable is unset; the
        endpoint row ``fail`` when unreachable, timed out or the key was refused, ``warn`` when
        not probed or it answered another HTTP status, else ``ok``.
    """
    name = reach.model
    if env is None:
        key = (f"model {name} key", OK, "no key variable named (api_key_env is NULL)", "")
    elif reach.key_set is False:
        key = (
            f"model {name} key",
            FAIL,
            f"{env} is not set in the server's environment",
            f"set {env} in {place} and restart PostgreSQL",
        )
    else:
        key = (f"model {name} key", OK, f"{env} is set", "")
    check = f"model {name} endpoint"
    fixes = {
        "auth": f"check the key in {env}" if env else "the endpoint wants a key: set api_key_env",
        "timeout": "check base_url and the network from the server",
        "unreachable": "check base_url and the network from the server",
        "error": "check base_url",
    }
    if reach.outcome == "ok":
        return [key, (check, OK, f"{reach.detail} in {reach.ms or 0:.0f} ms", "")]
    if reach.outcome == "skipped":
        return [key, (check, WARN, "not probed: the key is not set", "")]
    if reach.outcome == "http":
        return [key, (check, WARN, f"{reach.detail} (reachable; no model list)", "")]
    return [key, (check, FAIL, reach.detail, fixes.get(reach.outcome, ""))]


def served_row(name: str, model: str, listed: tuple[str, ...] | None) -> Row | None:
    """Whether the endpoint serves the model ``add_model`` names (its ``GET /models`` list).

    Args:
        name: the model's name in nl2sql; model: the model it asks for; listed: the ids the
            endpoint listed (None or empty: not known, no row).

    Returns:
        ``ok`` when listed, ``warn`` naming what is served when not (llama.cpp answers any
        name; a server of several models does not), or None.
    """
    if not listed:
        return None
    if model in listed:
        return f"model {name} served", OK, f"the endpoint serves {model}", ""
    fix = f"SELECT nl2sql.add_model('{name}', '{listed[0]}', …) if that is the model meant"
    return f"model {name} served", WARN, f"the endpoint lists {', '.join(listed[:5])}", fix


def context_row(name: str, window: int | None, budget: int, max_output: int) -> Row | None:
    """Whether the model's context window holds nl2sql's prompts and their answer.

    Args:
        name: the model's name; window: its context window in tokens (None: unknown, no row);
        budget: setting ``prompt_token_budget``; max_output: the answer's cap in tokens.

    Returns:
        ``ok``, or ``warn`` when the window is smaller than both (the schema is then pruned to
        fit, and may lose columns), or None.
    """
    if not window:
        return None
    needed = budget + max_output
    check = f"model {name} context"
    if window >= needed:
        return (
            check,
            OK,
            f"{window} tokens hold a prompt of {budget} and an answer of {max_output}",
            "",
        )
    return (
        check,
        WARN,
        f"{window} tokens: less than the prompt budget ({budget}) and an answer "
        f"({max_output}); schemas are pruned to fit",
        "give the server a larger context (llama.cpp: --ctx-size per slot times --parallel; "
        "nl2sql model start sizes it) and add_model(..., context_window => N)",
    )


def url_credentials_row(name: str) -> Row:
    """A model whose ``base_url`` carries a password (added before ``add_model`` refused it).

    Args:
        name: the model's name.

    Returns:
        A ``fail`` row: every role can read ``nl2sql.model``.
    """
    return (
        f"model {name} base_url",
        FAIL,
        "base_url carries credentials (user:password@host), readable by every role in "
        "nl2sql.model (masked in every message nl2sql shows)",
        f"SELECT nl2sql.add_model('{name}', …, base_url => the URL without user:password@, "
        "api_key_env => 'A_VARIABLE_OF_THE_SERVER')",
    )


def request_row(name: str, cap: Capability, window: tuple[int | None, str]) -> Row:
    """What nl2sql sends a model and why (``capability.decide``), as one row.

    Args:
        name: the model's name; cap: its capability; window: ``(tokens or None, how known)``.

    Returns:
        ``ok`` with the request's shape and each part's source (configured, model name,
        learned, default), ``warn`` when a learned output cap was raised after a cut reply.
    """
    parts = [f"{cap.cap_parameter}={cap.max_output}"]
    parts.append("temperature sent" if cap.send_temperature else "no temperature")
    parts.append("n in one request" if cap.send_n else "samples as separate requests")
    if cap.reasoning_effort:
        parts.append(f"reasoning_effort={cap.reasoning_effort}")
    if window[0]:
        parts.append(f"context window {window[0]} ({window[1]})")
    learned = sorted({f"{f}: {w}" for f, w in cap.source.items() if w.startswith("learned")})
    named = sorted({w for w in cap.source.values() if w.startswith("model name")})
    detail = "; ".join(parts) + (f" — from {named[0]}" if named else "")
    if learned:
        detail += " — " + "; ".join(learned)
    if any(f == "max_output" for f, w in cap.source.items() if w.startswith("learned")):
        return (
            f"model {name} requests",
            WARN,
            detail[:600],
            "a reply was cut by its output cap while thinking: set max_tokens with "
            "nl2sql.add_model to keep the larger cap after a restart",
        )
    return f"model {name} requests", OK, detail[:600], ""


def index_row(covered: int, never: int, changed: int, queued: int, last: str | None) -> Row:
    """How fresh the schema index is.

    Args:
        covered: tables a reindex covers; never: of them, never indexed; changed: indexed but
        changed since; queued: relations the DDL queue holds; last: the latest ``indexed_at``.

    Returns:
        ``fail`` when nothing is indexed, ``warn`` when tables changed, wait in the queue or
        none is covered, else ``ok``.
    """
    fix = "SELECT nl2sql.reindex(); (or nl2sql.schedule_reindex('0 3 * * *'))"
    when = f"last table indexed at {last}" if last else "nothing indexed yet"
    if covered == 0:
        return (
            "index",
            WARN,
            "no table of the setting schemas is visible",
            ("SELECT nl2sql.set_setting('schemas', 'public,other')"),
        )
    if last is None:
        return "index", FAIL, f"{covered} tables covered; {when}", fix
    detail = (
        f"{covered} tables covered; {never} never indexed, {changed} changed since indexed, "
        f"{queued} queued by DDL; {when}"
    )
    return (
        "index",
        (WARN if never or changed or queued else OK),
        detail,
        (fix if never or changed or queued else ""),
    )


def settings_row(stored: list[tuple[str, str]]) -> Row:
    """Settings that differ from their defaults (rows of ``nl2sql.setting``).

    Args:
        stored: ``(key, value)`` pairs as stored.

    Returns:
        ``fail`` when a stored value does not parse, ``warn`` for unknown keys, else ``ok``;
        the detail lists ``key = value (default d)`` of each differing one.
    """
    changed, unknown, bad = [], [], []
    for key, value in sorted(stored):
        s = BY_NAME.get(key)
        if s is None:
            unknown.append(key)
            continue
        try:
            if s.parse(value) != s.parse(s.default_text):
                changed.append(f"{key} = {value} (default {s.default_text})")
        except ConfigError:
            bad.append(f"{key} = {value!r}")
    detail = "; ".join(changed) or "all at their defaults"
    if bad:
        fix = "SELECT nl2sql.set_setting(key, value) with a valid value (docs/settings.md)"
        return "settings", FAIL, f"invalid: {', '.join(bad)}; {detail}", fix
    if unknown:
        return (
            "settings",
            WARN,
            f"unknown keys {', '.join(unknown)}; {detail}",
            ("DELETE FROM nl2sql.setting WHERE key = ... (a typo?)"),
        )
    return "settings", OK, detail, ""


def roles_row(public: bool, roles: list[str]) -> Row:
    """Which roles may call ``nl2sql()``.

    Args:
        public: whether PUBLIC holds EXECUTE; roles: the login roles that may (superusers
        aside), when it does not.

    Returns:
        ``ok``; ``warn`` when no role but superusers may call it.
    """
    if public:
        return "roles", OK, f"every role may call {NL2SQL_FUNCTIONS} (EXECUTE to PUBLIC)", ""
    if not roles:
        return (
            "roles",
            WARN,
            f"only superusers may call {NL2SQL_FUNCTIONS}",
            (
                "GRANT EXECUTE ON FUNCTION public.nl2sql(text, text, text, text), "
                "nl2sql._nl2sql(text, text, text, text) TO analyst (docs/install.md)"
            ),
        )
    shown = ", ".join(roles[:20]) + (f" and {len(roles) - 20} more" if len(roles) > 20 else "")
    return "roles", OK, f"{len(roles)} roles may call {NL2SQL_FUNCTIONS}: {shown}", ""
